// The Vulkan bridge backend: device-local buffers, staging copies, fences
// waited on a background worker, completions through the loop.
#pragma once

#include "device/bridge.hpp"
#include "device/vulkan_context.hpp"
#include "strideweave/strideweave_testing.h"

namespace sw {

std::unique_ptr<DeviceBackend> make_vulkan_backend(Ref<Runtime> runtime, const sw_vulkan_device_desc_t* desc);

// The device's counters (TYPE when it is not a Vulkan device).
sw_vulkan_counters_t vulkan_counters(const Device& device);

// The Vulkan context of a Vulkan device; null for a device of another kind.
vk::Context* vulkan_context(const Device& device);
// The buffer behind an allocation of a Vulkan device, for the compute carrier
// that owns it (STALE_HANDLE once the device restarted). Its handles stay
// valid for the allocation's generation: a restart frees them only after
// bumping the generation, with the context's mutex held, so a user that
// checks the generation under that mutex never sees a freed buffer.
vk::Buffer vulkan_buffer(const DeviceAllocation& allocation, const char* what);

}  // namespace sw
