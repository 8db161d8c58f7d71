/* Layouts built from numbers: sw_layout_create and sw_layout_dense from
 * fuzzed extents and strides, sw_layout_group of them, sw_layout_permute
 * with a fuzzed permutation, and index/encode/decode with fuzzed
 * coordinates (per mode and per leaf). Whatever is accepted must keep the
 * one rule (size and span fit int64) and agree with itself. */
#include "fuzz.h"

#define MAXR 20

static void probe(sw_layout_t* l, fz_in* in) {
  size_t rank = 0;
  int64_t n = -1, cosize = -1;
  FZ_OK(sw_layout_rank(l, &rank));
  FZ_OK(sw_layout_size(l, &n));
  FZ_OK(sw_layout_cosize(l, &cosize));
  FZ_REQUIRE(n >= 0 && cosize >= 0, "size %lld cosize %lld", (long long)n, (long long)cosize);
  int64_t coord[64] = {0};
  const size_t count = (size_t)fz_range(in, 0, 40);
  for (size_t i = 0; i < count && i < 64; ++i) coord[i] = fz_i64(in);
  int64_t index = 0, ordinal = 0;
  if (FZ_CHECK(sw_layout_index(l, coord, count, &index)) == SW_OK)
    FZ_REQUIRE(index < cosize && index > -cosize, "index %lld, cosize %lld", (long long)index, (long long)cosize);
  if (FZ_CHECK(sw_layout_encode(l, coord, count, &ordinal)) == SW_OK) {
    FZ_REQUIRE(ordinal >= 0 && ordinal < n, "ordinal %lld of %lld", (long long)ordinal, (long long)n);
    int64_t back[64];
    FZ_OK(sw_layout_decode(l, ordinal, back, 64));
    for (size_t i = 0; i < count; ++i)
      FZ_REQUIRE(back[i] == coord[i], "mode %zu decodes as %lld, was %lld", i, (long long)back[i], (long long)coord[i]);
  }
  const int64_t o = fz_i64(in);
  int64_t out[64];
  const sw_error_code_t code = FZ_CHECK(sw_layout_decode(l, o, out, (size_t)fz_range(in, 0, 64)));
  if (code == SW_OK) FZ_REQUIRE(o >= 0 && o < n, "ordinal %lld of %lld decoded", (long long)o, (long long)n);
  size_t length = 0;
  FZ_OK(sw_layout_to_string(l, NULL, 0, &length));
  char* text = (char*)malloc(length + 1);
  FZ_OK(sw_layout_to_string(l, text, length + 1, &length));
  sw_layout_t* parsed = NULL;
  FZ_OK(sw_layout_parse(text, &parsed));
  bool equal = false;
  FZ_OK(sw_layout_equal(l, parsed, &equal));
  FZ_REQUIRE(equal, "\"%s\" parses to another layout", text);
  sw_layout_release(parsed);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz_in in = {data, size};
  sw_layout_t* made[4] = {NULL, NULL, NULL, NULL};
  size_t nmade = 0;
  while (in.n > 0 && nmade < 4) {
    const uint8_t op = fz_u8(&in) % 5;
    const size_t rank = (size_t)fz_range(&in, 0, MAXR);
    int64_t shape[MAXR], stride[MAXR];
    for (size_t i = 0; i < rank; ++i) {
      shape[i] = fz_i64(&in);
      stride[i] = fz_i64(&in);
    }
    sw_layout_t* l = NULL;
    sw_error_code_t code = SW_OK;
    switch (op) {
      case 0: code = FZ_CHECK(sw_layout_create(shape, stride, rank, &l)); break;
      case 1: code = FZ_CHECK(sw_layout_dense(shape, rank, &l)); break;
      case 2: {
        /* Group what was made so far (possibly twice). */
        const sw_layout_t* modes[8];
        const size_t count = (size_t)fz_range(&in, 0, 8);
        for (size_t i = 0; i < count; ++i) modes[i] = nmade ? made[fz_u8(&in) % nmade] : NULL;
        code = FZ_CHECK(sw_layout_group(nmade || count == 0 ? modes : NULL, count, &l));
        break;
      }
      case 3: {
        if (!nmade) continue;
        size_t perm[MAXR];
        for (size_t i = 0; i < rank; ++i) perm[i] = (size_t)fz_range(&in, 0, MAXR + 2);
        code = FZ_CHECK(sw_layout_permute(made[fz_u8(&in) % nmade], perm, rank, &l));
        break;
      }
      default:
        /* NULL arrays with a rank: VALUE, never a read. */
        code = FZ_CHECK(sw_layout_create(rank ? NULL : shape, rank ? NULL : stride, rank, &l));
        break;
    }
    if (code != SW_OK) {
      FZ_REQUIRE(l == NULL, "a failed call wrote its out-parameter");
      continue;
    }
    probe(l, &in);
    made[nmade++] = l;
  }
  for (size_t i = 0; i < nmade; ++i) sw_layout_release(made[i]);
  return 0;
}
