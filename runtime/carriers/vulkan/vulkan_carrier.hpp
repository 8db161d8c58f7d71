// The Vulkan compute carrier: slots in one device-local buffer of a Vulkan
// device; ops run as the compute shaders of vulkan_backend.cpp.
#pragma once

#include "core/carrier.hpp"
#include "device/bridge.hpp"
#include "device/vulkan_context.hpp"

namespace sw {

class VulkanCarrier final : public Carrier {
 public:
  // Zero-filled unless `zero_fill` is false (a kernel overwrites every slot next).
  VulkanCarrier(Ref<Runtime> runtime, Ref<Device> device, sw_dtype_t dtype, size_t size, bool zero_fill = true);
  ~VulkanCarrier() override;

  bool is_compute() const override { return true; }
  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;
  Ref<Carrier> create_empty_like() const override;

  vk::Context& context() const { return *ctx_; }
  const Ref<Device>& device() const { return device_; }
  VkBuffer buffer() const { return buffer_.buffer; }
  VkDeviceSize buffer_bytes() const { return buffer_.size; }

 protected:
  void dispose_storage() override;
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  Ref<Device> device_;
  vk::Context* ctx_;
  vk::Buffer buffer_;
};

Ref<Carrier> make_vulkan_carrier(const Ref<Runtime>& runtime, const Ref<Device>& device, sw_dtype_t dtype,
                                 size_t size);
// The compute backend of `carrier`'s device.
ComputeBackend& vulkan_backend_for(const Carrier& carrier);

}  // namespace sw
