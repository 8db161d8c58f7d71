// A CPU carrier over host memory the embedder owns (a NumPy array, a
// PyTorch tensor, a mapped file): zero-copy imports. The library never frees
// or pools that memory; it calls the embedder's release exactly once, when
// the carrier drops the memory (dispose, a move out of it, a TiledEvictable
// taking over its values, or destruction).
#pragma once

#include <atomic>

#include "core/carrier.hpp"

namespace sw {

struct ExternalMemory {
  std::byte* data = nullptr;
  size_t bytes = 0;
  bool read_only = false;
  void (*release)(void* user_data) = nullptr;
  void* user_data = nullptr;
};

class ExternalCpuCarrier final : public Carrier {
 public:
  // `memory` has been checked: aligned to the dtype's size, bytes a multiple
  // of it, data non-NULL unless bytes is 0.
  ExternalCpuCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, const ExternalMemory& memory);
  ~ExternalCpuCarrier() override;

  std::byte* host_data() const override { return data_.load(std::memory_order_acquire); }
  bool is_compute() const override { return true; }
  ComputeBackend* compute_backend() const override;
  bool is_read_only() const override { return read_only_; }
  // The memory is the embedder's: it cannot grow, so an empty one stays empty.
  bool is_allocatable() const override { return false; }
  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;
  Ref<Carrier> create_empty_like() const override;

 protected:
  void dispose_storage() override { drop(); }
  // Only ever asked to drop the storage (size 0): a TiledEvictable that took
  // over the values, or undoing an allocation that cannot happen here.
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  // Forgets the memory and calls release; only the first call does anything.
  void drop() noexcept;

  std::atomic<std::byte*> data_;
  const bool read_only_;
  void (*release_)(void* user_data);
  void* user_data_;
  std::atomic<bool> held_{true};
};

}  // namespace sw
