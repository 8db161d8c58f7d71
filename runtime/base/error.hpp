// The one error model: C++ code throws sw::Error; the API firewall turns it
// into an sw_error_t*. Nothing else crosses the ABI.
#pragma once

#include <string>
#include <utility>

#include "strideweave/strideweave.h"

namespace sw {

class Error {
 public:
  Error(sw_error_code_t code, std::string message) : code_(code), message_(std::move(message)) {}
  sw_error_code_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  sw_error_code_t code_;
  std::string message_;
};

[[noreturn]] void throw_error(sw_error_code_t code, std::string message);
[[noreturn]] inline void type_error(std::string m) { throw_error(SW_ERROR_TYPE, std::move(m)); }
[[noreturn]] inline void value_error(std::string m) { throw_error(SW_ERROR_VALUE, std::move(m)); }
[[noreturn]] inline void state_error(std::string m) { throw_error(SW_ERROR_STATE, std::move(m)); }
[[noreturn]] inline void unsupported_error(std::string m) { throw_error(SW_ERROR_UNSUPPORTED, std::move(m)); }
[[noreturn]] inline void index_error(std::string m) { throw_error(SW_ERROR_INDEX, std::move(m)); }
[[noreturn]] inline void internal_error(std::string m) { throw_error(SW_ERROR_INTERNAL, std::move(m)); }

}  // namespace sw

// The public error object. The out-of-memory error is a static instance so
// that reporting it needs no allocation; sw_error_free ignores it.
struct sw_error_t {
  sw_error_code_t code;
  std::string message;
  bool is_static;
};

namespace sw {

// Allocates an sw_error_t, or returns the static out-of-memory error.
sw_error_t* make_error(sw_error_code_t code, const std::string& message) noexcept;
sw_error_t* out_of_memory_error() noexcept;

// The exception firewall around every extern "C" body.
template <typename F>
sw_error_t* guard(F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return make_error(e.code(), e.message());
  } catch (const std::bad_alloc&) {
    return out_of_memory_error();
  } catch (const std::exception& e) {
    return make_error(SW_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_error(SW_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace sw
