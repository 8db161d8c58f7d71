/* Block-quantized dtypes: their facts, hand-built blocks of every format
 * dequantized to exact values, every quantizer on rows with exact results,
 * the refusals (partial blocks, views splitting a block, element-wise ops),
 * and quantized tiles moved whole by promotion, eviction and projection.
 * tests/python/test_quant.py checks the formats against gguf-py. */
#include "sw_test.h"

typedef struct {
  sw_dtype_t dtype;
  const char* name;
  size_t elements, bytes;
} quant_fact_t;

static const quant_fact_t kFacts[] = {
    {SW_DTYPE_Q8_0, "q8_0", 32, 34},   {SW_DTYPE_Q4_0, "q4_0", 32, 18},   {SW_DTYPE_Q4_K, "q4_k", 256, 144},
    {SW_DTYPE_Q6_K, "q6_k", 256, 210}, {SW_DTYPE_MXFP4, "mxfp4", 32, 17},
};

static void put_half(unsigned char* p, uint16_t h) {
  p[0] = (unsigned char)(h & 0xff);
  p[1] = (unsigned char)(h >> 8);
}

/* A (n) tensor of `dtype` over a copy of `bytes`. */
static sw_tensor_t* blocks_tensor(sw_runtime_t* rt, sw_dtype_t dtype, const void* bytes, int64_t n) {
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, dtype, &n, 1, bytes, &t));
  return t;
}

/* The f32 values of a quantized tensor (sw_tensor_to_dtype). */
static float* dequantized(sw_tensor_t* q, int64_t n) {
  sw_tensor_t* f = NULL;
  SW_OK_(sw_tensor_to_dtype(q, SW_DTYPE_F32, &f));
  float* out = malloc((size_t)n * sizeof(float));
  SW_OK_(sw_tensor_read(f, out, (size_t)n * sizeof(float)));
  sw_tensor_release(f);
  return out;
}

static void expect_floats(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      fail_msg("element %lld: %.9g, expected %.9g", (long long)i, got[i], want[i]);
}

static void test_facts(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof kFacts / sizeof kFacts[0]; ++i) {
    const quant_fact_t* f = &kFacts[i];
    assert_string_equal(sw_dtype_name(f->dtype), f->name);
    assert_int_equal(sw_dtype_size(f->dtype), 0);
    assert_int_equal(sw_dtype_block_elements(f->dtype), f->elements);
    assert_int_equal(sw_dtype_block_bytes(f->dtype), f->bytes);
  }
  assert_int_equal(sw_dtype_block_elements(SW_DTYPE_F32), 1);
  assert_int_equal(sw_dtype_block_bytes(SW_DTYPE_BF16), 2);
  assert_int_equal(sw_dtype_block_elements((sw_dtype_t)14), 0);
  assert_int_equal(sw_dtype_block_bytes((sw_dtype_t)14), 0);
  assert_string_equal(sw_dtype_name((sw_dtype_t)14), "invalid");
}

/* Q8_0: d = 0.5 (f16 0x3800), q_j = j - 5. */
static void test_q8_0_block(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char b[34];
  put_half(b, 0x3800);
  float want[32];
  for (int j = 0; j < 32; ++j) {
    b[2 + j] = (unsigned char)(int8_t)(j - 5);
    want[j] = 0.5f * (float)(j - 5);
  }
  sw_tensor_t* q = blocks_tensor(rt, SW_DTYPE_Q8_0, b, 32);
  float* got = dequantized(q, 32);
  expect_floats(got, want, 32);
  free(got);
  sw_tensor_release(q);
}

/* Q4_0: d = 2 (0x4000); byte j holds element j (low nibble) and j + 16. */
static void test_q4_0_block(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char b[18];
  put_half(b, 0x4000);
  float want[32];
  for (int j = 0; j < 16; ++j) {
    const int lo = j, hi = 15 - j;
    b[2 + j] = (unsigned char)(lo | (hi << 4));
    want[j] = 2.0f * (float)(lo - 8);
    want[j + 16] = 2.0f * (float)(hi - 8);
  }
  sw_tensor_t* q = blocks_tensor(rt, SW_DTYPE_Q4_0, b, 32);
  float* got = dequantized(q, 32);
  expect_floats(got, want, 32);
  free(got);
  sw_tensor_release(q);
}

/* MXFP4: exponent byte 127 gives the scale 2^0 / 2 on doubled e2m1 values;
 * nibble k of element j is k = j % 16 (low) and 15 - j % 16 (high). */
