// A value form of sw::Error for completions that cross threads.
#pragma once

#include <exception>
#include <string>

#include "base/error.hpp"

namespace sw {

struct Status {
  sw_error_code_t code = SW_OK;
  std::string message;

  bool ok() const { return code == SW_OK; }
  static Status make(sw_error_code_t code, std::string message) { return Status{code, std::move(message)}; }
  [[noreturn]] void raise() const { throw_error(code, message); }
};

// Runs `body`, turning whatever it throws into a Status.
template <typename F>
Status capture(F&& body) noexcept {
  try {
    body();
    return {};
  } catch (const Error& e) {
    return Status{e.code(), e.message()};
  } catch (const std::bad_alloc&) {
    return Status{SW_ERROR_OUT_OF_MEMORY, "out of memory"};
  } catch (const std::exception& e) {
    return Status{SW_ERROR_INTERNAL, std::string("internal error: ") + e.what()};
  } catch (...) {
    return Status{SW_ERROR_INTERNAL, "internal error: unknown exception"};
  }
}

}  // namespace sw
