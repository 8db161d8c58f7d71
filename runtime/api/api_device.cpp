#include <cstring>

#include "api/handle.hpp"
#include "strideweave/strideweave_testing.h"
#include "api/versioned.hpp"
#include "core/dtype.hpp"
#include "device/bridge.hpp"
#include "device/dlpack.hpp"
#ifdef SW_HAVE_VULKAN
#include "carriers/vulkan/vulkan_carrier.hpp"
#include "device/vulkan_backend.hpp"
#endif

using namespace sw;
using namespace sw::api;

namespace {

sw_copy_event_t event_arg(const sw_copy_event_t* e) {
  require(e, "event");
  sw_copy_event_t d;
  sw_copy_event_init(&d);
  return struct_in(e, d, "event");
}

}  // namespace

extern "C" {

SW_API void sw_object_spec_init(sw_object_spec_t* spec) {
  if (!spec) return;
  std::memset(spec, 0, sizeof(*spec));
  spec->struct_size = sizeof(*spec);
}

SW_API void sw_copy_event_init(sw_copy_event_t* event) {
  if (!event) return;
  std::memset(event, 0, sizeof(*event));
  event->struct_size = sizeof(*event);
}

SW_API void sw_view_info_init(sw_view_info_t* info) {
  if (!info) return;
  std::memset(info, 0, sizeof(*info));
  info->struct_size = sizeof(*info);
}

SW_API void sw_fake_device_vtable_init(sw_fake_device_vtable_t* vtable) {
  if (!vtable) return;
  std::memset(vtable, 0, sizeof(*vtable));
  vtable->struct_size = sizeof(*vtable);
}

SW_API void sw_vulkan_device_desc_init(sw_vulkan_device_desc_t* desc) {
  if (!desc) return;
  std::memset(desc, 0, sizeof(*desc));
  desc->struct_size = sizeof(*desc);
}

SW_API sw_error_t* sw_device_create_host(sw_runtime_t* runtime, sw_device_t** out_device) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(out_device, "out_device");
    *out_device = to_handle<sw_device_t>(make_ref<Device>(rt, make_host_backend(rt)));
  });
}

SW_API sw_error_t* sw_device_create_fake(sw_runtime_t* runtime, const sw_fake_device_vtable_t* vtable,
                                         sw_device_t** out_device) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(out_device, "out_device");
    sw_fake_device_vtable_t vt;
    if (vtable) {
      sw_fake_device_vtable_init(&vt);
      vt = struct_in(vtable, vt, "vtable");
    }
    *out_device = to_handle<sw_device_t>(make_ref<Device>(rt, make_fake_backend(vtable ? &vt : nullptr)));
  });
}

SW_API sw_error_t* sw_device_create_vulkan(sw_runtime_t* runtime, const sw_vulkan_device_desc_t* desc,
                                           sw_device_t** out_device) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    require(out_device, "out_device");
#ifdef SW_HAVE_VULKAN
    // A desc from before enabled_features existed reads it as zero.
    sw_vulkan_device_desc_t d;
    if (desc) {
      sw_vulkan_device_desc_init(&d);
      d = struct_in(desc, d, "desc");
    }
    *out_device = to_handle<sw_device_t>(make_ref<Device>(rt, make_vulkan_backend(rt, desc ? &d : nullptr)));
#else
    (void)desc;
    unsupported_error("sw_device_create_vulkan: this build has no Vulkan (the vulkan dependency or glslc was "
                      "missing at configure time)");
#endif
  });
}

SW_API void sw_device_retain(sw_device_t* device) { retain_handle(device); }
SW_API void sw_device_release(sw_device_t* device) { release_handle(device); }

SW_API sw_error_t* sw_device_kind(const sw_device_t* device, sw_device_kind_t* out_kind) {
  return guard([&] {
    const Device* d = get<Device>(device, "device");
    require(out_kind, "out_kind");
    *out_kind = d->kind();
  });
}