static void test_mxfp4_block(void** state) {
  sw_runtime_t* rt = *state;
  static const float kFp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  unsigned char b[17];
  b[0] = 127;
  float want[64];
  for (int j = 0; j < 16; ++j) {
    b[1 + j] = (unsigned char)(j | ((15 - j) << 4));
    want[j] = kFp4[j];
    want[j + 16] = kFp4[15 - j];
  }
  /* A second block at exponent 130: the same values times 8. */
  unsigned char two[34];
  memcpy(two, b, 17);
  memcpy(two + 17, b, 17);
  two[17] = 130;
  for (int j = 0; j < 32; ++j) want[32 + j] = want[j] * 8.0f;
  sw_tensor_t* q = blocks_tensor(rt, SW_DTYPE_MXFP4, two, 64);
  float* got = dequantized(q, 64);
  expect_floats(got, want, 64);
  free(got);
  sw_tensor_release(q);
}

/* Q4_K: d = 1, dmin = 0.5; scales 1..8 and mins 0..7 of the eight 32-element
 * sub-blocks (all below 16: the packed high bits are zero); byte l of each
 * 32-byte group holds l % 16 (sub-block 2g) and 15 - l % 16 (2g + 1). */
static void test_q4_k_block(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char b[144] = {0};
  put_half(b, 0x3c00);
  put_half(b + 2, 0x3800);
  const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 8}, mn[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int j = 0; j < 4; ++j) {
    b[4 + j] = (unsigned char)sc[j];
    b[8 + j] = (unsigned char)mn[j];
    b[12 + j] = (unsigned char)(sc[j + 4] | (mn[j + 4] << 4));
  }
  float want[256];
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) {
      const int lo = l % 16, hi = 15 - l % 16;
      b[16 + 32 * g + l] = (unsigned char)(lo | (hi << 4));
      want[64 * g + l] = (float)(sc[2 * g] * lo) - 0.5f * (float)mn[2 * g];
      want[64 * g + 32 + l] = (float)(sc[2 * g + 1] * hi) - 0.5f * (float)mn[2 * g + 1];
    }
  sw_tensor_t* q = blocks_tensor(rt, SW_DTYPE_Q4_K, b, 256);
  float* got = dequantized(q, 256);
  expect_floats(got, want, 256);
  free(got);
  sw_tensor_release(q);
}

/* Q6_K: d = 0.25 (0x3400), scales i - 8 per 16-element sub-block; every ql
 * byte 0x21 (low nibble 1, high 2) and qh byte 0xe4 (pairs 0, 1, 2, 3), so
 * the 32-element quarters of each half hold q = 1, 17, 34, 50 minus 32. */
static void test_q6_k_block(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char b[210];
  memset(b, 0x21, 128);
  memset(b + 128, 0xe4, 64);
  for (int i = 0; i < 16; ++i) b[192 + i] = (unsigned char)(int8_t)(i - 8);
  put_half(b + 208, 0x3400);
  const int q[4] = {1 - 32, 17 - 32, 34 - 32, 50 - 32};
  float want[256];
  for (int v = 0; v < 256; ++v) want[v] = 0.25f * (float)(v / 16 - 8) * (float)q[(v % 128) / 32];
  sw_tensor_t* t = blocks_tensor(rt, SW_DTYPE_Q6_K, b, 256);
  float* got = dequantized(t, 256);
  expect_floats(got, want, 256);
  free(got);
  sw_tensor_release(t);
}

static sw_tensor_t* floats_tensor(sw_runtime_t* rt, const float* x, int64_t n) {
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, &n, 1, x, &t));
  return t;
}

static void quantize_bytes(sw_runtime_t* rt, const float* x, int64_t n, sw_dtype_t dtype, unsigned char* out,
                           size_t bytes) {
  sw_tensor_t* f = floats_tensor(rt, x, n);
  sw_tensor_t* q = NULL;
  SW_OK_(sw_tensor_to_dtype(f, dtype, &q));
  SW_OK_(sw_tensor_read(q, out, bytes));
  sw_tensor_release(q);
  sw_tensor_release(f);
}

