#include <cstddef>
#include <cstring>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "carriers/file/file_carrier.hpp"
#include "core/dtype.hpp"

using namespace sw;
using namespace sw::api;

namespace {

// Requests in flight per transfer beyond this only queue in libuv's pool.
constexpr uint32_t kMaxRequestsInFlight = 64;

// The options of a (possibly older, shorter) desc; NULL gives the defaults.
FileCarrierOptions file_options(const sw_file_carrier_desc_t* desc, const char* what) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  if (desc) d = struct_in(desc, d, (std::string(what) + ": desc").c_str());
  if (d.directory && !*d.directory) value_error(std::string(what) + ": desc->directory is empty; pass NULL for the default");
  if (d.requests_in_flight > kMaxRequestsInFlight)
    value_error(std::string(what) + ": desc->requests_in_flight " + std::to_string(d.requests_in_flight) +
                " exceeds " + std::to_string(kMaxRequestsInFlight));
  FileCarrierOptions o;
  if (d.directory) o.directory = d.directory;
  o.direct_io = d.direct_io;
  if (d.chunk_bytes) o.chunk_bytes = d.chunk_bytes;
  if (d.requests_in_flight) o.requests_in_flight = d.requests_in_flight;
  return o;
}

}  // namespace

extern "C" {

SW_API void sw_file_carrier_desc_init(sw_file_carrier_desc_t* desc) {
  if (!desc) return;
  *desc = sw_file_carrier_desc_t{};
  desc->struct_size = sizeof(sw_file_carrier_desc_t);
}

SW_API sw_error_t* sw_carrier_create_file(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_file_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_file");
    require(out_carrier, "out_carrier");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_create_file");
    count_allocation(*rt, "File carrier");
    *out_carrier = to_handle<sw_carrier_t>(FileCarrier::create(rt, dtype, size, options));
  });
}

SW_API sw_error_t* sw_carrier_open_file(sw_runtime_t* runtime, sw_dtype_t dtype, const char* path,
                                        uint64_t byte_offset, size_t size, const sw_file_carrier_desc_t* desc,
                                        sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_open_file");
    require(path, "path");
    require(out_carrier, "out_carrier");
    const FileCarrierOptions options = file_options(desc, "sw_carrier_open_file");
    *out_carrier = to_handle<sw_carrier_t>(FileCarrier::open(rt, dtype, path, byte_offset, size, options));
  });
}

}  // extern "C"
