#include "carriers/cpu/external_carrier.hpp"

#include <cstring>

#include "base/error.hpp"
#include "carriers/cpu/cpu_backend.hpp"
#include "carriers/cpu/cpu_carrier.hpp"
#include "core/dtype.hpp"

namespace sw {

ComputeBackend* ExternalCpuCarrier::compute_backend() const { return &cpu_backend(); }

ExternalCpuCarrier::ExternalCpuCarrier(Ref<Runtime> runtime, sw_dtype_t dtype, const ExternalMemory& memory)
    : Carrier(std::move(runtime), SW_CARRIER_CPU, dtype, static_cast<size_t>(dtype_elements_in(dtype, memory.bytes))),
      data_(memory.data),
      read_only_(memory.read_only),
      release_(memory.release),
      user_data_(memory.user_data) {}

ExternalCpuCarrier::~ExternalCpuCarrier() { drop(); }

void ExternalCpuCarrier::read_slots(size_t first, size_t count, void* dst) const {
  std::memcpy(dst, host_data() + bytes_of(first), bytes_of(count));
}

void ExternalCpuCarrier::write_slots(size_t first, size_t count, const void* src) {
  std::memcpy(host_data() + bytes_of(first), src, bytes_of(count));
}

Ref<Carrier> ExternalCpuCarrier::create_empty_like() const {
  return make_ref<CpuCarrier>(runtime_ref(), dtype(), 0);
}

void ExternalCpuCarrier::allocate_storage(size_t size, bool) {
  if (size != 0) internal_error("a CPU carrier over host memory cannot be given new storage");
  drop();
}

void ExternalCpuCarrier::drop() noexcept {
  if (!held_.exchange(false, std::memory_order_acq_rel)) return;
  data_.store(nullptr, std::memory_order_release);
  if (release_) release_(user_data_);
}

}  // namespace sw