/* Q8_0: amax 127 makes d = 1, so every integer value is its own q. */
static void test_quantize_q8_0(void** state) {
  sw_runtime_t* rt = *state;
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (float)(j * 8 - 127);
  unsigned char b[34];
  quantize_bytes(rt, x, 32, SW_DTYPE_Q8_0, b, sizeof b);
  assert_int_equal(b[0] | (b[1] << 8), 0x3c00);
  for (int j = 0; j < 32; ++j) assert_int_equal((int8_t)b[2 + j], j * 8 - 127);
  /* Halves round away from zero: d = 1 again, values +-0.5 and +-2.5. */
  x[1] = 0.5f;
  x[2] = -0.5f;
  x[3] = 2.5f;
  x[4] = -2.5f;
  quantize_bytes(rt, x, 32, SW_DTYPE_Q8_0, b, sizeof b);
  assert_int_equal((int8_t)b[3], 1);
  assert_int_equal((int8_t)b[4], -1);
  assert_int_equal((int8_t)b[5], 3);
  assert_int_equal((int8_t)b[6], -3);
  /* All zeros: d = 0 and q = 0. */
  memset(x, 0, sizeof x);
  quantize_bytes(rt, x, 32, SW_DTYPE_Q8_0, b, sizeof b);
  for (int j = 0; j < 34; ++j) assert_int_equal(b[j], 0);
}

/* Q4_0: the largest magnitude, -8, makes d = 1 and q = trunc(x + 8.5). */
static void test_quantize_q4_0(void** state) {
  sw_runtime_t* rt = *state;
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (float)(j % 16 - 8);
  unsigned char b[18];
  quantize_bytes(rt, x, 32, SW_DTYPE_Q4_0, b, sizeof b);
  assert_int_equal(b[0] | (b[1] << 8), 0x3c00);
  for (int j = 0; j < 16; ++j) assert_int_equal(b[2 + j], (j % 16) | ((j % 16) << 4));
  /* The largest magnitude positive, 16: d = -2; 16 maps to q = 0 and -14
   * (= 7 * d) to q = trunc(7 + 8.5) = 15. */
  x[0] = 16.0f;
  x[16] = -14.0f;
  quantize_bytes(rt, x, 32, SW_DTYPE_Q4_0, b, sizeof b);
  assert_int_equal(b[0] | (b[1] << 8), 0xc000);
  assert_int_equal(b[2], 0 | (15 << 4));
}

/* MXFP4: amax 6 gives exponent floor(log2 6) - 2 + 127 = 127 (scale 1), and
 * each e2m1 value is its own code; between two codes the first wins. */
static void test_quantize_mxfp4(void** state) {
  sw_runtime_t* rt = *state;
  static const float kFp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = kFp4[j % 16];
  unsigned char b[17];
  quantize_bytes(rt, x, 32, SW_DTYPE_MXFP4, b, sizeof b);
  assert_int_equal(b[0], 127);
  for (int j = 0; j < 16; ++j) {
    const int code = j == 8 ? 0 : j; /* -0 is the code of +0 */
    assert_int_equal(b[1 + j], code | (code << 4));
  }
  x[1] = 5.0f;   /* as near 4 (code 6) as 6 (code 7): code 6 */
  x[2] = -0.25f; /* between 0 (code 0) and -0.5 (code 9): code 0 */
  quantize_bytes(rt, x, 32, SW_DTYPE_MXFP4, b, sizeof b);
  assert_int_equal(b[2] & 0x0f, 6);
  assert_int_equal(b[3] & 0x0f, 0);
}

/* Q4_K: sub-block s holds 2^-s * (i % 16), an exact fit with scale 2^-s and
 * min 0. The scales quantize against the largest, 1: d = f16(1 / 63) =
 * 0x2410, sc = round(63 * 2^-s) = 63, 32 (31.5), 16, 8, 4, 2, 1, 0; dmin =
 * 0 and every min 0. Each value requantizes to i % 16 against d * sc, and
 * sub-block 7, whose stored scale is 0, keeps the fit's levels (the same). */
static void test_quantize_q4_k(void** state) {
  sw_runtime_t* rt = *state;
  float x[256];
  for (int v = 0; v < 256; ++v) x[v] = ldexpf((float)(v % 16), -(v / 32));
  unsigned char b[144];
  quantize_bytes(rt, x, 256, SW_DTYPE_Q4_K, b, sizeof b);
  assert_int_equal(b[0] | (b[1] << 8), 0x2410);
  assert_int_equal(b[2] | (b[3] << 8), 0);
  const unsigned char scales[12] = {63, 32, 16, 8, 0, 0, 0, 0, 4, 2, 1, 0};
  assert_memory_equal(b + 4, scales, 12);
  for (int j = 0; j < 128; ++j) assert_int_equal(b[16 + j], (j % 16) | ((j % 16) << 4));
  /* All zeros: every byte 0. */
  memset(x, 0, sizeof x);
  quantize_bytes(rt, x, 256, SW_DTYPE_Q4_K, b, sizeof b);
  for (int j = 0; j < 144; ++j) assert_int_equal(b[j], 0);
}

