// The Vulkan compute carrier: slots in one allocation of a Vulkan device,
// made through the device bridge, so the bridge's rules cover it: after the
// device restarts (explicitly or when lost) every use fails STALE_HANDLE,
// and memory that recorded work still uses is freed only once that work is
// done. Ops run as the compute shaders of vulkan_compute_backend.cpp.
#pragma once

#include <memory>

#include "core/carrier.hpp"
#include "device/bridge.hpp"
#include "device/vulkan_context.hpp"

namespace sw {

namespace vk {
class Pipelines;
}

// What the carrier keeps per Vulkan device: the pipelines and the compute
// backend (held by the device's context as its attachment).
struct VulkanCompute {
  std::unique_ptr<vk::Pipelines> pipelines;
  std::unique_ptr<ComputeBackend> backend;
  ~VulkanCompute();
};

class VulkanCarrier final : public Carrier {
 public:
  // Zero-filled unless `zero_fill` is false (a kernel overwrites every slot next).
  VulkanCarrier(Ref<Runtime> runtime, Ref<Device> device, sw_dtype_t dtype, size_t size, bool zero_fill = true);
  ~VulkanCarrier() override;

  bool is_compute() const override { return true; }
  ComputeBackend* compute_backend() const override;
  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;
  Ref<Carrier> create_empty_like() const override;

  vk::Context& context() const { return *ctx_; }
  VulkanCompute& compute() const { return *compute_; }
  const Ref<Device>& device() const { return device_; }
  // The buffer (with the context's mutex held): STALE_HANDLE once the device
  // restarted since the carrier's storage was allocated.
  const vk::Buffer& buffer(const char* what = "Vulkan carrier") const;
  VkBuffer buffer_handle() const { return buffer().buffer; }

 protected:
  void dispose_storage() override;
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  Ref<DeviceAllocation> allocate(size_t size, bool zero_fill, vk::Buffer* out) const;

  Ref<Device> device_;
  vk::Context* ctx_;
  std::shared_ptr<VulkanCompute> compute_;
  Ref<DeviceAllocation> allocation_;  // null while empty
  vk::Buffer buffer_;                 // the allocation's buffer, valid for its generation
};

Ref<Carrier> make_vulkan_carrier(const Ref<Runtime>& runtime, const Ref<Device>& device, sw_dtype_t dtype,
                                 size_t size);

}  // namespace sw
