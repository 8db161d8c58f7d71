#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "strideweave/strideweave_testing.h"
#include "carriers/cpu/cpu_carrier.hpp"
#include "carriers/cpu/external_carrier.hpp"
#include "core/dtype.hpp"

using namespace sw;
using namespace sw::api;

extern "C" {

SW_API sw_error_t* sw_carrier_create_cpu(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                         sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_cpu");
    require(out_carrier, "out_carrier");
    count_allocation(*rt, "CPU carrier");
    *out_carrier = to_handle<sw_carrier_t>(CpuCarrier::zeros(rt, dtype, size));
  });
}

SW_API sw_error_t* sw_carrier_create_cpu_from(sw_runtime_t* runtime, sw_dtype_t dtype, const void* data, size_t size,
                                              sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_cpu_from");
    if (size && !data) value_error("data must not be NULL when size is " + std::to_string(size));
    require(out_carrier, "out_carrier");
    count_allocation(*rt, "CPU carrier");
    *out_carrier = to_handle<sw_carrier_t>(CpuCarrier::copy_of(rt, dtype, data, size));
  });
}

SW_API void sw_external_memory_desc_init(sw_external_memory_desc_t* desc) {
  if (!desc) return;
  *desc = sw_external_memory_desc_t{};
  desc->struct_size = sizeof(sw_external_memory_desc_t);
}

SW_API sw_error_t* sw_carrier_create_cpu_external(sw_runtime_t* runtime, sw_dtype_t dtype,
                                                  const sw_external_memory_desc_t* desc,
                                                  sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_cpu_external");
    require(desc, "desc");
    require(out_carrier, "out_carrier");
    sw_external_memory_desc_t defaults;
    sw_external_memory_desc_init(&defaults);
    const sw_external_memory_desc_t d = struct_in(desc, defaults, "sw_carrier_create_cpu_external: desc");
    desc = &d;
    // A quantized dtype's unit is its block; blocks need no alignment.
    const size_t es = dtype_block_bytes(dtype);
    const size_t align = dtype_is_quantized(dtype) ? 1 : es;
    if (desc->bytes && !desc->data)
      value_error("sw_carrier_create_cpu_external: data must not be NULL when bytes is " +
                  std::to_string(desc->bytes));
    if (desc->bytes % es != 0)
      value_error("sw_carrier_create_cpu_external: " + std::to_string(desc->bytes) +
                  " bytes are not a whole number of " + dtype_name(dtype) +
                  (dtype_is_quantized(dtype) ? " blocks of " : " elements of ") + std::to_string(es) + " bytes");
    if (reinterpret_cast<uintptr_t>(desc->data) % align != 0)
      value_error(std::string("sw_carrier_create_cpu_external: data is not aligned to the ") + std::to_string(es) +
                  "-byte " + dtype_name(dtype) + " elements");
    ExternalMemory memory;
    memory.data = static_cast<std::byte*>(desc->data);
    memory.bytes = desc->bytes;
    memory.read_only = desc->read_only;
    memory.release = desc->release;
    memory.user_data = desc->user_data;
    // From here on nothing may fail after the carrier exists: its destructor
    // would call release, and a failed call must leave the memory the caller's.
    auto carrier = make_ref<ExternalCpuCarrier>(rt, dtype, memory);
    *out_carrier = to_handle<sw_carrier_t>(std::move(carrier));
  });
}

SW_API void sw_carrier_retain(sw_carrier_t* carrier) { retain_handle(carrier); }
SW_API void sw_carrier_release(sw_carrier_t* carrier) { release_handle(carrier); }

SW_API sw_error_t* sw_carrier_kind(const sw_carrier_t* carrier, sw_carrier_kind_t* out_kind) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_kind, "out_kind");
    *out_kind = c->kind();
  });
}

SW_API sw_error_t* sw_carrier_dtype(const sw_carrier_t* carrier, sw_dtype_t* out_dtype) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_dtype, "out_dtype");
    *out_dtype = c->dtype();
  });
}

SW_API sw_error_t* sw_carrier_size(const sw_carrier_t* carrier, size_t* out_size) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_size, "out_size");
    *out_size = c->size();
  });
}

SW_API sw_error_t* sw_carrier_version(const sw_carrier_t* carrier, uint64_t* out_version) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_version, "out_version");
    *out_version = c->version();
  });
}

SW_API sw_error_t* sw_carrier_is_mutable(const sw_carrier_t* carrier, bool* out_mutable) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_mutable, "out_mutable");
    *out_mutable = c->is_mutable();
  });
}

SW_API sw_error_t* sw_carrier_is_read_only(const sw_carrier_t* carrier, bool* out_read_only) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_read_only, "out_read_only");
    *out_read_only = c->is_read_only();
  });
}

SW_API sw_error_t* sw_carrier_is_owned(const sw_carrier_t* carrier, bool* out_owned) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_owned, "out_owned");
    *out_owned = c->is_owned();
  });
}

SW_API sw_error_t* sw_carrier_is_disposed(const sw_carrier_t* carrier, bool* out_disposed) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_disposed, "out_disposed");
    *out_disposed = c->is_disposed();
  });
}

SW_API sw_error_t* sw_carrier_read(const sw_carrier_t* carrier, size_t first_slot, size_t count, void* destination) {
  return guard([&] {
    const Carrier* c = get<Carrier>(carrier, "carrier");
    if (count) require(destination, "destination");
    c->read(first_slot, count, destination);
  });
}

SW_API sw_error_t* sw_carrier_write(sw_carrier_t* carrier, size_t first_slot, size_t count, const void* source) {
  return guard([&] {
    Carrier* c = get<Carrier>(carrier, "carrier");
    if (count) require(source, "source");
    c->write(first_slot, count, source);
  });
}

SW_API sw_error_t* sw_carrier_dispose(sw_carrier_t* carrier) {
  return guard([&] { get<Carrier>(carrier, "carrier")->dispose(); });
}

SW_API sw_error_t* sw_carrier_host_pointer(sw_carrier_t* carrier, void** out_pointer) {
  return guard([&] {
    Carrier* c = get<Carrier>(carrier, "carrier");
    require(out_pointer, "out_pointer");
    c->check_live("host_pointer");
    c->check_not_tier("host_pointer");
    std::byte* p = c->host_data();
    if (!p && c->size() != 0)
      unsupported_error(std::string("the ") + c->kind_name() + " carrier's memory is not host addressable");
    *out_pointer = p;
  });
}

SW_API sw_error_t* sw_testing_claim(sw_carrier_t* carrier) {
  return guard([&] { get<Carrier>(carrier, "carrier")->claim("a test claim"); });
}

SW_API sw_error_t* sw_testing_unclaim(sw_carrier_t* carrier) {
  return guard([&] { get<Carrier>(carrier, "carrier")->unclaim(); });
}

}  // extern "C"