/* Q6_K: sub-block s holds 2^-s * (4i - 32), an exact fit with scale 2^-s.
 * The largest scale, 1, maps to -128: d = -1/128 (f16 0xa000) and the
 * scales round(-128 * 2^-s) are -128, -64, ..., -1, then 0 from s = 8 on
 * (-0.5 rounds half to even, to 0). Every value requantizes to q = 4i - 32
 * (stored 4i), and the sub-blocks whose stored scale is 0 keep the fit's
 * levels, the same. */
static void test_quantize_q6_k(void** state) {
  sw_runtime_t* rt = *state;
  float x[256];
  for (int v = 0; v < 256; ++v) x[v] = ldexpf((float)(4 * (v % 16) - 32), -(v / 16));
  unsigned char b[210];
  quantize_bytes(rt, x, 256, SW_DTYPE_Q6_K, b, sizeof b);
  assert_int_equal(b[208] | (b[209] << 8), 0xa000);
  for (int s = 0; s < 16; ++s) assert_int_equal((int8_t)b[192 + s], s < 8 ? -(128 >> s) : 0);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      /* Element 128h + 32k + l stores 4 * (l % 16) for every quarter k. */
      const int q = 4 * (l % 16);
      assert_int_equal(b[64 * h + l], (q & 0x0f) | ((q & 0x0f) << 4));
      assert_int_equal(b[64 * h + 32 + l], (q & 0x0f) | ((q & 0x0f) << 4));
      assert_int_equal(b[128 + 32 * h + l], (q >> 4) * 0x55);
    }
  /* Dequantized: the values of sub-blocks 0..7, zeros after (signed: their
   * step d * 0 is -0, times q = 4i - 32). */
  sw_tensor_t* t = blocks_tensor(rt, SW_DTYPE_Q6_K, b, 256);
  float* got = dequantized(t, 256);
  float want[256];
  for (int v = 0; v < 256; ++v) want[v] = v / 16 < 8 ? x[v] : -0.0f * (float)(4 * (v % 16) - 32);
  expect_floats(got, want, 256);
  free(got);
  sw_tensor_release(t);
  /* All zeros: every byte 0. */
  memset(x, 0, sizeof x);
  quantize_bytes(rt, x, 256, SW_DTYPE_Q6_K, b, sizeof b);
  for (int j = 0; j < 210; ++j) assert_int_equal(b[j], 0);
}

/* Quantize then dequantize keeps exactly representable rows, and converts
 * between quantized dtypes through f32. */
static void test_round_trip(void** state) {
  sw_runtime_t* rt = *state;
  float x[64];
  for (int j = 0; j < 64; ++j) x[j] = (float)((j * 37) % 255 - 127);
  sw_tensor_t* f = floats_tensor(rt, x, 64);
  sw_tensor_t* q = NULL;
  SW_OK_(sw_tensor_to_dtype(f, SW_DTYPE_Q8_0, &q));
  sw_dtype_t d;
  SW_OK_(sw_tensor_dtype(q, &d));
  assert_int_equal(d, SW_DTYPE_Q8_0);
  float* back = dequantized(q, 64);
  /* Each block's amax is 127 (j = 0 and j = 41 give -127 and ... ) or not;
   * compare against q * d read from the bytes. */
  unsigned char bytes[68];
  SW_OK_(sw_tensor_read(q, bytes, sizeof bytes));
  for (int k = 0; k < 2; ++k) {
    sw_tensor_t* one = blocks_tensor(rt, SW_DTYPE_Q8_0, bytes + 34 * k, 32);
    float* v = dequantized(one, 32);
    expect_floats(back + 32 * k, v, 32);
    free(v);
    sw_tensor_release(one);
  }
  /* bf16 and f16 results round the f32 values. */
  sw_tensor_t* h = NULL;
  SW_OK_(sw_tensor_to_dtype(q, SW_DTYPE_BF16, &h));
  SW_OK_(sw_tensor_dtype(h, &d));
  assert_int_equal(d, SW_DTYPE_BF16);
  sw_tensor_release(h);
  /* Quantized to quantized: q8_0 -> q4_0 equals f32 -> q4_0 of the values. */
  sw_tensor_t *q4 = NULL, *ref = NULL, *fb = floats_tensor(rt, back, 64);
  SW_OK_(sw_tensor_to_dtype(q, SW_DTYPE_Q4_0, &q4));
  SW_OK_(sw_tensor_to_dtype(fb, SW_DTYPE_Q4_0, &ref));
  unsigned char a1[36], a2[36];
  SW_OK_(sw_tensor_read(q4, a1, sizeof a1));
  SW_OK_(sw_tensor_read(ref, a2, sizeof a2));
  assert_memory_equal(a1, a2, sizeof a1);
  sw_tensor_release(q4);
  sw_tensor_release(ref);
  sw_tensor_release(fb);
  free(back);
  sw_tensor_release(q);
  sw_tensor_release(f);
}

