/* The .safetensors header parser (sw_testing_parse_safetensors_header, the
 * one behind sw_carrier_open_safetensors) on arbitrary bytes, as fuzz_npy
 * does for .npy: the input is the start of a file (of the input's size, or
 * larger when the first byte is odd). A refusal is DATA_CORRUPT or
 * UNSUPPORTED; an accepted header counts its tensors, and looking up a name
 * the header lacks is VALUE, while the tensor named "a" (the seeds' name),
 * when there is one, is described consistently (mh_check_info). */
#include "fuzz.h"
#include "model_header_check.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  uint64_t file_size = size;
  if (size > 0 && (data[0] & 1)) file_size = (uint64_t)size + ((uint64_t)data[size - 1] << 12);
  const void* bytes = size ? data : NULL;
  size_t count = 0;
  sw_error_code_t code = FZ_CHECK(sw_testing_parse_safetensors_header(bytes, size, file_size, NULL, &count, NULL));
  if (code != SW_OK) {
    FZ_REQUIRE(code == SW_ERROR_DATA_CORRUPT || code == SW_ERROR_UNSUPPORTED, "refused with %s",
               sw_error_code_name(code));
    return 0;
  }
  FZ_REQUIRE(count <= size, "%zu tensors in a %zu-byte header", count, size);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  code = FZ_CHECK(sw_testing_parse_safetensors_header(bytes, size, file_size, "\x01no such tensor", NULL, &info));
  FZ_REQUIRE(code == SW_ERROR_VALUE, "a missing name gave %s", sw_error_code_name(code));
  code = FZ_CHECK(sw_testing_parse_safetensors_header(bytes, size, file_size, "a", NULL, &info));
  if (code == SW_OK) {
    mh_check_info(&info, file_size, "safetensors");
  } else {
    FZ_REQUIRE(code == SW_ERROR_VALUE || code == SW_ERROR_UNSUPPORTED, "tensor 'a' gave %s",
               sw_error_code_name(code));
  }
  return 0;
}
