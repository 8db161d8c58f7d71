#include "device/vulkan_backend.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <unordered_map>

#include "base/error.hpp"
#include "device/vulkan_context.hpp"

namespace sw {
namespace {

class VulkanBackend final : public DeviceBackend {
 public:
  VulkanBackend(Ref<Runtime> runtime, const sw_vulkan_device_desc_t* desc)
      : runtime_(std::move(runtime)), ctx_(std::make_shared<vk::Context>(desc, runtime_->pool()->limit())) {}
  ~VulkanBackend() override {
    std::lock_guard lock(ctx_->mutex());
    ctx_->wait_idle();
    for (auto& [id, b] : buffers_) ctx_->destroy_buffer(b);
    ctx_->flush();
  }

  sw_device_kind_t kind() const override { return SW_DEVICE_VULKAN; }
  vk::Context& context() const { return *ctx_; }

  void allocate(uint64_t id, uint64_t bytes, uint64_t, const AllocationOptions& options) override {
    if (options.count_fault) runtime_->check_fault(FaultKind::kAllocation, "device allocation");
    std::lock_guard lock(ctx_->mutex());
    // Vulkan buffers are aligned to at least minStorageBufferOffsetAlignment;
    // the spec's alignment (<= 256 in practice) holds for offset 0.
    buffers_[id] = ctx_->create_buffer(bytes, options.zero);
  }
  void release(uint64_t id) noexcept override {
    std::lock_guard lock(ctx_->mutex());
    auto it = buffers_.find(id);
    if (it == buffers_.end()) return;
    ctx_->destroy_buffer(it->second);
    buffers_.erase(it);
  }
  vk::Buffer& buffer(uint64_t id) {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) internal_error("vulkan device: unknown allocation");
    return it->second;
  }
  void copy_in(uint64_t id, uint64_t offset, const void* host, uint64_t bytes) override {
    std::lock_guard lock(ctx_->mutex());
    if (buffer(id).mapped) return ctx_->host_write(buffer(id), offset, host, bytes);
    vk::Buffer staging = ctx_->create_staging(bytes);
    std::memcpy(staging.mapped, host, bytes);
    ++ctx_->counters().host_writes;
    ctx_->copy(staging.buffer, 0, buffer(id).buffer, offset, bytes);
    ctx_->destroy_buffer(staging);
    ctx_->flush();
  }
  void copy_out(uint64_t id, uint64_t offset, void* host, uint64_t bytes) override {
    std::lock_guard lock(ctx_->mutex());
    if (buffer(id).mapped) return ctx_->host_read(buffer(id), offset, host, bytes);
    vk::Buffer staging = ctx_->create_staging(bytes);
    Status st = capture([&] {
      ctx_->copy(buffer(id).buffer, offset, staging.buffer, 0, bytes);
      ctx_->flush();
      std::memcpy(host, staging.mapped, bytes);
      ++ctx_->counters().host_reads;
    });
    ctx_->destroy_buffer(staging);
    if (!st.ok()) st.raise();
  }
  bool copy_async(uint64_t, bool to_device, uint64_t id, uint64_t offset, void* host, uint64_t bytes,
                  std::function<void(Status)> completed) override {
    std::lock_guard lock(ctx_->mutex());
    ctx_->flush();  // the copy gets a submission of its own
    vk::Buffer staging = ctx_->create_staging(bytes);
    if (to_device) {
      // The host bytes are in staging now: released before the copy completes.
      std::memcpy(staging.mapped, host, bytes);
      ctx_->copy(staging.buffer, 0, buffer(id).buffer, offset, bytes);
    } else {
      ctx_->copy(buffer(id).buffer, offset, staging.buffer, 0, bytes);
    }
    ++(to_device ? ctx_->counters().host_writes : ctx_->counters().host_reads);
    void* mapped = staging.mapped;
    ctx_->destroy_buffer(staging);  // kept by the submission until it completes
    std::shared_ptr<vk::Submission> sub(ctx_->submit().release());
    auto ctx = ctx_;
    auto gen = generation_;
    const uint64_t at = gen->load();
    runtime_->run_on_worker(
        [ctx, sub, to_device, host, mapped, bytes, gen, at] {
          ctx->wait(*sub);
          // An abandoned copy (the device restarted) never touches the host.
          if (!to_device && gen->load() == at) std::memcpy(host, mapped, bytes);
        },
        [ctx, sub, completed = std::move(completed)](Status st) {
          {
            std::lock_guard lock(ctx->mutex());
            ctx->finish(std::make_unique<vk::Submission>(std::move(*sub)));
          }
          completed(std::move(st));
        });
    return to_device;
  }
  void* map(uint64_t id) override {
    std::lock_guard lock(ctx_->mutex());
    return buffer(id).mapped;
  }
  void restart(uint64_t) noexcept override {
    std::lock_guard lock(ctx_->mutex());
    generation_->fetch_add(1);
    ctx_->wait_idle();
    for (auto& [id, b] : buffers_) ctx_->destroy_buffer(b);
    buffers_.clear();
  }

 private:
  Ref<Runtime> runtime_;
  std::shared_ptr<vk::Context> ctx_;
  std::unordered_map<uint64_t, vk::Buffer> buffers_;
  std::shared_ptr<std::atomic<uint64_t>> generation_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace

std::unique_ptr<DeviceBackend> make_vulkan_backend(Ref<Runtime> runtime, const sw_vulkan_device_desc_t* desc) {
  return std::make_unique<VulkanBackend>(std::move(runtime), desc);
}

vk::Context* vulkan_context(const Device& device) {
  auto* b = dynamic_cast<VulkanBackend*>(&device.backend());
  return b ? &b->context() : nullptr;
}

vk::Buffer vulkan_buffer(const DeviceAllocation& allocation, const char* what) {
  auto& b = dynamic_cast<VulkanBackend&>(allocation.device().backend());
  std::lock_guard lock(b.context().mutex());
  allocation.device().check_generation(allocation.generation(), what);
  return b.buffer(allocation.id());
}

sw_vulkan_counters_t vulkan_counters(const Device& device) {
  vk::Context* ctx = vulkan_context(device);
  if (!ctx) type_error("sw_testing_vulkan_counters: the device is not a Vulkan device");
  std::lock_guard lock(ctx->mutex());
  const vk::Counters& c = ctx->counters();
  sw_vulkan_counters_t out;
  sw_vulkan_counters_init(&out);
  out.submits = c.submits;
  out.dispatches = c.dispatches;
  out.copies = c.copies;
  out.host_reads = c.host_reads;
  out.host_writes = c.host_writes;
  out.pipelines = c.pipelines;
  out.buffers_made = c.buffers_made;
  out.buffers_reused = c.buffers_reused;
  return out;
}

}  // namespace sw
