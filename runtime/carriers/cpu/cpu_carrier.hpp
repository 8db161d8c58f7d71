// The CPU carrier: aligned host memory from the runtime's reuse pool; the
// default compute carrier.
#pragma once

#include "carriers/host/memory_carrier.hpp"

namespace sw {

class CpuCarrier final : public MemoryCarrier {
 public:
  // Uninitialised storage (the ops' outputs); use zeros()/copy_of() publicly.
  // `phase`: see MemoryCarrier (a tile buffer a direct read fills in place).
  CpuCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size, size_t phase = 0)
      : MemoryCarrier(std::move(runtime), SW_CARRIER_CPU, dtype, size, phase) {}

  static Ref<CpuCarrier> zeros(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size);
  static Ref<CpuCarrier> copy_of(const Ref<Runtime>& runtime, sw_dtype_t dtype, const void* data, size_t size);

  bool is_compute() const override { return true; }
  ComputeBackend* compute_backend() const override;
  Ref<Carrier> create_empty_like() const override { return make_ref<CpuCarrier>(runtime_ref(), dtype(), 0); }
};

}  // namespace sw
