#include <zstd.h>

#include <cstring>
#include <vector>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "strideweave/strideweave_testing.h"
#include "carriers/zstd/zstd_carrier.hpp"
#include "core/dtype.hpp"

using namespace sw;
using namespace sw::api;

namespace {

ZstdCarrier& zstd_arg(const sw_carrier_t* carrier, const char* what) {
  Carrier* c = get<Carrier>(carrier, "carrier");
  if (c->kind() != SW_CARRIER_ZSTD)
    unsupported_error(std::string(what) + ": the " + c->kind_name() + " carrier has no zstd frames");
  c->check_live(what);
  return *static_cast<ZstdCarrier*>(c);
}

}  // namespace

extern "C" {

SW_API void sw_zstd_carrier_desc_init(sw_zstd_carrier_desc_t* desc) {
  if (!desc) return;
  *desc = sw_zstd_carrier_desc_t{};
  desc->struct_size = sizeof(sw_zstd_carrier_desc_t);
  desc->level = 1;
  desc->frame_elements = 0;
  desc->shuffle = -1;
}

SW_API sw_error_t* sw_carrier_create_zstd(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size,
                                          const sw_zstd_carrier_desc_t* desc, sw_carrier_t** out_carrier) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_carrier_create_zstd");
    require(out_carrier, "out_carrier");
    ZstdCarrierOptions options;
    sw_zstd_carrier_desc_t checked;
    if (desc) {
      sw_zstd_carrier_desc_init(&checked);
      checked = struct_in(desc, checked, "sw_carrier_create_zstd: desc");
      desc = &checked;
      if (desc->level < ZSTD_minCLevel() || desc->level > ZSTD_maxCLevel())
        value_error("sw_carrier_create_zstd: level " + std::to_string(desc->level) + " is outside " +
                    std::to_string(ZSTD_minCLevel()) + ".." + std::to_string(ZSTD_maxCLevel()));
      if (desc->shuffle < -1 || desc->shuffle > 1)
        value_error("sw_carrier_create_zstd: shuffle " + std::to_string(desc->shuffle) +
                    " is not -1 (auto), 0 (off) or 1 (on)");
      options.level = desc->level;
      if (desc->frame_elements) options.frame_elements = desc->frame_elements;
      options.shuffle = desc->shuffle;
    }
    count_allocation(*rt, "Zstd carrier");
    *out_carrier = to_handle<sw_carrier_t>(make_ref<ZstdCarrier>(rt, dtype, size, options));
  });
}

SW_API sw_error_t* sw_testing_corrupt_frame(sw_carrier_t* carrier, size_t frame) {
  return guard([&] {
    Carrier* c = get<Carrier>(carrier, "carrier");
    if (c->kind() != SW_CARRIER_ZSTD)
      unsupported_error(std::string("sw_testing_corrupt_frame: the ") + c->kind_name() +
                        " carrier has no zstd frames");
    c->check_live("sw_testing_corrupt_frame");
    static_cast<ZstdCarrier*>(c)->corrupt_frame(frame);
  });
}

SW_API sw_error_t* sw_testing_frame_bytes(const sw_carrier_t* carrier, size_t frame, void* buffer, size_t capacity,
                                          size_t* out_length) {
  return guard([&] {
    ZstdCarrier& z = zstd_arg(carrier, "sw_testing_frame_bytes");
    require(out_length, "out_length");
    if (!buffer && capacity) value_error("sw_testing_frame_bytes: buffer is NULL with capacity " + std::to_string(capacity));
    const std::vector<std::byte> bytes = z.frame_bytes(frame);
    *out_length = bytes.size();
    if (!buffer) return;  // the length only
    if (capacity < bytes.size())
      value_error("sw_testing_frame_bytes: frame " + std::to_string(frame) + " holds " + std::to_string(bytes.size()) +
                  " bytes, the buffer " + std::to_string(capacity));
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  });
}

SW_API sw_error_t* sw_testing_replace_frame(sw_carrier_t* carrier, size_t frame, const void* bytes, size_t length) {
  return guard([&] {
    ZstdCarrier& z = zstd_arg(carrier, "sw_testing_replace_frame");
    if (!bytes && length) value_error("sw_testing_replace_frame: bytes is NULL with length " + std::to_string(length));
    z.replace_frame(frame, static_cast<const std::byte*>(bytes), length);
  });
}

}  // extern "C"
