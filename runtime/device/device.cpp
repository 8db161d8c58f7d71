// Device: the contract's rules over any backend.
#include <chrono>
#include <string>

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "device/bridge.hpp"

namespace sw {

Device::Device(Ref<Runtime> runtime, std::unique_ptr<DeviceBackend> backend)
    : Object(ObjectKind::kDevice), runtime_(std::move(runtime)), backend_(std::move(backend)) {}

Device::~Device() = default;

uint64_t Device::generation() const { return generation_.load(std::memory_order_acquire); }

template <typename F>
auto Device::call(F&& f) -> decltype(f()) {
  try {
    runtime_->check_fault(FaultKind::kDeviceLost, "device call");
    return f();
  } catch (const Error& e) {
    if (e.code() == SW_ERROR_DEVICE_LOST) restart_locked();
    throw;
  }
}

void Device::restart_locked() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Pending copies are abandoned: they never report complete; their events
  // (and the uses they held) go with the old generation.
  std::unordered_map<uint64_t, Event> old;
  old.swap(events_);
  pending_order_.clear();
  backend_->restart(generation_.load());
  cv_.notify_all();
  // Drop the events' allocation references after the lock's work is done:
  // an allocation destroyed here only checks its (now old) generation.
  for (auto& [id, ev] : old) {
    if (ev.allocation) ev.allocation->copies_ = 0;
  }
  old.clear();
}

void Device::restart() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  restart_locked();
}

void Device::check_generation_locked(uint64_t generation, const char* what) const {
  const uint64_t now = generation_.load(std::memory_order_acquire);
  if (generation != now)
    throw_error(SW_ERROR_STALE_HANDLE, std::string(what) + ": handle of device generation " +
                                           std::to_string(generation) + ", the device is at generation " +
                                           std::to_string(now) + " (it restarted or was lost since)");
}

void Device::check_generation(uint64_t generation, const char* what) const { check_generation_locked(generation, what); }

Ref<DeviceAllocation> Device::allocate(const ObjectSpec& spec, uint64_t extent, const AllocationOptions& options) {
  if (dtype_is_quantized(spec.dtype))
    type_error(std::string("sw_device_alloc: ") + dtype_name(spec.dtype) +
               " is a block-quantized dtype, which device memory does not hold");
  const size_t es = dtype_size(spec.dtype);
  if (es == 0) type_error("sw_device_alloc: spec->dtype is not a valid dtype");
  uint64_t need = es;
  for (int64_t e : spec.shape) {
    if (e < 0) value_error("sw_device_alloc: spec->shape has a negative extent");
    need *= static_cast<uint64_t>(e);
  }
  if (spec.alignment == 0 || (spec.alignment & (spec.alignment - 1)))
    value_error("sw_device_alloc: alignment " + std::to_string(spec.alignment) + " is not a power of two");
  if (extent == 0) value_error("sw_device_alloc: extent 0 is invalid");
  if (spec.max_extent && extent > spec.max_extent)
    value_error("sw_device_alloc: extent " + std::to_string(extent) + " exceeds the spec's max extent " +
                std::to_string(spec.max_extent));
  if (extent < need)
    value_error("sw_device_alloc: extent " + std::to_string(extent) + " is smaller than the object's " +
                std::to_string(need) + " bytes");
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  runtime_->check_fault(FaultKind::kDeviceAllocation, "device allocation");
  const uint64_t id = next_allocation_++;
  call([&] { backend_->allocate(id, extent, spec.alignment, options); });
  return make_ref<DeviceAllocation>(Ref<Device>(this), generation_.load(), id, spec, extent);
}

void Device::free(DeviceAllocation& a) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  check_generation_locked(a.generation_, "sw_device_free");
  if (a.freed_) state_error("sw_device_free: the allocation was already freed");
  if (a.copies_ || a.views_ || a.computes_)
    state_error("sw_device_free: the allocation is in use (" + std::to_string(a.computes_) + " compute, " +
                std::to_string(a.copies_) + " pending copies, " + std::to_string(a.views_) + " views)");
  a.freed_ = true;
  backend_->release(a.id_);
}

void Device::compute(DeviceAllocation& a, bool begin) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  check_generation_locked(a.generation_, begin ? "sw_device_compute_begin" : "sw_device_compute_end");
  if (a.freed_) state_error("the allocation was freed");
  if (begin) {
    ++a.computes_;
  } else {
    if (!a.computes_) state_error("sw_device_compute_end: no compute was begun");
    --a.computes_;
  }
}

sw_copy_event_t Device::copy(DeviceAllocation& a, bool to_device, uint64_t offset, void* host, uint64_t bytes,
                             bool async) {
  const char* what = to_device ? "sw_device_host_to_device" : "sw_device_device_to_host";
  if (!host) value_error(std::string(what) + ": host must not be NULL");
  if (bytes == 0) value_error(std::string(what) + ": bytes must not be 0");
  if (offset > a.extent_ || bytes > a.extent_ - offset)
    index_error(std::string(what) + ": range [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                ") passes the allocation's extent " + std::to_string(a.extent_));
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  check_generation_locked(a.generation_, what);
  if (a.freed_) state_error(std::string(what) + ": the allocation was freed");
  runtime_->check_fault(FaultKind::kDeviceCopy, what);
  sw_copy_event_t ev{sizeof(sw_copy_event_t), generation_, next_event_++};
  if (!async) {
    call([&] {
      if (to_device)
        backend_->copy_in(a.id_, offset, host, bytes);
      else
        backend_->copy_out(a.id_, offset, host, bytes);
    });
    Event& e = events_[ev.id];
    e.released = e.complete = true;
    return ev;
  }
  Event& e = events_[ev.id];
  e.allocation = Ref<DeviceAllocation>(&a);
  ++a.copies_;
  const uint64_t gen = generation_, id = ev.id;
  Ref<Device> self(this);
  bool released = false;
  Status st = capture([&] {
    released = call([&] {
      return backend_->copy_async(id, to_device, a.id_, offset, host, bytes,
                                  [self, gen, id](Status s) { self->finish_event(gen, id, std::move(s)); });
    });
  });
  if (!st.ok()) {
    if (generation_ == gen) {
      --a.copies_;
      events_.erase(id);
    }
    st.raise();
  }
  e.released = released;
  pending_order_.push_back(id);
  return ev;
}

