#include "carriers/host/memory_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

static size_t checked_bytes(sw_dtype_t dtype, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(size, dtype_size(dtype), &bytes)) value_error("carrier size overflows");
  return bytes;
}

MemoryCarrier::MemoryCarrier(Ref<Runtime> runtime, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t size,
                             size_t phase)
    : Carrier(runtime, kind, dtype, size), buffer_(runtime->pool(), checked_bytes(dtype, size), phase) {}

void MemoryCarrier::read_slots(size_t first, size_t count, void* dst) const {
  const size_t es = element_size();
  std::memcpy(dst, buffer_.data() + first * es, count * es);
}

void MemoryCarrier::write_slots(size_t first, size_t count, const void* src) {
  const size_t es = element_size();
  std::memcpy(buffer_.data() + first * es, src, count * es);
}

void MemoryCarrier::allocate_storage(size_t size, bool zero_fill) {
  HostBuffer b(runtime().pool(), checked_bytes(dtype(), size));
  if (size && zero_fill) std::memset(b.data(), 0, b.bytes());
  buffer_ = std::move(b);
}

HostCarrier::HostCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size)
    : MemoryCarrier(std::move(runtime), SW_CARRIER_HOST, dtype, size) {
  if (size) std::memset(host_data(), 0, size * element_size());
}

}  // namespace sw
