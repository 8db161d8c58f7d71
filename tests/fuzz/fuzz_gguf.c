/* The GGUF header parser (sw_testing_parse_gguf_header, the one behind
 * sw_carrier_open_gguf) on arbitrary bytes, as fuzz_safetensors does for
 * .safetensors: the input is the start of a file (of the input's size, or
 * larger when the first byte is odd). A refusal is DATA_CORRUPT or
 * UNSUPPORTED; an accepted header has no more tensors or key values than
 * its bytes can hold, looking up a name the header lacks is VALUE, and the
 * tensor named "a" (the seeds' name), when there is one, is described
 * consistently (mh_check_info) or refused as UNSUPPORTED (a ggml type
 * StrideWeave has no dtype for). */
#include "fuzz.h"
#include "model_header_check.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  uint64_t file_size = size;
  if (size > 0 && (data[0] & 1)) file_size = (uint64_t)size + ((uint64_t)data[size - 1] << 12);
  const void* bytes = size ? data : NULL;
  size_t tensors = 0, keys = 0;
  sw_error_code_t code = FZ_CHECK(sw_testing_parse_gguf_header(bytes, size, file_size, NULL, &tensors, &keys, NULL));
  if (code != SW_OK) {
    FZ_REQUIRE(code == SW_ERROR_DATA_CORRUPT || code == SW_ERROR_UNSUPPORTED, "refused with %s",
               sw_error_code_name(code));
    return 0;
  }
  FZ_REQUIRE(tensors * 24 <= size && keys * 13 <= size, "%zu tensors and %zu key values in a %zu-byte header", tensors,
             keys, size);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  code = FZ_CHECK(sw_testing_parse_gguf_header(bytes, size, file_size, "\x01no such tensor", NULL, NULL, &info));
  FZ_REQUIRE(code == SW_ERROR_VALUE, "a missing name gave %s", sw_error_code_name(code));
  code = FZ_CHECK(sw_testing_parse_gguf_header(bytes, size, file_size, "a", NULL, NULL, &info));
  if (code == SW_OK) {
    mh_check_info(&info, file_size, "gguf");
  } else {
    FZ_REQUIRE(code == SW_ERROR_VALUE || code == SW_ERROR_UNSUPPORTED, "tensor 'a' gave %s", sw_error_code_name(code));
  }
  return 0;
}
