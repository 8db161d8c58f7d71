#include <cstring>

#include "api/handle.hpp"
#include "strideweave/strideweave_testing.h"
#include "api/versioned.hpp"
#include "async/loop.hpp"

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
      d = struct_in(desc, d, "sw_runtime_create: desc");
      if (d.worker_threads > 64)
        value_error("sw_runtime_create: worker_threads " + std::to_string(d.worker_threads) + " exceeds 64");
      if (d.compute_threads > 256)
        value_error("sw_runtime_create: compute_threads " + std::to_string(d.compute_threads) + " exceeds 256");
      if (d.allocator && (!d.allocator->alloc || !d.allocator->free))
        value_error("sw_runtime_create: the allocator needs both alloc and free");
      // Read as the integer the caller stored: a negative level is no value
      // of sw_log_level_t in C++, so loading it as the enum is undefined.
      int32_t level;
      static_assert(sizeof level == sizeof d.log_level);
      std::memcpy(&level, &d.log_level, sizeof level);
      if (level < SW_LOG_DEBUG)
        value_error("sw_runtime_create: log_level " + std::to_string(level) + " is negative (SW_LOG_DEBUG is 0)");
    }
    *out_runtime = to_handle<sw_runtime_t>(make_ref<Runtime>(d));
  });
}

SW_API void sw_runtime_retain(sw_runtime_t* runtime) {
  if (runtime) reinterpret_cast<Runtime*>(reinterpret_cast<Object*>(runtime))->retain_external();
}

SW_API void sw_runtime_release(sw_runtime_t* runtime) {
  if (runtime) static_cast<Runtime*>(reinterpret_cast<Object*>(runtime))->release_external();
}

SW_API sw_error_t* sw_runtime_shutdown(sw_runtime_t* runtime) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (rt->loop().on_loop_thread()) state_error("sw_runtime_shutdown must not be called from a loop-thread callback");
    rt->shutdown();
  });
}

SW_API sw_error_t* sw_runtime_event_fd(sw_runtime_t* runtime, int* out_fd) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    require(out_fd, "out_fd");
    *out_fd = rt->event_fd();
  });
}

SW_API sw_error_t* sw_runtime_process_events(sw_runtime_t* runtime, size_t* out_fired) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    const size_t fired = rt->process_events();
    if (out_fired) *out_fired = fired;
  });
}

SW_API sw_error_t* sw_testing_inject_fault(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t nth) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (kind < SW_FAULT_ALLOCATION || kind > SW_FAULT_TILE_WORK)
      value_error("sw_testing_inject_fault: unknown fault kind " + std::to_string(static_cast<int>(kind)));
    rt->arm_fault(static_cast<FaultKind>(kind), nth);
  });
}

SW_API sw_error_t* sw_testing_fault_counts(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t* out_reached,
                                           uint64_t* out_injected) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (kind < SW_FAULT_ALLOCATION || kind > SW_FAULT_TILE_WORK)
      value_error("sw_testing_fault_counts: unknown fault kind " + std::to_string(static_cast<int>(kind)));
    uint64_t reached = 0, injected = 0;
    rt->fault_counts(static_cast<FaultKind>(kind), &reached, &injected);
    if (out_reached) *out_reached = reached;
    if (out_injected) *out_injected = injected;
  });
}

SW_API sw_error_t* sw_testing_hold(sw_runtime_t* runtime, sw_fault_kind_t kind, uint64_t nth) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (kind != SW_FAULT_READ && kind != SW_FAULT_WRITE && kind != SW_FAULT_TILE_WORK)
      value_error("sw_testing_hold: only storage reads and writes and tiled work can be held, not fault kind " +
                  std::to_string(static_cast<int>(kind)));
    rt->arm_hold(static_cast<FaultKind>(kind), nth);
  });
}

SW_API sw_error_t* sw_testing_wait_held(sw_runtime_t* runtime, int64_t timeout_ns) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (!rt->wait_held(timeout_ns))
      throw_error(SW_ERROR_TIMEOUT, "sw_testing_wait_held: no held transfer completed within " +
                                        std::to_string(timeout_ns) + " ns");
  });
}

SW_API sw_error_t* sw_testing_release_hold(sw_runtime_t* runtime) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    if (!rt->release_hold()) state_error("sw_testing_release_hold: no transfer is held");
  });
}

SW_API sw_error_t* sw_runtime_compute_threads(const sw_runtime_t* runtime, uint32_t* out_threads) {
  return guard([&] {
    Runtime* rt = get<Runtime>(runtime, "runtime");
    require(out_threads, "out_threads");
    *out_threads = rt->compute().threads();
  });
}

}  // extern "C"
