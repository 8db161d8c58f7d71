/* The .npy header parser (sw_testing_parse_npy_header, the one behind
 * sw_carrier_open_npy) on arbitrary bytes: the input is the start of a file
 * whose size is the input's, or, when the first byte is odd, a larger size
 * (the buffer then holds the header only). A refusal is DATA_CORRUPT or
 * UNSUPPORTED with the out-struct untouched; an accepted header describes a
 * tensor inside the file: rank within SW_MAX_RANK, nonnegative extents whose
 * bytes equal data_bytes, the data within the file, the logical shape the
 * file's reversed (C order) or itself (Fortran order), grid x tile = logical
 * shape, and a permutation. */
#include "fuzz.h"
#include "model_header_check.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  uint64_t file_size = size;
  if (size > 0 && (data[0] & 1)) file_size = (uint64_t)size + ((uint64_t)data[size - 1] << 12);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  const sw_file_tensor_info_t untouched = info;
  sw_error_code_t code = FZ_CHECK(sw_testing_parse_npy_header(size ? data : NULL, size, file_size, &info));
  if (code != SW_OK) {
    FZ_REQUIRE(code == SW_ERROR_DATA_CORRUPT || code == SW_ERROR_UNSUPPORTED, "refused with %s",
               sw_error_code_name(code));
    FZ_REQUIRE(memcmp(&info, &untouched, sizeof info) == 0, "a refused header wrote its out-struct");
    return 0;
  }
  mh_check_info(&info, file_size, "npy");
  return 0;
}