void Device::finish_event(uint64_t generation, uint64_t id, Status st) {
  Ref<DeviceAllocation> drop;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (generation != generation_) return;  // abandoned by a restart
    auto it = events_.find(id);
    if (it == events_.end() || it->second.complete) return;
    if (st.code == SW_ERROR_DEVICE_LOST) {
      restart_locked();
      return;
    }
    Event& e = it->second;
    e.released = e.complete = true;
    e.status = std::move(st);
    if (e.allocation) {
      --e.allocation->copies_;
      drop = std::move(e.allocation);
    }
    std::erase(pending_order_, id);
    cv_.notify_all();
  }
}

Device::Event& Device::event_locked(const sw_copy_event_t& e, const char* what) {
  check_generation_locked(e.generation, what);
  auto it = events_.find(e.id);
  if (it == events_.end()) value_error(std::string(what) + ": no copy event " + std::to_string(e.id));
  return it->second;
}

void Device::query(const sw_copy_event_t& e, bool* released, bool* complete) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Event& ev = event_locked(e, "sw_device_event_query");
  if (!ev.status.ok()) ev.status.raise();
  *released = ev.released;
  *complete = ev.complete;
}

void Device::wait(const sw_copy_event_t& e, int64_t timeout_ns) {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns < 0 ? 0 : timeout_ns);
  for (;;) {
    Event& ev = event_locked(e, "sw_device_event_wait");
    if (ev.complete) {
      if (!ev.status.ok()) ev.status.raise();
      return;
    }
    if (timeout_ns < 0) {
      cv_.wait(lock);
    } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      Event& again = event_locked(e, "sw_device_event_wait");
      if (again.complete) continue;
      throw_error(SW_ERROR_TIMEOUT, "sw_device_event_wait: copy event " + std::to_string(e.id) +
                                        " did not complete in time");
    }
  }
}

void* Device::begin_view(DeviceAllocation& a) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  check_generation_locked(a.generation_, "sw_device_view");
  if (a.freed_) state_error("sw_device_view: the allocation was freed");
  void* p = call([&] { return backend_->map(a.id_); });
  ++a.views_;
  return p;
}

void Device::end_view(DeviceAllocation& a) noexcept {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (a.generation_ == generation_ && a.views_) --a.views_;
}

void Device::complete_fake(const sw_copy_event_t& e) {
  FakeBackend& f = fake_of(*this);
  Status st;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    Event& ev = event_locked(e, "sw_fake_device_complete");
    if (ev.complete) value_error("sw_fake_device_complete: copy event " + std::to_string(e.id) + " is not pending");
    st = fake_perform(f, e.id);
  }
  finish_event(e.generation, e.id, std::move(st));
}

size_t Device::complete_all_fake() {
  size_t n = 0;
  for (;;) {
    sw_copy_event_t e{sizeof(sw_copy_event_t), 0, 0};
    {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      if (pending_order_.empty()) return n;
      e.generation = generation_;
      e.id = pending_order_.front();
    }
    complete_fake(e);
    ++n;
  }
}

DeviceAllocation::DeviceAllocation(Ref<Device> device, uint64_t generation, uint64_t id, ObjectSpec spec,
                                   uint64_t extent)
    : Object(ObjectKind::kDeviceAllocation),
      device_(std::move(device)),
      generation_(generation),
      id_(id),
      spec_(std::move(spec)),
      extent_(extent) {}

DeviceAllocation::~DeviceAllocation() {
  // The last handle gone: nothing uses the memory any more.
  std::lock_guard<std::recursive_mutex> lock(device_->mutex_);
  if (!freed_ && generation_ == device_->generation_) device_->backend_->release(id_);
}

DeviceView::DeviceView(Ref<DeviceAllocation> allocation, void* pointer)
    : Object(ObjectKind::kDeviceView), allocation_(std::move(allocation)), pointer_(pointer) {}

DeviceView::~DeviceView() { allocation_->device().end_view(*allocation_); }

sw_view_info_t DeviceView::describe() const {
  allocation_->device().check_generation(allocation_->generation(), "sw_device_view_describe");
  sw_view_info_t info{};
  info.struct_size = sizeof(info);
  const ObjectSpec& s = allocation_->spec();
  info.pointer = pointer_;
  info.dtype = s.dtype;
  info.rank = s.shape.size();
  int64_t stride = static_cast<int64_t>(dtype_size(s.dtype));
  for (size_t i = 0; i < s.shape.size(); ++i) {
    info.shape[i] = s.shape[i];
    info.strides_bytes[i] = stride;
    stride *= s.shape[i];
  }
  return info;
}

}  // namespace sw
