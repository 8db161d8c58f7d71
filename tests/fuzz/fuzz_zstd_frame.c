/* Frames read back by the zstd tier. A zstd carrier holding known values
 * gets one frame replaced by fuzzed bytes (anything), or patched at fuzzed
 * positions (near-valid frames), and is then read back, synchronously and
 * through an asynchronous move. The oracle: a read either fails
 * DATA_CORRUPT, or the frame is a checksummed zstd frame of exactly the
 * frame's length whose independent decompression is what the read gave
 * (never garbage); other frames always read their own values; nothing
 * crashes. */
#include <zstd.h>

#include "fuzz.h"

#define FRAME_ELEMS 64
#define FRAMES 3
#define N (FRAME_ELEMS * FRAMES - 5) /* the last frame is shorter */

/* Whether `bytes` is a zstd frame that declares a content checksum. */
static bool has_checksum(const uint8_t* bytes, size_t length) {
  if (length < 5) return false;
  const uint32_t magic = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
  return magic == ZSTD_MAGICNUMBER && ((bytes[4] >> 2) & 1);
}

static void expect_read(sw_carrier_t* c, const uint8_t* original, const uint8_t* frame, size_t frame_len,
                        size_t which, sw_error_code_t code, const uint8_t* got) {
  const size_t first = which * FRAME_ELEMS;
  const size_t len = which + 1 == FRAMES ? N - first : FRAME_ELEMS;
  (void)c;
  if (code != SW_OK) {
    FZ_REQUIRE(code == SW_ERROR_DATA_CORRUPT, "a damaged frame read as %s, not DATA_CORRUPT", sw_error_code_name(code));
    return;
  }
  for (size_t i = 0; i < N; ++i)
    if (i < first || i >= first + len)
      FZ_REQUIRE(got[i] == original[i], "slot %zu outside the replaced frame changed", i);
  FZ_REQUIRE(has_checksum(frame, frame_len), "a frame without a checksum was read");
  uint8_t* expect = (uint8_t*)malloc(len + 1);
  const size_t r = ZSTD_decompress(expect, len + 1, frame, frame_len);
  FZ_REQUIRE(!ZSTD_isError(r) && r == len, "a frame zstd itself rejects (%s) was read",
             ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong length");
  FZ_REQUIRE(memcmp(expect, got + first, len) == 0, "the read gave other values than the frame holds");
  free(expect);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  fz_in in = {data, size};
  sw_runtime_t* rt = fz_runtime();
  sw_zstd_carrier_desc_t d;
  sw_zstd_carrier_desc_init(&d);
  d.frame_elements = FRAME_ELEMS;
  d.shuffle = 0; /* the stored bytes are the values: the oracle decompresses them itself */
  d.level = (int32_t)fz_range(&in, 1, 5);
  sw_carrier_t* c = NULL;
  FZ_OK(sw_carrier_create_zstd(rt, SW_DTYPE_U8, N, &d, &c));
  uint8_t original[N], got[N];
  for (size_t i = 0; i < N; ++i) original[i] = (uint8_t)(i * 37 + (i >> 3));
  FZ_OK(sw_carrier_write(c, 0, N, original));
  const size_t which = (size_t)fz_range(&in, 0, FRAMES - 1);
  size_t length = 0;
  FZ_OK(sw_testing_frame_bytes(c, which, NULL, 0, &length));
  uint8_t* frame = (uint8_t*)malloc(length + in.n + 16);
  FZ_OK(sw_testing_frame_bytes(c, which, frame, length, &length));
  if (fz_bool(&in)) {
    /* Patch: (position, xor) pairs over the real frame, maybe truncated or
     * extended. */
    const size_t patches = (size_t)fz_range(&in, 0, 8);
    for (size_t i = 0; i < patches && length; ++i) {
      const size_t at = (size_t)fz_range(&in, 0, 65535) % length;
      frame[at] ^= fz_u8(&in);
    }
    const int64_t resize = fz_range(&in, -8, 8);
    if (resize < 0 && (size_t)(-resize) <= length) length -= (size_t)(-resize);
    for (int64_t i = 0; i < resize; ++i) frame[length++] = fz_u8(&in);
  } else {
    /* Replace: the rest of the input is the frame. */
    length = in.n;
    memcpy(frame, in.p, in.n);
    in.n = 0;
  }
  FZ_OK(sw_testing_replace_frame(c, which, frame, length));
  memset(got, 0, sizeof got);
  sw_error_code_t code = FZ_CHECK(sw_carrier_read(c, 0, N, got));
  expect_read(c, original, frame, length, which, code, got);
  /* Only the replaced frame's own range. */
  const size_t first = which * FRAME_ELEMS;
  const size_t len = which + 1 == FRAMES ? N - first : FRAME_ELEMS;
  memcpy(got, original, sizeof got);
  code = FZ_CHECK(sw_carrier_read(c, first + 1, len - 2, got + first + 1));
  if (code == SW_OK) FZ_REQUIRE(has_checksum(frame, length), "a part of a frame without a checksum was read");
  else FZ_REQUIRE(code == SW_ERROR_DATA_CORRUPT, "a damaged frame read as %s", sw_error_code_name(code));
  /* Another frame reads its own values whatever this one holds. */
  const size_t other = (which + 1) % FRAMES;
  FZ_OK(sw_carrier_read(c, other * FRAME_ELEMS, 3, got));
  FZ_REQUIRE(memcmp(got, original + other * FRAME_ELEMS, 3) == 0, "frame %zu changed", other);
  /* A write over part of the damaged frame needs its old values: refused,
   * or the frame was valid. */
  const uint8_t patch[2] = {1, 2};
  code = FZ_CHECK(sw_carrier_write(c, first, 2, patch));
  FZ_REQUIRE(code == SW_OK || code == SW_ERROR_DATA_CORRUPT, "a write over a damaged frame failed %s",
             sw_error_code_name(code));
  /* Asynchronously: a move out of the carrier decompresses on a worker. */
  sw_carrier_t* dst = NULL;
  FZ_OK(sw_carrier_create_cpu(rt, SW_DTYPE_U8, 0, &dst));
  const int64_t extent = N;
  sw_layout_t* l = NULL;
  FZ_OK(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* t = NULL;
  FZ_OK(sw_tensor_create(c, 0, l, &t));
  sw_await_t* a = NULL;
  FZ_OK(sw_move_async(t, dst, &a));
  code = FZ_CHECK(sw_await_wait(a, -1));
  FZ_REQUIRE(code == SW_OK || code == SW_ERROR_DATA_CORRUPT, "a move out of a damaged frame failed %s",
             sw_error_code_name(code));
  if (code != SW_OK) {
    /* A failed move leaves the source usable and unchanged. */
    bool disposed = true;
    FZ_OK(sw_carrier_is_disposed(c, &disposed));
    FZ_REQUIRE(!disposed, "a failed move disposed its source");
    FZ_OK(sw_carrier_read(c, other * FRAME_ELEMS, 3, got));
  }
  sw_await_release(a);
  sw_tensor_release(t);
  sw_layout_release(l);
  sw_carrier_release(dst);
  sw_carrier_release(c);
  free(frame);
  return 0;
}