/* Blocks lie along the first mode: a (64, 3) q8_0 tensor's transpose-free
 * column views convert like their own tensors, and a permuted f32 source
 * quantizes its first-mode rows. */
static void test_layouts(void** state) {
  sw_runtime_t* rt = *state;
  float x[64 * 3];
  for (int j = 0; j < 64 * 3; ++j) x[j] = (float)((j * 13) % 97) - 48.0f;
  const int64_t ext[2] = {64, 3};
  sw_tensor_t *f = NULL, *q = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 2, x, &f));
  SW_OK_(sw_tensor_to_dtype(f, SW_DTYPE_Q8_0, &q));
  /* Column 1 as a view (offset 64, whole blocks) equals quantizing it alone. */
  sw_tensor_t* col = NULL;
  SW_OK_(sw_tensor_select(q, 1, 1, &col));
  sw_tensor_t* alone = NULL;
  sw_tensor_t* fcol = floats_tensor(rt, x + 64, 64);
  SW_OK_(sw_tensor_to_dtype(fcol, SW_DTYPE_Q8_0, &alone));
  unsigned char a[68], b[68];
  SW_OK_(sw_tensor_read(col, a, sizeof a));
  SW_OK_(sw_tensor_read(alone, b, sizeof b));
  assert_memory_equal(a, b, sizeof a);
  /* A strided copy (contiguous of a column slice) moves whole blocks. */
  sw_tensor_t *cols = NULL, *dense = NULL;
  SW_OK_(sw_tensor_slice(q, 1, 0, 3, 2, &cols));
  SW_OK_(sw_tensor_contiguous(cols, &dense));
  unsigned char c[136], all[204];
  SW_OK_(sw_tensor_read(dense, c, sizeof c));
  SW_OK_(sw_tensor_read(q, all, sizeof all));
  assert_memory_equal(c, all, 68);
  assert_memory_equal(c + 68, all + 136, 68);
  sw_tensor_release(dense);
  sw_tensor_release(cols);
  sw_tensor_release(fcol);
  sw_tensor_release(alone);
  sw_tensor_release(col);
  sw_tensor_release(q);
  sw_tensor_release(f);
}

static void test_refusals(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char zeros[256] = {0};
  sw_tensor_t* t = NULL;
  /* A first mode that is not whole blocks. */
  const int64_t bad[2] = {16, 2};
  SW_FAILS(sw_tensor_from_data(rt, SW_DTYPE_Q8_0, bad, 2, zeros, &t), SW_ERROR_VALUE, "whole blocks");
  SW_FAILS(sw_tensor_zeros(rt, SW_DTYPE_Q4_K, bad, 2, &t), SW_ERROR_VALUE, "whole blocks");
  sw_carrier_t* c = NULL;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_Q8_0, 48, &c), SW_ERROR_VALUE, "whole blocks");
  /* Views that split a block. */
  sw_tensor_t* q = blocks_tensor(rt, SW_DTYPE_Q8_0, zeros, 64);
  sw_tensor_t* v = NULL;
  SW_FAILS(sw_tensor_slice(q, 0, 0, 16, 1, &v), SW_ERROR_VALUE, "splits a block");
  SW_FAILS(sw_tensor_slice(q, 0, 16, 48, 1, &v), SW_ERROR_VALUE, "q8_0");
  SW_FAILS(sw_tensor_slice(q, 0, 0, 64, 2, &v), SW_ERROR_VALUE, "q8_0");
  SW_OK_(sw_tensor_slice(q, 0, 32, 64, 1, &v));
  sw_tensor_release(v);
  /* Element-wise ops, element access and fills refuse quantized tensors. */
  sw_tensor_t* out = NULL;
  SW_FAILS(sw_add(q, q, &out), SW_ERROR_TYPE, "q8_0");
  SW_FAILS(sw_unary(SW_UNARY_RELU, q, &out), SW_ERROR_TYPE, "sw_tensor_to_dtype");
  double value;
  const int64_t at = 0;
  SW_FAILS(sw_tensor_get(q, &at, 1, &value), SW_ERROR_TYPE, "q8_0");
  SW_FAILS(sw_tensor_set(q, &at, 1, 1.0), SW_ERROR_TYPE, "q8_0");
  const int64_t n = 32;
  SW_FAILS(sw_tensor_full(rt, SW_DTYPE_Q4_0, &n, 1, 1.0, &out), SW_ERROR_TYPE, "q4_0");
  /* Quantized tensors cannot require gradients. */
  SW_FAILS(sw_tensor_set_requires_grad(q, true), SW_ERROR_TYPE, "q8_0");
  sw_tensor_release(q);
}

