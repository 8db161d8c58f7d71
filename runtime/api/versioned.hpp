// The one rule for versioned structs, those that begin with
// `uint32_t struct_size`: a struct whose struct_size is the size of a
// released version of it (an older, shorter header's) is accepted, and the
// fields it lacks keep their defaults; any other size (a newer header than
// this library, or a size that ends inside a field) is VALUE. Out-structs
// are written up to the caller's struct_size, so an older caller gets the
// fields it knows and nothing past them.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

namespace sw::api {

// The sizes each released version of a struct had, oldest first. A struct
// that grows appends offsetof(T, first new field) before sizeof(T).
template <typename T> struct StructSizes;
#define SW_STRUCT_SIZES(T, ...)                            \
  template <> struct StructSizes<T> {                      \
    static constexpr const char* name = #T;                \
    static constexpr size_t known[] = {__VA_ARGS__};       \
  }

SW_STRUCT_SIZES(sw_runtime_desc_t, sizeof(sw_runtime_desc_t));
SW_STRUCT_SIZES(sw_file_carrier_desc_t, sizeof(sw_file_carrier_desc_t));
SW_STRUCT_SIZES(sw_zstd_carrier_desc_t, sizeof(sw_zstd_carrier_desc_t));
// The first remote carriers had no read replicas.
SW_STRUCT_SIZES(sw_remote_carrier_desc_t, offsetof(sw_remote_carrier_desc_t, replica_endpoints),
                sizeof(sw_remote_carrier_desc_t));
SW_STRUCT_SIZES(sw_external_memory_desc_t, sizeof(sw_external_memory_desc_t));
SW_STRUCT_SIZES(sw_await_callback_info_t, sizeof(sw_await_callback_info_t));
// 0.1 had no outcome callback, 0.2 no attach or plan_promotion.
SW_STRUCT_SIZES(sw_residency_policy_t, offsetof(sw_residency_policy_t, outcome),
                offsetof(sw_residency_policy_t, attach), sizeof(sw_residency_policy_t));
// 0.2 had no transient count.
SW_STRUCT_SIZES(sw_lru_stats_t, offsetof(sw_lru_stats_t, transient), sizeof(sw_lru_stats_t));
SW_STRUCT_SIZES(sw_lru_policy_desc_t, sizeof(sw_lru_policy_desc_t));
SW_STRUCT_SIZES(sw_matmul_desc_t, sizeof(sw_matmul_desc_t));
SW_STRUCT_SIZES(sw_expert_ffn_desc_t, sizeof(sw_expert_ffn_desc_t));
SW_STRUCT_SIZES(sw_tile_state_t, sizeof(sw_tile_state_t));
SW_STRUCT_SIZES(sw_copy_event_t, sizeof(sw_copy_event_t));
SW_STRUCT_SIZES(sw_object_spec_t, sizeof(sw_object_spec_t));
SW_STRUCT_SIZES(sw_view_info_t, sizeof(sw_view_info_t));
SW_STRUCT_SIZES(sw_fake_device_vtable_t, sizeof(sw_fake_device_vtable_t));
// Before 0.1 the Vulkan desc had no enabled_features.
SW_STRUCT_SIZES(sw_vulkan_device_desc_t, offsetof(sw_vulkan_device_desc_t, enabled_features),
                sizeof(sw_vulkan_device_desc_t));
// 0.1 had no buffer counters.
SW_STRUCT_SIZES(sw_vulkan_counters_t, offsetof(sw_vulkan_counters_t, buffers_made), sizeof(sw_vulkan_counters_t));
SW_STRUCT_SIZES(sw_file_tensor_info_t, sizeof(sw_file_tensor_info_t));
SW_STRUCT_SIZES(sw_safetensors_save_desc_t, sizeof(sw_safetensors_save_desc_t));
SW_STRUCT_SIZES(sw_gguf_save_desc_t, sizeof(sw_gguf_save_desc_t));
SW_STRUCT_SIZES(sw_file_io_stats_t, sizeof(sw_file_io_stats_t));
SW_STRUCT_SIZES(sw_file_carrier_io_t, sizeof(sw_file_carrier_io_t));
SW_STRUCT_SIZES(sw_io_queue_stats_t, sizeof(sw_io_queue_stats_t));
SW_STRUCT_SIZES(sw_random_desc_t, sizeof(sw_random_desc_t));
#undef SW_STRUCT_SIZES

template <typename T>
size_t checked_struct_size(uint32_t size, const char* what) {
  for (size_t known : StructSizes<T>::known)
    if (size == known) return size;
  std::string sizes;
  for (size_t known : StructSizes<T>::known) sizes += (sizes.empty() ? "" : ", ") + std::to_string(known);
  value_error(std::string(what) + ": struct_size " + std::to_string(size) + " is not a size of " +
              StructSizes<T>::name + " this library knows (" + sizes + "); fill it with its _init function");
}

// `in` read as this library's T: `defaults` with the caller's version of
// the struct copied over it.
template <typename T>
T struct_in(const T* in, T defaults, const char* what) {
  const size_t n = checked_struct_size<T>(in->struct_size, what);
  std::memcpy(static_cast<void*>(&defaults), in, n);
  defaults.struct_size = sizeof(T);
  return defaults;
}

// Writes `value` into the caller's version of T at `out`, keeping its
// struct_size.
template <typename T>
void struct_out(T* out, const T& value, const char* what) {
  const uint32_t size = out->struct_size;
  const size_t n = checked_struct_size<T>(size, what);
  std::memcpy(static_cast<void*>(out), &value, n);
  out->struct_size = size;
}

}  // namespace sw::api
