// The carrier base: a flat run of slots of one dtype with a version counter,
// an ownership claim and dispose. Nothing here knows a concrete carrier.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.hpp"

#include "base/object.hpp"
#include "core/runtime.hpp"

namespace sw {

// Completion of an asynchronous transfer; runs on the loop thread.
using IoDone = std::function<void(Status)>;

class Carrier : public Object {
 public:
  Carrier(Ref<Runtime> runtime, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t size);

  Runtime& runtime() const { return *runtime_; }
  const Ref<Runtime>& runtime_ref() const { return runtime_; }
  sw_carrier_kind_t kind() const { return kind_; }
  sw_dtype_t dtype() const { return dtype_; }
  size_t size() const { return size_.load(std::memory_order_acquire); }
  size_t element_size() const;
  const char* kind_name() const;

  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  bool is_disposed() const { return disposed_.load(std::memory_order_acquire); }
  bool is_owned() const;
  bool is_mutable() const { return !is_disposed() && !is_owned() && !is_read_only(); }

  // STATE if disposed; `what` names the operation in the message.
  void check_live(const char* what) const;
  // STATE if disposed or owned.
  void check_mutable(const char* what) const;

  // Ownership: in-flight work or a composite claims the carrier; a claimed
  // carrier refuses public writes and dispose. STATE if already claimed.
  void claim(const char* by);
  void unclaim();

  // Public value access: bounds, liveness and (for writes) mutability checks,
  // and exactly one version step per successful write.
  void read(size_t first, size_t count, void* dst) const;
  void write(size_t first, size_t count, const void* src);
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

  // Idempotent; STATE while owned.
  void dispose();

  // Host address of slot 0 when the storage is host memory, else nullptr.
  virtual std::byte* host_data() const { return nullptr; }
  // Whether ops may compute on this carrier (it is a compute carrier).
  virtual bool is_compute() const { return false; }

  // Raw slot access without checks or version steps (the library's own moves).
  // Storage carriers may throw IO / DATA_CORRUPT.
  virtual void read_slots(size_t first, size_t count, void* dst) const = 0;
  virtual void write_slots(size_t first, size_t count, const void* src) = 0;

  // Asynchronous bulk transfer between slots and host memory, without checks
  // or version steps. Called on the loop thread; `done` runs there too. The
  // buffers stay valid until `done`. The default runs read_slots /
  // write_slots on a background worker.
  virtual void read_async(size_t first, size_t count, std::byte* dst, IoDone done);
  virtual void write_async(size_t first, size_t count, const std::byte* src, IoDone done);

  // A read-only carrier refuses public writes (STATE) and moves into it.
  virtual bool is_read_only() const { return false; }
  // An empty carrier can be given storage by allocate(). Carriers over
  // memory they do not own never can.
  virtual bool is_allocatable() const { return size() == 0 && !is_read_only(); }
  // Gives an empty carrier storage for `size` slots (zero-filled).
  void allocate(size_t size);
  // Undoes allocate() after a failed move: back to an empty carrier.
  void deallocate();
  // An empty carrier of this kind with the same settings (a new file in the
  // same directory, the same compression), for gradients and scatter results.
  // UNSUPPORTED by default.
  virtual Ref<Carrier> create_empty_like() const;
  // Bytes the storage occupies now.
  virtual uint64_t stored_bytes() const { return static_cast<uint64_t>(size()) * element_size(); }

 protected:
  virtual void dispose_storage() = 0;
  // Refuses dispose (STATE) while work that the carrier does not own is pending.
  virtual void check_disposable() const {}
  // Replaces the storage with `size` zero-filled slots (size 0 = none); the
  // base then publishes the size. Used only on empty carriers and to undo.
  virtual void allocate_storage(size_t size) = 0;

 private:
  Ref<Runtime> runtime_;
  sw_carrier_kind_t kind_;
  sw_dtype_t dtype_;
  std::atomic<size_t> size_;
  std::atomic<uint64_t> version_{0};
  std::atomic<bool> disposed_{false};
  mutable std::mutex state_mutex_;
  std::string owner_;  // non-empty while claimed
};

}  // namespace sw
