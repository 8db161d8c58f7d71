#include "carriers/cpu/cpu_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

static size_t checked_bytes(sw_dtype_t dtype, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(size, dtype_size(dtype), &bytes)) value_error("carrier size overflows");
  return bytes;
}

CpuCarrier::CpuCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size)
    : Carrier(runtime, SW_CARRIER_CPU, dtype, size), buffer_(runtime->pool(), checked_bytes(dtype, size)) {}

Ref<CpuCarrier> CpuCarrier::zeros(const Ref<Runtime>& runtime, sw_dtype_t dtype, size_t size) {
  auto c = make_ref<CpuCarrier>(runtime, dtype, size);
  if (size) std::memset(c->host_data(), 0, size * dtype_size(dtype));
  return c;
}

Ref<CpuCarrier> CpuCarrier::copy_of(const Ref<Runtime>& runtime, sw_dtype_t dtype, const void* data, size_t size) {
  auto c = make_ref<CpuCarrier>(runtime, dtype, size);
  if (size) std::memcpy(c->host_data(), data, size * dtype_size(dtype));
  return c;
}

void CpuCarrier::read_slots(size_t first, size_t count, void* dst) const {
  const size_t es = element_size();
  std::memcpy(dst, buffer_.data() + first * es, count * es);
}

void CpuCarrier::write_slots(size_t first, size_t count, const void* src) {
  const size_t es = element_size();
  std::memcpy(buffer_.data() + first * es, src, count * es);
}

}  // namespace sw
