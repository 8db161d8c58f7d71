// The Vulkan bridge backend: device-local buffers, staging copies, fences
// waited on a background worker, completions through the loop.
#pragma once

#include "device/bridge.hpp"
#include "strideweave/strideweave_testing.h"

namespace sw {

std::unique_ptr<DeviceBackend> make_vulkan_backend(Ref<Runtime> runtime, const sw_vulkan_device_desc_t* desc);

// The device's counters (TYPE when it is not a Vulkan device).
sw_vulkan_counters_t vulkan_counters(const Device& device);

}  // namespace sw
