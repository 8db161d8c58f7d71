#include "api/handle.hpp"
#include "core/dtype.hpp"

using namespace sw;

extern "C" {

SW_API uint32_t sw_version(void) { return SW_VERSION; }

SW_API const char* sw_version_string(void) {
#define SW_STR2(x) #x
#define SW_STR(x) SW_STR2(x)
  return SW_STR(SW_VERSION_MAJOR) "." SW_STR(SW_VERSION_MINOR) "." SW_STR(SW_VERSION_PATCH);
}

SW_API sw_error_code_t sw_error_code(const sw_error_t* error) { return error ? error->code : SW_OK; }

SW_API const char* sw_error_message(const sw_error_t* error) { return error ? error->message.c_str() : ""; }

SW_API void sw_error_free(sw_error_t* error) {
  if (error && !error->is_static) delete error;
}

SW_API const char* sw_error_code_name(sw_error_code_t code) {
  switch (code) {
    case SW_OK: return "OK";
    case SW_ERROR_TYPE: return "TYPE";
    case SW_ERROR_VALUE: return "VALUE";
    case SW_ERROR_STATE: return "STATE";
    case SW_ERROR_UNSUPPORTED: return "UNSUPPORTED";
    case SW_ERROR_INDEX: return "INDEX";
    case SW_ERROR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case SW_ERROR_IO: return "IO";
    case SW_ERROR_DATA_CORRUPT: return "DATA_CORRUPT";
    case SW_ERROR_DEVICE_LOST: return "DEVICE_LOST";
    case SW_ERROR_STALE_HANDLE: return "STALE_HANDLE";
    case SW_ERROR_TIMEOUT: return "TIMEOUT";
    case SW_ERROR_CANCELLED: return "CANCELLED";
    case SW_ERROR_INTERNAL: return "INTERNAL";
    default: return "UNKNOWN";
  }
}

SW_API sw_error_t* sw_error_create(sw_error_code_t code, const char* message) {
  try {
    std::string text = message ? message : "";
    if (code < SW_ERROR_TYPE || code > SW_ERROR_INTERNAL)
      return make_error(SW_ERROR_INTERNAL, "invalid error code " + std::to_string(static_cast<int32_t>(code)) + ": " + text);
    return make_error(code, text);
  } catch (...) {
    return out_of_memory_error();
  }
}

SW_API size_t sw_dtype_size(sw_dtype_t dtype) { return dtype_is_quantized(dtype) ? 0 : dtype_size(dtype); }

SW_API size_t sw_dtype_block_elements(sw_dtype_t dtype) { return static_cast<size_t>(dtype_block_elements(dtype)); }

SW_API size_t sw_dtype_block_bytes(sw_dtype_t dtype) { return dtype_block_bytes(dtype); }

SW_API const char* sw_dtype_name(sw_dtype_t dtype) { return dtype_name(dtype); }

}  // extern "C"
