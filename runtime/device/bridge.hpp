// The device bridge: allocations, exact-range copies and views over one
// backend's memory, with generations. Device holds every rule of the
// contract (ranges, in-use refusals, release points, generations); a
// DeviceBackend only moves bytes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/object.hpp"
#include "base/status.hpp"
#include "core/runtime.hpp"

namespace sw {

// How an allocation is made: zero-filled or not (a kernel overwrites every
// byte next), and whether it counts as an SW_FAULT_ALLOCATION (a public
// sw_device_alloc does; a carrier's storage is counted by the carrier).
struct AllocationOptions {
  bool zero = true;
  bool count_fault = true;
};

// One backend: host memory, the fake, Vulkan. Every call is made with the
// device's lock held. Failures throw: OUT_OF_MEMORY (allocate), IO (copies,
// map), DEVICE_LOST (anything).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual sw_device_kind_t kind() const = 0;
  virtual void allocate(uint64_t id, uint64_t bytes, uint64_t alignment, const AllocationOptions& options) = 0;
  virtual void release(uint64_t id) noexcept = 0;
  virtual void copy_in(uint64_t id, uint64_t offset, const void* host, uint64_t bytes) = 0;
  virtual void copy_out(uint64_t id, uint64_t offset, void* host, uint64_t bytes) = 0;
  // Starts an asynchronous copy (to_device: host -> device). Returns whether
  // the host bytes are already released; `completed` runs later, without the
  // lock, on any thread (the loop thread for the real backends).
  virtual bool copy_async(uint64_t event, bool to_device, uint64_t id, uint64_t offset, void* host, uint64_t bytes,
                          std::function<void(Status)> completed) = 0;
  // Host address of the allocation's byte 0, or nullptr when not host visible.
  virtual void* map(uint64_t id) = 0;
  // Every allocation and pending copy is gone; completions still owed are dropped.
  virtual void restart(uint64_t new_generation) noexcept = 0;
};

class DeviceAllocation;

struct ObjectSpec {
  sw_dtype_t dtype = SW_DTYPE_INVALID;
  std::vector<int64_t> shape;
  uint64_t max_extent = 0;
  uint64_t alignment = 16;
};

class Device : public Object {
 public:
  Device(Ref<Runtime> runtime, std::unique_ptr<DeviceBackend> backend);
  ~Device() override;

  Runtime& runtime() const { return *runtime_; }
  const Ref<Runtime>& runtime_ref() const { return runtime_; }
  sw_device_kind_t kind() const { return backend_->kind(); }
  DeviceBackend& backend() const { return *backend_; }
  uint64_t generation() const;
  void restart();

  Ref<DeviceAllocation> allocate(const ObjectSpec& spec, uint64_t extent, const AllocationOptions& options = {});
  void free(DeviceAllocation& a);
  void compute(DeviceAllocation& a, bool begin);
  sw_copy_event_t copy(DeviceAllocation& a, bool to_device, uint64_t offset, void* host, uint64_t bytes, bool async);
  void query(const sw_copy_event_t& e, bool* released, bool* complete);
  void wait(const sw_copy_event_t& e, int64_t timeout_ns);
  // A view's host pointer; counts a use until end_view.
  void* begin_view(DeviceAllocation& a);
  void end_view(DeviceAllocation& a) noexcept;
  // STALE_HANDLE unless `generation` is current. Lock-free: a backend that
  // holds its own lock while using an allocation checks under that lock, and
  // a restart bumps the generation before it frees anything.
  void check_generation(uint64_t generation, const char* what) const;

  // The fake's hooks run through these so that its completions keep the
  // device's bookkeeping (called with no lock held).
  // Runs `f` under the device's lock (the fake's log and arming).
  template <typename F>
  auto with_lock(F&& f) const {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return f();
  }
  void complete_fake(const sw_copy_event_t& e);
  size_t complete_all_fake();

 private:
  friend class DeviceAllocation;
  struct Event {
    bool released = false;
    bool complete = false;
    Status status;
    Ref<DeviceAllocation> allocation;  // a pending copy uses its allocation
  };
  void check_generation_locked(uint64_t generation, const char* what) const;
  void restart_locked();
  // Runs a backend call; a lost device restarts before the error propagates.
  template <typename F> auto call(F&& f) -> decltype(f());
  void finish_event(uint64_t generation, uint64_t id, Status st);
  Event& event_locked(const sw_copy_event_t& e, const char* what);

  Ref<Runtime> runtime_;
  std::unique_ptr<DeviceBackend> backend_;
  // Recursive: dropping an allocation's last reference under the lock
  // re-enters through its destructor.
  mutable std::recursive_mutex mutex_;
  std::condition_variable_any cv_;
  std::atomic<uint64_t> generation_{1};
  uint64_t next_allocation_ = 1;
  uint64_t next_event_ = 1;
  std::unordered_map<uint64_t, Event> events_;
  std::vector<uint64_t> pending_order_;  // fake: async events, oldest first
};

class DeviceAllocation : public Object {
 public:
  DeviceAllocation(Ref<Device> device, uint64_t generation, uint64_t id, ObjectSpec spec, uint64_t extent);
  ~DeviceAllocation() override;

  Device& device() const { return *device_; }
  const Ref<Device>& device_ref() const { return device_; }
  uint64_t generation() const { return generation_; }
  uint64_t id() const { return id_; }
  const ObjectSpec& spec() const { return spec_; }
  uint64_t extent() const { return extent_; }

 private:
  friend class Device;
  Ref<Device> device_;
  uint64_t generation_, id_;
  ObjectSpec spec_;
  uint64_t extent_;
  // Guarded by the device's mutex.
  bool freed_ = false;
  uint32_t copies_ = 0, views_ = 0, computes_ = 0;
};

class DeviceView : public Object {
 public:
  DeviceView(Ref<DeviceAllocation> allocation, void* pointer);
  ~DeviceView() override;
  const DeviceAllocation& allocation() const { return *allocation_; }
  // STALE_HANDLE once the device restarted.
  sw_view_info_t describe() const;

 private:
  Ref<DeviceAllocation> allocation_;
  void* pointer_;
};

std::unique_ptr<DeviceBackend> make_host_backend(Ref<Runtime> runtime);
std::unique_ptr<DeviceBackend> make_fake_backend(const sw_fake_device_vtable_t* vtable);
// The fake backend's log and arming; TYPE for another backend.
class FakeBackend;
FakeBackend& fake_of(const Device& device);
size_t fake_log_count(const FakeBackend& f);
std::string fake_log_entry(const FakeBackend& f, size_t index);
void fake_log_clear(FakeBackend& f);
void fake_arm(FakeBackend& f, uint32_t failures);
// Performs the pending copy `event` (with the device lock held).
Status fake_perform(FakeBackend& f, uint64_t event);

}  // namespace sw
