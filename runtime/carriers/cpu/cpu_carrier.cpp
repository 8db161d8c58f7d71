#include "carriers/cpu/cpu_carrier.hpp"

#include <cstring>

#include "carriers/cpu/cpu_backend.hpp"
#include "core/dtype.hpp"

namespace sw {

ComputeBackend* CpuCarrier::compute_backend() const { return &cpu_backend(); }

Ref<CpuCarrier> CpuCarrier::zeros(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size) {
  auto c = make_ref<CpuCarrier>(runtime, dtype, size);
  if (size) std::memset(c->host_data(), 0, dtype_bytes(dtype, size));
  return c;
}

Ref<CpuCarrier> CpuCarrier::copy_of(const Ref<Runtime>& runtime, sw_dtype_t dtype, const void* data, size_t size) {
  auto c = make_ref<CpuCarrier>(runtime, dtype, size);
  if (size) std::memcpy(c->host_data(), data, dtype_bytes(dtype, size));
  return c;
}

}  // namespace sw
