#include "api/handle.hpp"

using namespace sw;
using namespace sw::api;

namespace sw::api {

std::vector<int64_t> extents_arg(const int64_t* extents, size_t count, const char* arg) {
  if (count && !extents) value_error(std::string(arg) + " must not be NULL when its count is " + std::to_string(count));
  if (count > SW_MAX_RANK)
    value_error(std::string(arg) + ": rank " + std::to_string(count) + " exceeds the maximum of " +
                std::to_string(SW_MAX_RANK));
  std::vector<int64_t> v(extents, extents + count);
  for (size_t i = 0; i < count; ++i)
    if (v[i] < 0) value_error(std::string(arg) + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is negative");
  return v;
}

}  // namespace sw::api

extern "C" {

SW_API void sw_runtime_desc_init(sw_runtime_desc_t* desc) {
  if (!desc) return;
  *desc = sw_runtime_desc_t{};
  desc->struct_size = sizeof(sw_runtime_desc_t);
  desc->pool_limit_bytes = SIZE_MAX;
  desc->log_level = SW_LOG_WARNING;
}

SW_API sw_error_t* sw_runtime_create(const sw_runtime_desc_t* desc, sw_runtime_t** out_runtime) {
  return guard([&] {
    require(out_runtime, "out_runtime");
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    if (desc) {
      if (desc->struct_size < offsetof(sw_runtime_desc_t, allocator) + sizeof(void*) ||
          desc->struct_size > sizeof(sw_runtime_desc_t))
        value_error("sw_runtime_create: desc->struct_size " + std::to_string(desc->struct_size) +
                    " is not a size this library knows; call sw_runtime_desc_init first");
      d = *desc;
      if (d.compute_threads > 256)
        value_error("sw_runtime_create: compute_threads " + std::to_string(d.compute_threads) + " exceeds 256");
      if (d.allocator && (!d.allocator->alloc || !d.allocator->free))
        value_error("sw_runtime_create: the allocator needs both alloc and free");
    }
    *out_runtime = to_handle<sw_runtime_t>(make_ref<Runtime>(d));
  });
}

SW_API void sw_runtime_retain(sw_runtime_t* runtime) { retain_handle(runtime); }
SW_API void sw_runtime_release(sw_runtime_t* runtime) { release_handle(runtime); }

SW_API sw_error_t* sw_runtime_compute_threads(const sw_runtime_t* runtime, uint32_t* out_threads) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    require(out_threads, "out_threads");
    *out_threads = rt->compute().threads();
  });
}

}  // extern "C"
