#include <string>
#include <vector>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "core/dtype.hpp"
#ifdef SW_HAVE_HIREDIS
#include "carriers/remote/remote_carrier.hpp"
#endif

using namespace sw;
using namespace sw::api;

namespace {

constexpr uint32_t kMaxRequestsInFlight = 1024;

#ifdef SW_HAVE_HIREDIS
RemoteCarrierOptions remote_options(const sw_remote_carrier_desc_t* desc, const char* what) {
  require(desc, "desc");
  sw_remote_carrier_desc_t d;
  sw_remote_carrier_desc_init(&d);
  d = struct_in(desc, d, (std::string(what) + ": desc").c_str());
  if (!d.endpoints && d.endpoint_count) value_error(std::string(what) + ": desc->endpoints is NULL");
  if (!d.endpoint_count) value_error(std::string(what) + ": desc->endpoint_count is 0; name at least one server");
  if (!d.key_namespace) value_error(std::string(what) + ": desc->key_namespace must not be NULL");
  if (d.requests_in_flight > kMaxRequestsInFlight)
    value_error(std::string(what) + ": desc->requests_in_flight " + std::to_string(d.requests_in_flight) +
                " exceeds " + std::to_string(kMaxRequestsInFlight));
  RemoteCarrierOptions o;
  for (size_t i = 0; i < d.endpoint_count; ++i) {
    if (!d.endpoints[i]) value_error(std::string(what) + ": desc->endpoints[" + std::to_string(i) + "] is NULL");
    o.endpoints.emplace_back(d.endpoints[i]);
  }
  o.key_namespace = d.key_namespace;
  if (d.user) o.user = d.user;
  if (d.password_file) o.password_file = d.password_file;
  o.allow_plaintext = d.allow_plaintext;
  o.read_only = d.read_only;
  o.block_elements = d.block_elements;
  o.placement_seed = d.placement_seed;
  o.deadline_ms = d.deadline_ms;
  o.chunk_bytes = d.chunk_bytes;
  o.requests_in_flight = d.requests_in_flight;
  o.persistent = d.persistent;
  o.lease_ms = d.lease_ms;
  if (d.replica_count) {
    if (!d.replica_endpoints || !d.replica_of)
      value_error(std::string(what) + ": desc->replica_count is " + std::to_string(d.replica_count) +
                  " but desc->replica_endpoints or desc->replica_of is NULL");
    o.replicas.resize(o.endpoints.size());
    for (size_t i = 0; i < d.replica_count; ++i) {
      const std::string at = "desc->replica_endpoints[" + std::to_string(i) + "]";
      if (!d.replica_endpoints[i]) value_error(std::string(what) + ": " + at + " is NULL");
      if (d.replica_of[i] >= o.endpoints.size())
        value_error(std::string(what) + ": desc->replica_of[" + std::to_string(i) + "] is " +
                    std::to_string(d.replica_of[i]) + ", not one of the " + std::to_string(o.endpoints.size()) +
                    " endpoints");
      o.replicas[d.replica_of[i]].emplace_back(d.replica_endpoints[i]);
    }
  }
  return o;
}
#else
[[noreturn]] void no_remote(const char* what) {
  unsupported_error(std::string(what) + ": this build of StrideWeave has no remote carrier (it was built without "
                                         "hiredis; install libhiredis-dev and rebuild)");
}
#endif

}  // namespace

extern "C" {

SW_API void sw_remote_carrier_desc_init(sw_remote_carrier_desc_t* desc) {
  if (!desc) return;
  *desc = sw_remote_carrier_desc_t{};
  desc->struct_size = sizeof(sw_remote_carrier_desc_t);
}

SW_API sw_error_t* sw_carrier_create_remote(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                            const sw_remote_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_remote");
    require(out_carrier, "out_carrier");
#ifdef SW_HAVE_HIREDIS
    RemoteCarrierOptions options = remote_options(desc, "sw_carrier_create_remote");
    if (options.read_only) value_error("sw_carrier_create_remote: desc->read_only is for sw_carrier_open_remote");
    count_allocation(*rt, "Remote carrier");
    *out_carrier = to_handle<sw_carrier_t>(RemoteCarrier::create(rt, dtype, size, options));
#else
    (void)size;
    (void)desc;
    no_remote("sw_carrier_create_remote");
#endif
  });
}

SW_API sw_error_t* sw_carrier_open_remote(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_remote_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_open_remote");
    require(out_carrier, "out_carrier");
#ifdef SW_HAVE_HIREDIS
    RemoteCarrierOptions options = remote_options(desc, "sw_carrier_open_remote");
    if (options.persistent) value_error("sw_carrier_open_remote: desc->persistent is for sw_carrier_create_remote");
    *out_carrier = to_handle<sw_carrier_t>(RemoteCarrier::open(rt, dtype, size, options));
#else
    (void)size;
    (void)desc;
    no_remote("sw_carrier_open_remote");
#endif
  });
}

}  // extern "C"