SW_API sw_error_t* sw_device_generation(const sw_device_t* device, uint64_t* out_generation) {
  return guard([&] {
    const Device* d = get<Device>(device, "device");
    require(out_generation, "out_generation");
    *out_generation = d->generation();
  });
}

SW_API sw_error_t* sw_device_restart(sw_device_t* device) {
  return guard([&] { get<Device>(device, "device")->restart(); });
}

SW_API sw_error_t* sw_device_alloc(sw_device_t* device, const sw_object_spec_t* spec, uint64_t extent_bytes,
                                   sw_device_allocation_t** out_allocation) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    require(spec, "spec");
    require(out_allocation, "out_allocation");
    sw_object_spec_t defaults;
    sw_object_spec_init(&defaults);
    const sw_object_spec_t checked = struct_in(spec, defaults, "spec");
    spec = &checked;
    if (spec->rank > SW_MAX_RANK) value_error("spec->rank exceeds SW_MAX_RANK");
    ObjectSpec s;
    s.dtype = spec->dtype;
    s.shape.assign(spec->shape, spec->shape + spec->rank);
    s.max_extent = spec->max_extent_bytes;
    s.alignment = spec->alignment ? spec->alignment : 16;
    *out_allocation = to_handle<sw_device_allocation_t>(d->allocate(s, extent_bytes));
  });
}

SW_API sw_error_t* sw_device_free(sw_device_allocation_t* allocation) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    a->device().free(*a);
  });
}

SW_API void sw_device_allocation_retain(sw_device_allocation_t* allocation) { retain_handle(allocation); }
SW_API void sw_device_allocation_release(sw_device_allocation_t* allocation) { release_handle(allocation); }

SW_API sw_error_t* sw_device_allocation_extent(const sw_device_allocation_t* allocation, uint64_t* out_bytes) {
  return guard([&] {
    const DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    require(out_bytes, "out_bytes");
    *out_bytes = a->extent();
  });
}

SW_API sw_error_t* sw_device_allocation_generation(const sw_device_allocation_t* allocation,
                                                   uint64_t* out_generation) {
  return guard([&] {
    const DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    require(out_generation, "out_generation");
    *out_generation = a->generation();
  });
}

SW_API sw_error_t* sw_device_compute_begin(sw_device_allocation_t* allocation) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    a->device().compute(*a, true);
  });
}

SW_API sw_error_t* sw_device_compute_end(sw_device_allocation_t* allocation) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    a->device().compute(*a, false);
  });
}

SW_API sw_error_t* sw_device_host_to_device(sw_device_allocation_t* allocation, uint64_t device_offset,
                                            const void* host, uint64_t bytes, bool async,
                                            sw_copy_event_t* out_event) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    if (async) require(out_event, "out_event");
    if (out_event) checked_struct_size<sw_copy_event_t>(out_event->struct_size, "out_event");
    sw_copy_event_t e = a->device().copy(*a, true, device_offset, const_cast<void*>(host), bytes, async);
    if (out_event) struct_out(out_event, e, "out_event");
  });
}

SW_API sw_error_t* sw_device_device_to_host(sw_device_allocation_t* allocation, uint64_t device_offset, void* host,
                                            uint64_t bytes, bool async, sw_copy_event_t* out_event) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    if (async) require(out_event, "out_event");
    if (out_event) checked_struct_size<sw_copy_event_t>(out_event->struct_size, "out_event");
    sw_copy_event_t e = a->device().copy(*a, false, device_offset, host, bytes, async);
    if (out_event) struct_out(out_event, e, "out_event");
  });
}

SW_API sw_error_t* sw_device_event_query(sw_device_t* device, const sw_copy_event_t* event, bool* out_host_released,
                                         bool* out_complete) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    require(out_host_released, "out_host_released");
    require(out_complete, "out_complete");
    bool r = false, c = false;
    d->query(event_arg(event), &r, &c);
    *out_host_released = r;
    *out_complete = c;
  });
}

