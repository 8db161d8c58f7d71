/* sw_layout_parse on arbitrary text. A layout it accepts must answer every
 * query, print as text that parses back to an equal layout, and keep its
 * promises: size and cosize fit int64, every ordinal decodes and encodes
 * back, and every index lies in [-cosize, cosize). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  fz_in in = {data, size};
  char* text = fz_text(&in);
  sw_layout_t* l = NULL;
  if (FZ_CHECK(sw_layout_parse(text, &l)) != SW_OK) {
    FZ_REQUIRE(l == NULL, "a failed parse wrote its out-parameter");
    free(text);
    return 0;
  }
  size_t rank = 0;
  int64_t n = -1, cosize = -1;
  bool injective = false;
  FZ_OK(sw_layout_rank(l, &rank));
  FZ_REQUIRE(rank <= 4096, "rank %zu", rank);
  FZ_OK(sw_layout_size(l, &n));
  FZ_OK(sw_layout_cosize(l, &cosize));
  FZ_OK(sw_layout_is_injective(l, &injective));
  FZ_REQUIRE(n >= 0 && cosize >= 0, "size %lld cosize %lld", (long long)n, (long long)cosize);
  int64_t* extents = (int64_t*)calloc(rank ? rank : 1, sizeof(int64_t));
  FZ_OK(sw_layout_extents(l, extents, rank));
  if (rank > 0) FZ_REQUIRE(FZ_CHECK(sw_layout_extents(l, extents, rank - 1)) == SW_ERROR_VALUE, "short capacity");

  /* Text round trip. */
  size_t length = 0;
  FZ_OK(sw_layout_to_string(l, NULL, 0, &length));
  char* printed = (char*)malloc(length + 1);
  FZ_OK(sw_layout_to_string(l, printed, length + 1, &length));
  FZ_REQUIRE(strlen(printed) == length, "length %zu of \"%s\"", length, printed);
  sw_layout_t* again = NULL;
  FZ_OK(sw_layout_parse(printed, &again));
  bool equal = false;
  FZ_OK(sw_layout_equal(l, again, &equal));
  FZ_REQUIRE(equal, "\"%s\" printed as \"%s\", which parses to another layout", text, printed);
  sw_layout_release(again);

  /* A few ordinals: decode, encode back, index within the span. */
  int64_t* coord = (int64_t*)calloc(rank ? rank : 1, sizeof(int64_t));
  for (int64_t probe = 0; probe < 4 && n > 0; ++probe) {
    const int64_t ordinal = probe == 3 ? n - 1 : (n / 3) * probe;
    FZ_OK(sw_layout_decode(l, ordinal, coord, rank));
    for (size_t i = 0; i < rank; ++i)
      FZ_REQUIRE(coord[i] >= 0 && coord[i] < extents[i], "coordinate %lld of mode %zu", (long long)coord[i], i);
    int64_t back = -1, index = 0;
    FZ_OK(sw_layout_encode(l, coord, rank, &back));
    FZ_REQUIRE(back == ordinal, "ordinal %lld encodes back as %lld", (long long)ordinal, (long long)back);
    FZ_OK(sw_layout_index(l, coord, rank, &index));
    FZ_REQUIRE(index < cosize && index > -cosize, "index %lld outside the span %lld", (long long)index, (long long)cosize);
  }
  FZ_REQUIRE(FZ_CHECK(sw_layout_decode(l, n, coord, rank)) != SW_OK, "ordinal %lld past the size decoded", (long long)n);
  free(coord);
  free(printed);
  free(extents);
  sw_layout_release(l);
  free(text);
  return 0;
}
