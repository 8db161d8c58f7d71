#include "base/error.hpp"

#include <new>

namespace sw {

void throw_error(sw_error_code_t code, std::string message) { throw Error(code, std::move(message)); }

sw_error_t* out_of_memory_error() noexcept {
  // Constructed at load time; never freed.
  static sw_error_t oom{SW_ERROR_OUT_OF_MEMORY, "out of memory", true};
  return &oom;
}

sw_error_t* make_error(sw_error_code_t code, const std::string& message) noexcept {
  if (code == SW_ERROR_OUT_OF_MEMORY && message == "out of memory") return out_of_memory_error();
  try {
    return new sw_error_t{code, message, false};
  } catch (...) {
    return out_of_memory_error();
  }
}

}  // namespace sw
