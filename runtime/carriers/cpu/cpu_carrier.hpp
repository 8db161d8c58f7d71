// The CPU carrier: aligned host memory from the runtime's reuse pool; the
// default compute carrier.
#pragma once

#include "core/buffer_pool.hpp"
#include "core/carrier.hpp"

namespace sw {

class CpuCarrier final : public Carrier {
 public:
  // Uninitialised storage (the ops' outputs); use zeros()/copy_of() publicly.
  CpuCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size);

  static Ref<CpuCarrier> zeros(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size);
  static Ref<CpuCarrier> copy_of(const Ref<Runtime>& runtime, sw_dtype_t dtype, const void* data, size_t size);

  std::byte* host_data() const override { return buffer_.data(); }
  bool is_compute() const override { return true; }
  void read_slots(size_t first, size_t count, void* dst) const override;
  void write_slots(size_t first, size_t count, const void* src) override;

 protected:
  void dispose_storage() override { buffer_.reset(); }

 private:
  HostBuffer buffer_;
};

}  // namespace sw