SW_API sw_error_t* sw_device_event_wait(sw_device_t* device, const sw_copy_event_t* event, int64_t timeout_ns) {
  return guard([&] { get<Device>(device, "device")->wait(event_arg(event), timeout_ns); });
}

SW_API sw_error_t* sw_device_view(sw_device_allocation_t* allocation, sw_dtype_t dtype, const int64_t* shape,
                                  size_t rank, sw_device_view_t** out_view) {
  return guard([&] {
    DeviceAllocation* a = get<DeviceAllocation>(allocation, "allocation");
    require(out_view, "out_view");
    if (rank && !shape) value_error("shape must not be NULL when rank is " + std::to_string(rank));
    a->device().check_generation(a->generation(), "sw_device_view");
    const ObjectSpec& s = a->spec();
    if (dtype != s.dtype)
      type_error(std::string("sw_device_view: dtype ") + dtype_name(dtype) + " differs from the allocation's " +
                 dtype_name(s.dtype));
    if (rank != s.shape.size() || !std::equal(s.shape.begin(), s.shape.end(), shape))
      value_error("sw_device_view: the shape differs from the allocation's spec");
    void* p = a->device().begin_view(*a);
    *out_view = to_handle<sw_device_view_t>(make_ref<DeviceView>(Ref<DeviceAllocation>(a), p));
  });
}

SW_API void sw_device_view_retain(sw_device_view_t* view) { retain_handle(view); }
SW_API void sw_device_view_release(sw_device_view_t* view) { release_handle(view); }

SW_API sw_error_t* sw_device_view_describe(const sw_device_view_t* view, sw_view_info_t* out_info) {
  return guard([&] {
    const DeviceView* v = get<DeviceView>(view, "view");
    require(out_info, "out_info");
    checked_struct_size<sw_view_info_t>(out_info->struct_size, "out_info");
    struct_out(out_info, v->describe(), "out_info");
  });
}

SW_API sw_error_t* sw_device_view_to_dlpack(sw_device_view_t* view, void** out_managed_tensor) {
  return guard([&] {
    auto v = ref<DeviceView>(view, "view");
    require(out_managed_tensor, "out_managed_tensor");
    *out_managed_tensor = dlpack::to_legacy(dlpack::of_view(v, "sw_device_view_to_dlpack"));
  });
}

SW_API sw_error_t* sw_device_view_to_dlpack_versioned(sw_device_view_t* view, uint32_t max_major, uint32_t max_minor,
                                                      void** out_managed_tensor) {
  return guard([&] {
    const char* what = "sw_device_view_to_dlpack_versioned";
    auto v = ref<DeviceView>(view, "view");
    require(out_managed_tensor, "out_managed_tensor");
    DLPackVersion version = dlpack::negotiate(max_major, max_minor, what);
    *out_managed_tensor = dlpack::to_versioned(dlpack::of_view(v, what), version);
  });
}

SW_API sw_error_t* sw_tensor_to_dlpack(sw_tensor_t* tensor, void** out_managed_tensor) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_managed_tensor, "out_managed_tensor");
    *out_managed_tensor = dlpack::to_legacy(dlpack::of_tensor(t, "sw_tensor_to_dlpack"));
  });
}

SW_API sw_error_t* sw_tensor_to_dlpack_versioned(sw_tensor_t* tensor, uint32_t max_major, uint32_t max_minor,
                                                 void** out_managed_tensor) {
  return guard([&] {
    const char* what = "sw_tensor_to_dlpack_versioned";
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_managed_tensor, "out_managed_tensor");
    DLPackVersion version = dlpack::negotiate(max_major, max_minor, what);
    *out_managed_tensor = dlpack::to_versioned(dlpack::of_tensor(t, what), version);
  });
}

