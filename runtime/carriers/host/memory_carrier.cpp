#include "carriers/host/memory_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

static size_t checked_bytes(sw_dtype_t dtype, size_t size) {
  check_whole_blocks(dtype, size, "carrier size");
  return dtype_bytes(dtype, size);
}

MemoryCarrier::MemoryCarrier(Ref<Runtime> runtime, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t size,
                             size_t phase)
    : Carrier(runtime, kind, dtype, size), buffer_(runtime->pool(), checked_bytes(dtype, size), phase) {}

void MemoryCarrier::read_slots(size_t first, size_t count, void* dst) const {
  std::memcpy(dst, buffer_.data() + bytes_of(first), bytes_of(count));
}

void MemoryCarrier::write_slots(size_t first, size_t count, const void* src) {
  std::memcpy(buffer_.data() + bytes_of(first), src, bytes_of(count));
}

void MemoryCarrier::allocate_storage(size_t size, bool zero_fill) {
  HostBuffer b(runtime().pool(), checked_bytes(dtype(), size));
  if (size && zero_fill) std::memset(b.data(), 0, b.bytes());
  buffer_ = std::move(b);
}

HostCarrier::HostCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, size_t size)
    : MemoryCarrier(std::move(runtime), SW_CARRIER_HOST, dtype, size) {
  if (size) std::memset(host_data(), 0, bytes_of(size));
}

}  // namespace sw
