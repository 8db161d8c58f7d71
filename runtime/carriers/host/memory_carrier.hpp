// Carriers whose slots are plain host memory from the runtime's pool: CPU
// (the compute carrier) and Host (a storage tier).
#pragma once

#include "core/buffer_pool.hpp"
#include "core/carrier.hpp"

namespace sw {

class MemoryCarrier : public Carrier {
 public:
  // Uninitialised storage of `size` slots, starting `phase` bytes past the
  // pool's alignment (HostBuffer).
  MemoryCarrier(Ref<Runtime> runtime, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t size, size_t phase = 0);

  std::byte* host_data() const override { return buffer_.data(); }
  bool host_blocks_owned() const override { return buffer_.whole_blocks(); }
  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;

 protected:
  void dispose_storage() override { buffer_.reset(); }
  void allocate_storage(size_t size, bool zero_fill) override;

 private:
  HostBuffer buffer_;
};

class HostCarrier final : public MemoryCarrier {
 public:
  HostCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size);  // zero-filled
  Ref<Carrier> create_empty_like() const override { return make_ref<HostCarrier>(runtime_ref(), dtype(), 0); }
};

}  // namespace sw
