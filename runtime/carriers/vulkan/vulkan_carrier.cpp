#include "carriers/vulkan/vulkan_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"

namespace sw {

std::unique_ptr<ComputeBackend> make_vulkan_compute_backend(Device* device);

namespace {
vk::Context& context_of(const Device& d) {
  vk::Context* c = d.backend().vulkan();
  if (!c) type_error("sw_carrier_create_vulkan: the device is not a Vulkan device");
  return *c;
}
}  // namespace

VulkanCarrier::VulkanCarrier(Ref<Runtime> runtime, Ref<Device> device, sw_dtype_t dtype, size_t size, bool zero_fill)
    : Carrier(std::move(runtime), SW_CARRIER_VULKAN, dtype, size), device_(std::move(device)),
      ctx_(&context_of(*device_)) {
  std::lock_guard lock(ctx_->mutex());
  if (!ctx_->compute) ctx_->compute = make_vulkan_compute_backend(device_.get());
  if (size) buffer_ = ctx_->create_buffer(static_cast<VkDeviceSize>(size) * dtype_size(dtype), zero_fill);
}

VulkanCarrier::~VulkanCarrier() {
  std::lock_guard lock(ctx_->mutex());
  ctx_->destroy_buffer(buffer_);
}

void VulkanCarrier::read_slots(size_t first, size_t count, void* dst) const {
  if (!count) return;
  const size_t es = element_size();
  std::lock_guard lock(ctx_->mutex());
  if (buffer_.mapped) return ctx_->host_read(buffer_, first * es, dst, count * es);
  vk::Buffer staging = ctx_->create_staging(count * es);
  Status st = capture([&] {
    ctx_->copy(buffer_.buffer, first * es, staging.buffer, 0, count * es);
    ctx_->flush();
    std::memcpy(dst, staging.mapped, count * es);
    ++ctx_->counters().host_reads;
  });
  ctx_->destroy_buffer(staging);
  if (!st.ok()) st.raise();
}

void VulkanCarrier::write_slots(size_t first, size_t count, const void* src) {
  if (!count) return;
  const size_t es = element_size();
  std::lock_guard lock(ctx_->mutex());
  const size_t at = first * es, bytes = count * es;
  // With work pending, a small write is recorded behind it rather than
  // waiting for it (a backward seed, say).
  if (ctx_->busy() && bytes <= 65536 && at % 4 == 0 && bytes % 4 == 0)
    return ctx_->update(buffer_.buffer, at, src, bytes);
  if (buffer_.mapped) return ctx_->host_write(buffer_, at, src, bytes);
  vk::Buffer staging = ctx_->create_staging(count * es);
  std::memcpy(staging.mapped, src, count * es);
  ++ctx_->counters().host_writes;
  ctx_->copy(staging.buffer, 0, buffer_.buffer, first * es, count * es);
  ctx_->destroy_buffer(staging);  // freed once the batch ran
  ctx_->flush();
}

Ref<Carrier> VulkanCarrier::create_empty_like() const {
  return make_ref<VulkanCarrier>(runtime_ref(), device_, dtype(), 0);
}

void VulkanCarrier::dispose_storage() {
  std::lock_guard lock(ctx_->mutex());
  ctx_->destroy_buffer(buffer_);
}

void VulkanCarrier::allocate_storage(size_t size, bool zero_fill) {
  std::lock_guard lock(ctx_->mutex());
  vk::Buffer fresh;
  if (size) fresh = ctx_->create_buffer(static_cast<VkDeviceSize>(size) * element_size(), zero_fill);
  ctx_->destroy_buffer(buffer_);
  buffer_ = fresh;
}

Ref<Carrier> make_vulkan_carrier(const Ref<Runtime>& runtime, const Ref<Device>& device, sw_dtype_t dtype,
                                 size_t size) {
  context_of(*device);  // TYPE for another kind of device comes before the allocation
  runtime->check_fault(FaultKind::kAllocation, "Vulkan carrier");
  return make_ref<VulkanCarrier>(runtime, device, dtype, size);
}

ComputeBackend& vulkan_backend_for(const Carrier& carrier) {
  return *static_cast<const VulkanCarrier&>(carrier).context().compute;
}

}  // namespace sw
