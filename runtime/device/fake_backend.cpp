// The fake backend: logs every call with its exact arguments, fails armed
// calls once, and performs an asynchronous copy only when told to complete
// it, touching the host bytes at that moment, so that host bytes released
// before their event says so are caught. Embedders may plug their own
// storage through sw_fake_device_vtable_t.
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "device/bridge.hpp"
#include "strideweave/strideweave_testing.h"

namespace sw {

class FakeBackend final : public DeviceBackend {
 public:
  explicit FakeBackend(const sw_fake_device_vtable_t* vt) {
    if (vt) vt_ = *vt;
  }
  ~FakeBackend() override {
    if (vt_.destroy) vt_.destroy(vt_.user_data);
  }

  sw_device_kind_t kind() const override { return SW_DEVICE_FAKE; }

  void allocate(uint64_t id, uint64_t bytes, uint64_t alignment, const AllocationOptions&) override {
    log("alloc alloc=" + std::to_string(id) + " bytes=" + std::to_string(bytes) +
        " alignment=" + std::to_string(alignment));
    lost_check();
    if (take(SW_FAKE_FAIL_ALLOCATION))
      throw_error(SW_ERROR_OUT_OF_MEMORY, "device allocation failed (fake: armed allocation failure)");
    void* pointer = nullptr;
    if (vt_.allocate) {
      check(vt_.allocate(vt_.user_data, id, bytes, alignment, &pointer), "device allocation failed");
    } else {
      // calloc, not a vector: an impossible size is OUT_OF_MEMORY, never an
      // exception from operator new.
      std::byte* raw = bytes > UINT64_MAX - alignment ? nullptr : static_cast<std::byte*>(std::calloc(bytes + alignment, 1));
      if (!raw)
        throw_error(SW_ERROR_OUT_OF_MEMORY, "device allocation of " + std::to_string(bytes) + " bytes failed (fake)");
      memory_[id].reset(raw);
      auto addr = reinterpret_cast<uintptr_t>(raw);
      pointer = raw + ((alignment - addr % alignment) % alignment);
    }
    pointers_[id] = static_cast<std::byte*>(pointer);
  }

  void release(uint64_t id) noexcept override {
    log("free alloc=" + std::to_string(id));
    if (vt_.free) vt_.free(vt_.user_data, id);
    memory_.erase(id);
    pointers_.erase(id);
  }

  void copy_in(uint64_t id, uint64_t offset, const void* host, uint64_t bytes) override {
    log(line("host_to_device", id, offset, bytes, false));
    lost_check();
    transfer(true, id, offset, const_cast<void*>(host), bytes);
  }
  void copy_out(uint64_t id, uint64_t offset, void* host, uint64_t bytes) override {
    log(line("device_to_host", id, offset, bytes, false));
    lost_check();
    transfer(false, id, offset, host, bytes);
  }
  bool copy_async(uint64_t event, bool to_device, uint64_t id, uint64_t offset, void* host, uint64_t bytes,
                  std::function<void(Status)>) override {
    log(line(to_device ? "host_to_device" : "device_to_host", id, offset, bytes, true) + " event=" +
        std::to_string(event));
    lost_check();
    pending_[event] = Pending{to_device, id, offset, host, bytes};
    return false;
  }

  Status perform(uint64_t event) {
    log("complete event=" + std::to_string(event));
    auto it = pending_.find(event);
    if (it == pending_.end()) return Status::make(SW_ERROR_VALUE, "no pending copy " + std::to_string(event));
    Pending p = it->second;
    pending_.erase(it);
    if (take(SW_FAKE_FAIL_DEVICE_LOST)) return Status::make(SW_ERROR_DEVICE_LOST, "device lost (fake: armed)");
    return capture([&] { transfer(p.to_device, p.id, p.offset, p.host, p.bytes); });
  }

  void* map(uint64_t id) override {
    log("view alloc=" + std::to_string(id));
    lost_check();
    if (take(SW_FAKE_FAIL_VIEW)) throw_error(SW_ERROR_IO, "device view failed (fake: armed view failure)");
    return pointers_.at(id);
  }

  void restart(uint64_t generation) noexcept override {
    log("restart generation=" + std::to_string(generation));
    if (vt_.restart) vt_.restart(vt_.user_data, generation);
    memory_.clear();
    pointers_.clear();
    pending_.clear();
  }

  std::vector<std::string> log_;
  uint32_t armed_ = 0;

 private:
  struct Pending {
    bool to_device;
    uint64_t id, offset;
    void* host;
    uint64_t bytes;
  };

  static std::string line(const char* what, uint64_t id, uint64_t offset, uint64_t bytes, bool async) {
    return std::string(what) + " alloc=" + std::to_string(id) + " offset=" + std::to_string(offset) +
           " bytes=" + std::to_string(bytes) + " async=" + (async ? "1" : "0");
  }
  void log(std::string s) noexcept {
    try {
      log_.push_back(std::move(s));
    } catch (...) {
    }
  }
  bool take(uint32_t flag) {
    if (!(armed_ & flag)) return false;
    armed_ &= ~flag;
    return true;
  }
  void lost_check() {
    if (take(SW_FAKE_FAIL_DEVICE_LOST)) throw_error(SW_ERROR_DEVICE_LOST, "device lost (fake: armed)");
  }
  static void check(sw_error_code_t code, const char* what) {
    if (code != SW_OK) throw_error(code, std::string(what) + " (fake vtable returned " + sw_error_code_name(code) + ")");
  }
  void transfer(bool to_device, uint64_t id, uint64_t offset, void* host, uint64_t bytes) {
    if (take(SW_FAKE_FAIL_COPY)) throw_error(SW_ERROR_IO, "device copy failed (fake: armed copy failure)");
    if (to_device && vt_.host_to_device) return check(vt_.host_to_device(vt_.user_data, id, offset, host, bytes), "device copy failed");
    if (!to_device && vt_.device_to_host) return check(vt_.device_to_host(vt_.user_data, id, offset, host, bytes), "device copy failed");
    auto it = pointers_.find(id);
    if (it == pointers_.end() || !it->second) throw_error(SW_ERROR_IO, "device copy failed: no memory for allocation");
    if (to_device)
      std::memcpy(it->second + offset, host, bytes);
    else
      std::memcpy(host, it->second + offset, bytes);
  }

  sw_fake_device_vtable_t vt_{};
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unordered_map<uint64_t, std::unique_ptr<std::byte, Free>> memory_;
  std::unordered_map<uint64_t, std::byte*> pointers_;
  std::map<uint64_t, Pending> pending_;
};

std::unique_ptr<DeviceBackend> make_fake_backend(const sw_fake_device_vtable_t* vtable) {
  return std::make_unique<FakeBackend>(vtable);
}

FakeBackend& fake_of(const Device& device) {
  if (device.kind() != SW_DEVICE_FAKE) type_error("expected a fake device");
  return static_cast<FakeBackend&>(device.backend());
}
size_t fake_log_count(const FakeBackend& f) { return f.log_.size(); }
std::string fake_log_entry(const FakeBackend& f, size_t index) {
  if (index >= f.log_.size())
    index_error("log entry " + std::to_string(index) + " is past the log's " + std::to_string(f.log_.size()) + " lines");
  return f.log_[index];
}
void fake_log_clear(FakeBackend& f) { f.log_.clear(); }
void fake_arm(FakeBackend& f, uint32_t failures) { f.armed_ |= failures; }
Status fake_perform(FakeBackend& f, uint64_t event) { return f.perform(event); }

}  // namespace sw