SW_API sw_error_t* sw_fake_device_log_count(const sw_device_t* device, size_t* out_count) {
  return guard([&] {
    const Device* d = get<Device>(device, "device");
    require(out_count, "out_count");
    FakeBackend& f = fake_of(*d);
    *out_count = d->with_lock([&] { return fake_log_count(f); });
  });
}

SW_API sw_error_t* sw_fake_device_log_entry(const sw_device_t* device, size_t index, char* buffer, size_t capacity,
                                            size_t* out_length) {
  return guard([&] {
    const Device* d = get<Device>(device, "device");
    require(out_length, "out_length");
    FakeBackend& f = fake_of(*d);
    std::string line = d->with_lock([&] { return fake_log_entry(f, index); });
    if (!buffer || capacity < line.size() + 1) {
      *out_length = line.size();
      if (buffer || capacity)
        value_error("sw_fake_device_log_entry: buffer holds " + std::to_string(capacity) + " bytes, the line needs " +
                    std::to_string(line.size() + 1));
      return;
    }
    std::memcpy(buffer, line.c_str(), line.size() + 1);
    *out_length = line.size();
  });
}

SW_API sw_error_t* sw_fake_device_log_clear(sw_device_t* device) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    FakeBackend& f = fake_of(*d);
    d->with_lock([&] { fake_log_clear(f); });
  });
}

SW_API sw_error_t* sw_fake_device_arm_failure(sw_device_t* device, uint32_t failures) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    FakeBackend& f = fake_of(*d);
    if (failures & ~uint32_t{SW_FAKE_FAIL_ALLOCATION | SW_FAKE_FAIL_COPY | SW_FAKE_FAIL_VIEW | SW_FAKE_FAIL_DEVICE_LOST})
      value_error("sw_fake_device_arm_failure: unknown failure bits");
    d->with_lock([&] { fake_arm(f, failures); });
  });
}

SW_API sw_error_t* sw_fake_device_complete(sw_device_t* device, const sw_copy_event_t* event) {
  return guard([&] { get<Device>(device, "device")->complete_fake(event_arg(event)); });
}

SW_API sw_error_t* sw_fake_device_complete_all(sw_device_t* device, size_t* out_completed) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    fake_of(*d);
    size_t n = d->complete_all_fake();
    if (out_completed) *out_completed = n;
  });
}

SW_API void sw_vulkan_counters_init(sw_vulkan_counters_t* counters) {
  if (!counters) return;
  std::memset(counters, 0, sizeof(*counters));
  counters->struct_size = sizeof(*counters);
}

SW_API sw_error_t* sw_testing_vulkan_counters(sw_device_t* device, sw_vulkan_counters_t* out_counters) {
  return guard([&] {
    Device* d = get<Device>(device, "device");
    require(out_counters, "out_counters");
    checked_struct_size<sw_vulkan_counters_t>(out_counters->struct_size, "out_counters");
#ifdef SW_HAVE_VULKAN
    struct_out(out_counters, vulkan_counters(*d), "out_counters");
#else
    (void)d;
    type_error("sw_testing_vulkan_counters: the device is not a Vulkan device (this build has no Vulkan)");
#endif
  });
}

SW_API sw_error_t* sw_carrier_create_vulkan(sw_runtime_t* runtime, sw_device_t* device, sw_dtype_t dtype, size_t size,
                                            sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    auto d = ref<Device>(device, "device");
    check_dtype(dtype, "sw_carrier_create_vulkan");
    require(out_carrier, "out_carrier");
#ifdef SW_HAVE_VULKAN
    *out_carrier = to_handle<sw_carrier_t>(make_vulkan_carrier(rt, d, dtype, size));
#else
    (void)size;
    unsupported_error("sw_carrier_create_vulkan: this build has no Vulkan (the vulkan dependency or glslc was "
                      "missing at configure time)");
#endif
  });
}

}  // extern "C"
