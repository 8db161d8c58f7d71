#include "carriers/vulkan/vulkan_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "carriers/vulkan/vulkan_pipelines.hpp"
#include "device/vulkan_backend.hpp"
#include "ops/backend.hpp"

namespace sw {

std::unique_ptr<ComputeBackend> make_vulkan_compute_backend(Device* device, vk::Pipelines* pipelines);

VulkanCompute::~VulkanCompute() = default;

namespace {

vk::Context& context_of(const Device& d) {
  vk::Context* c = vulkan_context(d);
  if (!c) type_error("sw_carrier_create_vulkan: the device is not a Vulkan device");
  return *c;
}

// The device's compute state, made on first use (with the context's mutex held).
std::shared_ptr<VulkanCompute> compute_of(vk::Context& ctx, Device* device) {
  if (!ctx.attachment) {
    auto c = std::make_shared<VulkanCompute>();
    c->pipelines = std::make_unique<vk::Pipelines>(ctx);
    c->backend = make_vulkan_compute_backend(device, c->pipelines.get());
    ctx.attachment = c;
  }
  return std::static_pointer_cast<VulkanCompute>(ctx.attachment);
}

}  // namespace

// Lock order: the device's lock before the context's. So the device is never
// called with the context's mutex held: allocations are made, and dropped,
// outside it.

VulkanCarrier::VulkanCarrier(Ref<Runtime> runtime, Ref<Device> device, sw_dtype_t dtype, size_t size, bool zero_fill)
    : Carrier(std::move(runtime), SW_CARRIER_VULKAN, dtype, size), device_(std::move(device)),
      ctx_(&context_of(*device_)) {
  {
    std::lock_guard lock(ctx_->mutex());
    compute_ = compute_of(*ctx_, device_.get());
  }
  if (size) allocation_ = allocate(size, zero_fill, &buffer_);
}

VulkanCarrier::~VulkanCarrier() = default;  // the allocation's last reference frees it once unused

Ref<DeviceAllocation> VulkanCarrier::allocate(size_t size, bool zero_fill, vk::Buffer* out) const {
  ObjectSpec spec;
  spec.dtype = dtype();
  spec.shape = {static_cast<int64_t>(size)};
  const uint64_t bytes = bytes_of(size);
  spec.max_extent = bytes;
  AllocationOptions options;
  options.zero = zero_fill;
  options.count_fault = false;  // counted by the carrier (make_vulkan_carrier, tile buffers)
  auto a = device_->allocate(spec, bytes, options);
  *out = vulkan_buffer(*a, "Vulkan carrier");
  return a;
}

const vk::Buffer& VulkanCarrier::buffer(const char* what) const {
  if (allocation_) device_->check_generation(allocation_->generation(), what);
  return buffer_;
}

ComputeBackend* VulkanCarrier::compute_backend() const { return compute_->backend.get(); }

void VulkanCarrier::read_slots(size_t first, size_t count, void* dst) const {
  if (!count) return;
  const size_t es = dtype_size(dtype());  // never quantized: Device::allocate refuses those
  std::lock_guard lock(ctx_->mutex());
  const vk::Buffer& b = buffer("read");
  if (b.mapped) return ctx_->host_read(b, first * es, dst, count * es);
  vk::Buffer staging = ctx_->create_staging(count * es);
  Status st = capture([&] {
    ctx_->copy(b.buffer, first * es, staging.buffer, 0, count * es);
    ctx_->flush();
    std::memcpy(dst, staging.mapped, count * es);
    ++ctx_->counters().host_reads;
  });
  ctx_->destroy_buffer(staging);
  if (!st.ok()) st.raise();
}

void VulkanCarrier::write_slots(size_t first, size_t count, const void* src) {
  if (!count) return;
  const size_t es = dtype_size(dtype());  // never quantized: Device::allocate refuses those
  std::lock_guard lock(ctx_->mutex());
  const vk::Buffer& b = buffer("write");
  const size_t at = first * es, bytes = count * es;
  // With work pending, a small write is recorded behind it rather than
  // waiting for it (a backward seed, say).
  if (ctx_->busy() && bytes <= 65536 && at % 4 == 0 && bytes % 4 == 0) return ctx_->update(b.buffer, at, src, bytes);
  if (b.mapped) return ctx_->host_write(b, at, src, bytes);
  vk::Buffer staging = ctx_->create_staging(count * es);
  std::memcpy(staging.mapped, src, count * es);
  ++ctx_->counters().host_writes;
  ctx_->copy(staging.buffer, 0, b.buffer, first * es, count * es);
  ctx_->destroy_buffer(staging);  // freed once the batch ran
  ctx_->flush();
}

Ref<Carrier> VulkanCarrier::create_empty_like() const {
  return make_ref<VulkanCarrier>(runtime_ref(), device_, dtype(), 0);
}

void VulkanCarrier::dispose_storage() {
  Ref<DeviceAllocation> drop;  // released after the context's mutex
  std::lock_guard lock(ctx_->mutex());
  drop = std::move(allocation_);
  allocation_ = nullptr;
  buffer_ = vk::Buffer{};
}

void VulkanCarrier::allocate_storage(size_t size, bool zero_fill) {
  vk::Buffer fresh;
  Ref<DeviceAllocation> a = size ? allocate(size, zero_fill, &fresh) : nullptr;
  std::lock_guard lock(ctx_->mutex());
  std::swap(allocation_, a);  // the old one is released after the mutex
  buffer_ = fresh;
}

Ref<Carrier> make_vulkan_carrier(const Ref<Runtime>& runtime, const Ref<Device>& device, sw_dtype_t dtype,
                                 size_t size) {
  context_of(*device);  // TYPE for another kind of device comes before the allocation
  runtime->check_fault(FaultKind::kAllocation, "Vulkan carrier");
  return make_ref<VulkanCarrier>(runtime, device, dtype, size);
}

}  // namespace sw
