// The host backend: device memory is aligned host memory; asynchronous copies
// run on a background worker and complete on the loop thread.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "base/error.hpp"
#include "device/bridge.hpp"

namespace sw {
namespace {

class HostBackend final : public DeviceBackend {
 public:
  explicit HostBackend(Ref<Runtime> runtime) : runtime_(std::move(runtime)) {}

  sw_device_kind_t kind() const override { return SW_DEVICE_HOST; }

  void allocate(uint64_t id, uint64_t bytes, uint64_t alignment, const AllocationOptions& options) override {
    if (options.count_fault) runtime_->check_fault(FaultKind::kAllocation, "device allocation");
    const uint64_t a = alignment < sizeof(void*) ? sizeof(void*) : alignment;
    // A size whose rounding up to the alignment wraps is one no memory holds.
    void* p = bytes > UINT64_MAX - a ? nullptr : std::aligned_alloc(a, (bytes + a - 1) / a * a);
    if (!p) throw_error(SW_ERROR_OUT_OF_MEMORY, "device allocation of " + std::to_string(bytes) + " bytes failed");
    std::memset(p, 0, bytes);
    memory_[id] = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  void release(uint64_t id) noexcept override {
    memory_.erase(id);
  }
  std::byte* at(uint64_t id, uint64_t offset) {
    auto it = memory_.find(id);
    if (it == memory_.end()) internal_error("host device: unknown allocation");
    return static_cast<std::byte*>(it->second.get()) + offset;
  }
  void copy_in(uint64_t id, uint64_t offset, const void* host, uint64_t bytes) override {
    std::memcpy(at(id, offset), host, bytes);
  }
  void copy_out(uint64_t id, uint64_t offset, void* host, uint64_t bytes) override {
    std::memcpy(host, at(id, offset), bytes);
  }
  bool copy_async(uint64_t, bool to_device, uint64_t id, uint64_t offset, void* host, uint64_t bytes,
                  std::function<void(Status)> completed) override {
    // The worker copies without the device lock: it holds the memory, so a
    // restart (which waits for nothing) cannot pull it away mid-copy.
    std::byte* dev = at(id, offset);
    std::shared_ptr<void> keep = memory_.at(id);
    runtime_->run_on_worker(
        [=] {
          if (to_device)
            std::memcpy(dev, host, bytes);
          else
            std::memcpy(host, dev, bytes);
        },
        [completed = std::move(completed), keep](Status st) { completed(std::move(st)); });
    return false;
  }
  void* map(uint64_t id) override { return at(id, 0); }
  void restart(uint64_t) noexcept override {
    memory_.clear();
  }

 private:
  Ref<Runtime> runtime_;
  std::unordered_map<uint64_t, std::shared_ptr<void>> memory_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_host_backend(Ref<Runtime> runtime) {
  return std::make_unique<HostBackend>(std::move(runtime));
}

}  // namespace sw
