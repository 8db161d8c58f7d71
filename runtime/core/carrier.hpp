// The carrier base: a flat run of slots of one dtype with a version counter,
// an ownership claim and dispose. Nothing here knows a concrete carrier.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.hpp"

#include "base/object.hpp"
#include "core/runtime.hpp"

namespace sw {

class ComputeBackend;  // the kernels of a compute carrier kind (ops/backend.hpp)
class Tensor;

// A run of consecutive slots.
struct SlotRun {
  size_t first = 0, count = 0;
};

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
  // Bytes of `count` slots (dtype_bytes: whole blocks of a quantized dtype).
  // A slot is an element; a quantized carrier's slot ranges are whole blocks.
  size_t bytes_of(size_t count) const;
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
  // carrier refuses public writes and dispose. A composite that takes the
  // carrier's values over (`taken`: a TiledEvictable's primary seed) also
  // makes it refuse public reads, and the carrier keeps reporting its size.
  // STATE if already claimed.
  void claim(const char* by, bool taken = false);
  void unclaim();
  // STATE when a composite took the carrier's values over.
  void check_not_tier(const char* what) const;

  // Public value access: bounds, liveness and (for writes) mutability checks,
  // and exactly one version step per successful write.
  void read(size_t first, size_t count, void* dst) const;
  void write(size_t first, size_t count, const void* src);
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

  // Idempotent; STATE while owned. Storage still pinned by a reader on
  // another thread is dropped when the last pin goes (see StoragePin).
  void dispose();

  // Reader pins (StoragePin): while one is held, dispose() marks the carrier
  // disposed but leaves the storage in place for the reader.
  void pin_storage(const char* what) const;
  void unpin_storage() const;

  // Host address of slot 0 when the storage is host memory, else nullptr.
  virtual std::byte* host_data() const { return nullptr; }
  // The 4096-byte blocks enclosing host_data()'s storage belong to this
  // carrier: bytes of them outside its slots may be overwritten (a read
  // filling whole blocks, see read_async).
  virtual bool host_blocks_owned() const { return false; }
  // Whether ops may compute on this carrier (it is a compute carrier).
  virtual bool is_compute() const { return false; }

