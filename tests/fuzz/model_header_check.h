/* The invariants of a model-file header the parsers accepted, shared by
 * fuzz_npy.c, fuzz_safetensors.c and fuzz_gguf.c. */
#ifndef MODEL_HEADER_CHECK_H_
#define MODEL_HEADER_CHECK_H_

#include "fuzz.h"

static inline void mh_check_info(const sw_file_tensor_info_t* info, uint64_t file_size, const char* what) {
  FZ_REQUIRE(info->rank <= SW_MAX_RANK, "%s: rank %zu", what, info->rank);
  /* Elements per unit (a block of a quantized dtype, else one) and its bytes. */
  const size_t unit = sw_dtype_block_elements(info->dtype), unit_bytes = sw_dtype_block_bytes(info->dtype);
  FZ_REQUIRE(unit > 0 && unit_bytes > 0, "%s: dtype %d has no size", what, (int)info->dtype);
  /* The extents' bytes, without overflow. */
  unsigned __int128 elements = 1;
  for (size_t i = 0; i < info->rank; ++i) {
    FZ_REQUIRE(info->shape[i] >= 0, "%s: extent %zu is %lld", what, i, (long long)info->shape[i]);
    elements *= (uint64_t)info->shape[i];
    if (elements > ((unsigned __int128)1 << 64)) elements = ((unsigned __int128)1 << 64);
  }
  FZ_REQUIRE(elements % unit == 0, "%s: %llu elements are not whole blocks of %zu", what,
             (unsigned long long)elements, unit);
  unsigned __int128 bytes = elements / unit * unit_bytes;
  if (bytes > ((unsigned __int128)1 << 64)) bytes = ((unsigned __int128)1 << 64);
  FZ_REQUIRE(bytes == info->data_bytes, "%s: data_bytes %llu for the shape's %llu", what,
             (unsigned long long)info->data_bytes, (unsigned long long)bytes);
  FZ_REQUIRE(info->data_offset <= file_size && info->data_bytes <= file_size - info->data_offset,
             "%s: data [%llu, +%llu) outside a %llu-byte file", what, (unsigned long long)info->data_offset,
             (unsigned long long)info->data_bytes, (unsigned long long)file_size);
  bool seen[SW_MAX_RANK] = {false};
  for (size_t i = 0; i < info->rank; ++i) {
    const size_t p = info->permutation[i];
    FZ_REQUIRE(p < info->rank && !seen[p], "%s: permutation entry %zu is %zu", what, i, p);
    seen[p] = true;
    FZ_REQUIRE(info->logical_shape[p] == info->shape[i], "%s: file mode %zu is not logical mode %zu", what, i, p);
    const bool c_order = info->order != SW_FILE_ORDER_FIRST_MODE_FASTEST;
    FZ_REQUIRE(p == (c_order ? info->rank - 1 - i : i), "%s: permutation entry %zu is %zu", what, i, p);
  }
  for (size_t i = 0; i < info->rank; ++i)
    FZ_REQUIRE(info->grid_shape[i] * info->tile_shape[i] == info->logical_shape[i] || info->logical_shape[i] == 0,
               "%s: grid x tile differs from the logical shape in mode %zu", what, i);
}

#endif