/* A TiledEvictable of q4_0 experts (64 x 2 per tile, 4 tiles) over a host
 * and a zstd secondary: evicted and promoted tiles keep their bytes, and a
 * projection of two tiles holds exactly theirs. */
static void tiled_round_trip(sw_runtime_t* rt, sw_carrier_kind_t kind) {
  const int64_t T = 64 * 2, tiles = 4, n = T * tiles;
  const size_t bytes = (size_t)(n / 32 * 18);
  unsigned char* data = malloc(bytes);
  uint64_t seed = 7;
  for (size_t i = 0; i < bytes; ++i) data[i] = (unsigned char)sw_test_random(&seed);
  sw_carrier_t *p = NULL, *s = NULL, *te = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_Q4_0, data, (size_t)n, &p));
  if (kind == SW_CARRIER_HOST) {
    SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_Q4_0, 0, &s));
  } else {
    sw_zstd_carrier_desc_t o;
    sw_zstd_carrier_desc_init(&o);
    o.frame_elements = 100; /* rounded up to whole blocks */
    SW_OK_(sw_carrier_create_zstd(rt, SW_DTYPE_Q4_0, 0, &o, &s));
  }
  const int64_t grid[3] = {1, 1, tiles}, tile[3] = {64, 2, 1};
  const int64_t bad_tile[3] = {16, 8, 1}, bad_grid[3] = {4, 1, tiles};
  SW_FAILS(sw_tiled_create(p, s, bad_grid, bad_tile, 3, NULL, &te), SW_ERROR_VALUE, "whole q4_0 blocks");
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, NULL, &te));
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  SW_OK_(sw_tiled_evict(te, all));
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  unsigned char* got = malloc(bytes);
  SW_OK_(sw_tensor_read(full, got, bytes));
  assert_memory_equal(got, data, bytes);
  SW_OK_(sw_tiled_promote(te, all));
  const int64_t zero = 0, picks[2] = {3, 1};
  const int64_t* axes[3] = {&zero, &zero, picks};
  const size_t counts[3] = {1, 1, 2};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 3, &sel));
  SW_OK_(sw_tiled_evict(te, all));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(te, full, sel, NULL, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* compact = NULL;
  SW_OK_(sw_await_result(a, &compact));
  const size_t tb = (size_t)(T / 32 * 18);
  SW_OK_(sw_tensor_read(compact, got, 2 * tb));
  assert_memory_equal(got, data + 3 * tb, tb);
  assert_memory_equal(got + tb, data + 1 * tb, tb);
  sw_tensor_release(compact);
  sw_await_release(a);
  sw_tile_selection_release(sel);
  sw_tile_set_release(all);
  sw_tensor_release(full);
  free(got);
  sw_carrier_release(te);
  sw_carrier_release(s);
  sw_carrier_release(p);
  free(data);
}

static void test_tiled_host(void** state) { tiled_round_trip(*state, SW_CARRIER_HOST); }
static void test_tiled_zstd(void** state) { tiled_round_trip(*state, SW_CARRIER_ZSTD); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_facts),
      cmocka_unit_test_setup_teardown(test_q8_0_block, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_q4_0_block, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_mxfp4_block, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_q4_k_block, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_q6_k_block, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_quantize_q8_0, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_quantize_q4_0, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_quantize_mxfp4, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_quantize_q4_k, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_quantize_q6_k, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_round_trip, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_layouts, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_refusals, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_tiled_host, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_tiled_zstd, sw_test_runtime_setup, sw_test_runtime_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