  // ---- What ops and autograd ask of a carrier -------------------------------
  // Carrier-specific behaviour the layers above need is asked for here, so
  // that they never look at a carrier's kind and cast.
  //
  // The kernels of a compute carrier (its kind's ComputeBackend); null for
  // carriers ops do not compute on.
  virtual ComputeBackend* compute_backend() const { return nullptr; }
  // A composite carrier (a TiledEvictable) stands for values that live in
  // other carriers: a tensor on it is an op operand only as a whole, made
  // available by resolve_operand, and its gradients are composites too.
  virtual bool is_composite() const { return false; }
  // The carrier whose kind a tensor on this one computes on (a composite's
  // primary tier).
  virtual const Carrier& compute_side() const { return *this; }
  // A composite checks a tensor over it as an op operand (STATE, VALUE).
  virtual void check_operand(const Tensor& t, const char* op) const;
  // The operand's values as a dense tensor on a compute carrier: the tensor
  // itself here; a composite makes every value available (blocking, no
  // autograd node).
  virtual Ref<Tensor> resolve_operand(const Ref<Tensor>& t, sw_residency_purpose_t purpose, const char* op) const;
  // A composite's gradients: what leaf.grad stores for a leaf over this
  // carrier given `g` (dense or composite), and the sum of two gradients of
  // which `a` is over this carrier. UNSUPPORTED on other carriers.
  virtual Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) const;
  virtual Ref<Tensor> add_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b) const;

  // Raw slot access without checks or version steps (the library's own moves).
  // Storage carriers may throw IO / DATA_CORRUPT.
  virtual void read_slots(size_t first, size_t count, void* dst) const = 0;
  virtual void write_slots(size_t first, size_t count, const void* src) = 0;
  // Writes consecutive packed values to several runs as one operation. The
  // default writes run by run; a carrier that can refuse a write for part of
  // its slots (TiledEvictable) checks every run first, so a refused write
  // changes nothing.
  virtual void write_runs(const std::vector<SlotRun>& runs, const std::byte* src);
  // Reads several runs into consecutive packed values, as one operation.
  // The default reads run by run; a carrier that reads in larger units
  // (TiledEvictable: whole tiles) reads each unit the runs touch once.
  virtual void read_runs(const std::vector<SlotRun>& runs, std::byte* dst) const;
  // Slots of the unit a carrier reads at once (a TiledEvictable's tile), for
  // callers that read a large extent chunk by chunk; 0 when any chunk will do.
  virtual size_t read_granule() const { return 0; }
  // The byte remainder, modulo 4096, of a destination address into which a
  // read of slots from `first` lands in place; 0 when any aligned address
  // does as well. A file carrier reading with direct I/O gives its file
  // offset's remainder: at any other address every block of the read goes
  // through a bounce buffer and a copy.
  virtual size_t read_phase(size_t first) const { return (void)first, 0; }

  // Asynchronous bulk transfer between slots and host memory, without checks
  // or version steps. Called on the loop thread; `done` runs there too. The
  // buffers stay valid until `done`. Each call is one storage transfer for
  // the runtime's testing holds (Runtime::arm_hold). A kPrefetch read (an
  // explicit promotion's) yields to kDemand transfers where the carrier
  // queues its requests (the file carrier: async/io_queue.hpp).
  // `whole_blocks`: the 4096-byte blocks enclosing [dst, dst + count slots)
  // are the caller's scratch beyond the range, so the read may fill them
  // whole (host_blocks_owned of the carrier dst belongs to): a direct-I/O
  // read then reads a range's unaligned ends in place, not through bounce
  // reads of their blocks.
  void read_async(size_t first, size_t count, std::byte* dst, IoDone done,
                  IoPriority priority = IoPriority::kDemand, bool whole_blocks = false);
  void write_async(size_t first, size_t count, const std::byte* src, IoDone done);

  // A read-only carrier refuses public writes (STATE) and moves into it.
  virtual bool is_read_only() const { return false; }
  // An empty carrier can be given storage by allocate(). Carriers over
  // memory they do not own never can.
  virtual bool is_allocatable() const { return size() == 0 && !is_read_only(); }
  // Gives an empty carrier storage for `size` slots, zero-filled unless the
  // caller overwrites every slot next (`zero_fill` false; a hint that memory
  // carriers take).
  void allocate(size_t size, bool zero_fill = true);
  // Undoes allocate() after a failed move: back to an empty carrier.
  void deallocate();
  // Frees the storage of a composite's tier whose values the composite took
  // over; the carrier keeps reporting its size (reads of a tier are refused).
  void drop_tier_storage();
  // An empty carrier of this kind with the same settings (a new file in the
  // same directory, the same compression), for gradients and scatter results.
  // UNSUPPORTED by default.
  virtual Ref<Carrier> create_empty_like() const;
  // Bytes the storage occupies now.
  virtual uint64_t stored_bytes() const { return bytes_of(size()); }

 protected:
  // The transfers behind read_async / write_async. The default runs
  // read_slots / write_slots on a background worker, or, for a small range
  // of a carrier over host memory, on the loop thread (Runtime::run_copy).
  virtual void issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                          bool whole_blocks);
  virtual void issue_write(size_t first, size_t count, const std::byte* src, IoDone done);
  virtual void dispose_storage() = 0;
  // Refuses dispose (STATE) while work that the carrier does not own is pending.
  virtual void check_disposable() const {}
  // Replaces the storage with `size` slots (size 0 = none), zero-filled
  // unless `zero_fill` is false; the base then publishes the size. Used only
  // on empty carriers and to undo.
  virtual void allocate_storage(size_t size, bool zero_fill) = 0;

 private:
  Ref<Runtime> runtime_;
  sw_carrier_kind_t kind_;
  sw_dtype_t dtype_;
  std::atomic<size_t> size_;
  std::atomic<uint64_t> version_{0};
  std::atomic<bool> disposed_{false};
  mutable std::atomic<int64_t> pins_{0};
  mutable std::atomic<bool> storage_dropped_{false};
  void drop_storage_once(bool rethrow) const;
  mutable std::mutex state_mutex_;
  std::string owner_;  // non-empty while claimed
  std::atomic<bool> tier_{false};  // claimed as a composite's tier
};

// Holds a carrier's storage while its values are read on this thread, so that
// a dispose on another thread (a move committing, a release) cannot free it
// underneath the read. STATE, naming `what`, if the carrier is already
// disposed. Pins nest and are cheap (one atomic add).
class StoragePin {
 public:
  StoragePin() = default;
  StoragePin(const Carrier& carrier, const char* what) : carrier_(&carrier) { carrier.pin_storage(what); }
  StoragePin(StoragePin&& o) noexcept : carrier_(o.carrier_) { o.carrier_ = nullptr; }
  StoragePin& operator=(StoragePin&& o) noexcept {
    if (this != &o) {
      reset();
      carrier_ = o.carrier_;
      o.carrier_ = nullptr;
    }
    return *this;
  }
  StoragePin(const StoragePin&) = delete;
  StoragePin& operator=(const StoragePin&) = delete;
  ~StoragePin() { reset(); }
  void reset() {
    if (carrier_) carrier_->unpin_storage();
    carrier_ = nullptr;
  }

 private:
  Ref<const Carrier> carrier_;
};

}  // namespace sw
