/* GGUF files (llama.cpp's format) as secondary tiers: tensors opened as File
 * carriers with ggml's ne as the logical shape (a stacked expert tensor one
 * expert per tile, read with direct I/O), every lying-header rule with its
 * exact error kind through the opener and the parsing hook, quantized types
 * opened as their dtypes or refused, sw_save_gguf's files read back
 * (quantized tensors included), and the seed corpus
 * (tests/corpus/gguf) replayed. */
#include <dirent.h>
#include <unistd.h>

#include "sw_test.h"
#include "sw_file_test.h"

static int fixture_setup(void** state) { return file_fixture_setup(state, "sw_gguf_test"); }

/* ---- a GGUF file made by hand ------------------------------------------- */

typedef struct {
  unsigned char* data;
  size_t size, capacity;
} buf_t;

static void put(buf_t* b, const void* p, size_t n) {
  if (b->size + n > b->capacity) {
    b->capacity = (b->size + n) * 2 + 64;
    b->data = (unsigned char*)realloc(b->data, b->capacity);
  }
  if (n) memcpy(b->data + b->size, p, n);
  b->size += n;
}
static void put_le(buf_t* b, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = (unsigned char)(v >> (8 * i));
    put(b, &c, 1);
  }
}
static void put_str(buf_t* b, const char* s) {
  put_le(b, strlen(s), 8);
  put(b, s, strlen(s));
}
static void pad_to(buf_t* b, size_t alignment) {
  while (b->size % alignment) put_le(b, 0, 1);
}

typedef struct {
  const char* name;
  uint32_t n_dims;
  uint64_t ne[5];
  uint32_t type;
  uint64_t offset;
} info_t;

/* The header: "GGUF", version, counts, `kv` (already encoded key values),
 * the tensor infos, padding to `alignment`; then `data_bytes` bytes of
 * data, byte k of it k * 7 + 1 (mod 256) unless `data` is given. */
static buf_t gguf_file(uint32_t version, const buf_t* kv, uint64_t kv_count, const info_t* infos, size_t count,
                       size_t alignment, const void* data, size_t data_bytes) {
  buf_t b = {0};
  put(&b, "GGUF", 4);
  put_le(&b, version, 4);
  put_le(&b, count, 8);
  put_le(&b, kv_count, 8);
  if (kv) put(&b, kv->data, kv->size);
  for (size_t i = 0; i < count; ++i) {
    put_str(&b, infos[i].name);
    put_le(&b, infos[i].n_dims, 4);
    for (uint32_t d = 0; d < infos[i].n_dims; ++d) put_le(&b, infos[i].ne[d], 8);
    put_le(&b, infos[i].type, 4);
    put_le(&b, infos[i].offset, 8);
  }
  pad_to(&b, alignment);
  for (size_t k = 0; k < data_bytes; ++k) {
    const unsigned char c = data ? ((const unsigned char*)data)[k] : (unsigned char)(k * 7 + 1);
    put(&b, &c, 1);
  }
  return b;
}

static void kv_u32(buf_t* kv, const char* key, uint32_t v) {
  put_str(kv, key);
  put_le(kv, 4, 4);
  put_le(kv, v, 4);
}

enum {
  GGML_F32 = 0,
  GGML_F16 = 1,
  GGML_Q4_0 = 2,
  GGML_Q4_1 = 3,
  GGML_Q8_0 = 8,
  GGML_Q4_K = 12,
  GGML_Q6_K = 14,
  GGML_I8 = 24,
  GGML_BF16 = 30,
  GGML_MXFP4 = 39
};

/* The value of expert e's (f, d) in the test weights (d fastest). */
static float weight(int64_t e, int64_t f, int64_t d) { return (float)(e * 10000 + f * 100 + d); }

static sw_carrier_t* tiled_over(fixture_t* f, sw_carrier_t* file, const sw_file_tensor_info_t* info) {
  sw_carrier_t *cpu = NULL, *tiled = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, info->dtype, 0, &cpu));
  SW_OK_(sw_tiled_create(cpu, file, info->grid_shape, info->tile_shape, info->rank, NULL, &tiled));
  sw_carrier_release(cpu);
  return tiled;
}

static sw_file_io_stats_t io_stats(const sw_carrier_t* file) {
  sw_file_io_stats_t s;
  sw_file_io_stats_init(&s);
  SW_OK_(sw_testing_file_io_stats(file, &s));
  return s;
}

/* ---- opening ------------------------------------------------------------ */

/* A 2-D F32 tensor of ne (4, 3): NumPy's shape (3, 4), row-major; the
 * logical shape is ne itself, and its values are the file's bytes. */
static void f32_tensor_by_name(void** state) {
  fixture_t* f = FIXTURE(state);
  float values[12];
  for (int k = 0; k < 12; ++k) values[k] = (float)k * 0.25f - 1.0f;
  buf_t kv = {0};
  put_str(&kv, "general.architecture");
  put_le(&kv, 8, 4);
  put_str(&kv, "llama");
  const info_t infos[2] = {{"other", 1, {8}, GGML_F32, 0}, {"w", 2, {4, 3}, GGML_F32, 32}};
  float data[8 + 12] = {0};
  memcpy(data + 8, values, sizeof values);
  buf_t b = gguf_file(3, &kv, 1, infos, 2, 32, data, sizeof data);
  char path[512];
  path_in(f, "model.gguf", path, sizeof path);
  write_bytes(path, b.data, b.size);
  /* 24 + the key value (28 + 4 + 13) + the infos (37, 41) = 147 bytes, padded to 160. */
  const uint64_t data_start = 160;

  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "w", NULL, &info, &file));
  assert_int_equal(info.dtype, SW_DTYPE_F32);
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.order, SW_FILE_ORDER_ROW_MAJOR);
  assert_int_equal(info.shape[0], 3);
  assert_int_equal(info.shape[1], 4);
  assert_int_equal(info.logical_shape[0], 4);
  assert_int_equal(info.logical_shape[1], 3);
  assert_int_equal(info.grid_shape[0], 1);
  assert_int_equal(info.grid_shape[1], 3);
  assert_int_equal(info.tile_shape[0], 4);
  assert_int_equal(info.tile_shape[1], 1);
  assert_int_equal(info.permutation[0], 1);
  assert_int_equal(info.permutation[1], 0);
  assert_int_equal(info.data_offset, data_start + 32);
  assert_int_equal(info.data_bytes, sizeof values);
  assert_int_equal(info.segments, 1);
  size_t size = 0;
  SW_OK_(sw_carrier_size(file, &size));
  assert_int_equal(size, 12);
  float got[12];
  SW_OK_(sw_carrier_read(file, 0, 12, got));
  assert_memory_equal(got, values, sizeof values);
  /* The full tensor's element (d, r) is ne-index (d, r): slot r * 4 + d. */
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  const int64_t c[2] = {3, 2};
  double v = 0;
  SW_OK_(sw_tensor_get(full, c, 2, &v));
  assert_true(v == values[2 * 4 + 3]);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  /* The other tensor; a missing name; the parsing hook's counts. */
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "other", NULL, &info, &file));
  assert_int_equal(info.rank, 1);
  assert_int_equal(info.data_offset, data_start);
  sw_carrier_release(file);
  SW_FAILS(sw_carrier_open_gguf(f->rt, path, "missing", NULL, &info, &file), SW_ERROR_VALUE,
           "holds no tensor named 'missing'");
  size_t tensors = 0, keys = 0;
  SW_OK_(sw_testing_parse_gguf_header(b.data, b.size, 0, "w", &tensors, &keys, &info));
  assert_int_equal(tensors, 2);
  assert_int_equal(keys, 1);
  assert_int_equal(info.data_offset, data_start + 32);
  /* A buffer holding the header only, the file's size given. */
  SW_OK_(sw_testing_parse_gguf_header(b.data, data_start, b.size, NULL, NULL, NULL, NULL));
  SW_FAILS(sw_testing_parse_gguf_header(b.data, 100, b.size, NULL, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT,
           "truncated");
  free(kv.data);
  free(b.data);
}

/* F16, BF16, F64, I32 and I64 open with their dtypes; version 2 reads as 3. */
static void every_plain_type(void** state) {
  fixture_t* f = FIXTURE(state);
  const struct {
    uint32_t ggml;
    sw_dtype_t dtype;
    size_t size;
  } rows[] = {{GGML_F16, SW_DTYPE_F16, 2}, {GGML_BF16, SW_DTYPE_BF16, 2}, {28, SW_DTYPE_F64, 8},
              {26, SW_DTYPE_I32, 4},       {27, SW_DTYPE_I64, 8},         {GGML_F32, SW_DTYPE_F32, 4}};
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; ++r) {
    const info_t info_in = {"t", 2, {2, 3}, rows[r].ggml, 0};
    buf_t b = gguf_file(r % 2 ? 2 : 3, NULL, 0, &info_in, 1, 32, NULL, 6 * rows[r].size);
    char path[512];
    path_in(f, "types.gguf", path, sizeof path);
    write_bytes(path, b.data, b.size);
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* file = NULL;
    SW_OK_(sw_carrier_open_gguf(f->rt, path, "t", NULL, &info, &file));
    assert_int_equal(info.dtype, rows[r].dtype);
    assert_int_equal(info.data_bytes, 6 * rows[r].size);
    unsigned char got[48];
    SW_OK_(sw_carrier_read(file, 0, 6, got));
    assert_memory_equal(got, b.data + info.data_offset, 6 * rows[r].size);
    sw_carrier_release(file);
    free(b.data);
  }
}

/* llama.cpp's stacked expert tensor, ne (n_embd, n_ff, n_expert): one expert
 * per tile, each one contiguous block, promoted with direct I/O. */
enum { XD = 300, XF = 64, XE = 3 };

static void stacked_experts_one_per_tile(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = (size_t)XD * XF * XE;
  float* w = (float*)malloc(n * sizeof(float));
  for (int e = 0; e < XE; ++e)
    for (int r = 0; r < XF; ++r)
      for (int d = 0; d < XD; ++d) w[((size_t)e * XF + r) * XD + d] = weight(e, r, d);
  const info_t infos[2] = {{"blk.0.ffn_up_exps.weight", 3, {XD, XF, XE}, GGML_F32, 0},
                           {"blk.0.ffn_gate_inp.weight", 2, {XD, XE}, GGML_F32, n * sizeof(float)}};
  float* data = (float*)calloc(n + XD * XE, sizeof(float));
  memcpy(data, w, n * sizeof(float));
  buf_t b = gguf_file(3, NULL, 0, infos, 2, 32, data, (n + XD * XE) * sizeof(float));
  char path[512];
  path_in(f, "experts.gguf", path, sizeof path);
  write_bytes(path, b.data, b.size);

  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = true;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "blk.0.ffn_up_exps.weight", &d, &info, &file));
  assert_int_equal(info.rank, 3);
  const int64_t shape[3] = {XE, XF, XD}, logical[3] = {XD, XF, XE}, grid[3] = {1, 1, XE}, tile[3] = {XD, XF, 1};
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(info.shape[k], shape[k]);
    assert_int_equal(info.logical_shape[k], logical[k]);
    assert_int_equal(info.grid_shape[k], grid[k]);
    assert_int_equal(info.tile_shape[k], tile[k]);
  }
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  /* Promote expert 2 alone: exactly its bytes are read. */
  const sw_file_io_stats_t before = io_stats(file);
  const int64_t t2[3] = {0, 0, 2};
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_set_create(t2, 1, 3, &set));
  SW_OK_(sw_tiled_promote(tiled, set));
  sw_tile_set_release(set);
  const sw_file_io_stats_t after = io_stats(file);
  assert_int_equal((after.direct_bytes + after.bounce_bytes + after.buffered_bytes) -
                       (before.direct_bytes + before.bounce_bytes + before.buffered_bytes),
                   XD * XF * sizeof(float));
  if (after.direct_open) assert_int_equal(after.buffered_bytes, before.buffered_bytes);
  sw_tile_state_t st;
  sw_tile_state_init(&st);
  const int64_t t1[3] = {0, 0, 1};
  SW_OK_(sw_tiled_tile_state(tiled, t1, 3, &st));
  assert_int_equal(st.location, SW_TILE_SECONDARY);
  /* Every element of the full tensor (d, r, e) is the file's ne-index. */
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  float* got = (float*)malloc(n * sizeof(float));
  SW_OK_(sw_tensor_read(full, got, n * sizeof(float)));
  assert_memory_equal(got, w, n * sizeof(float));
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
  free(got);
  free(data);
  free(w);
  free(b.data);
}

/* ---- lying headers ------------------------------------------------------ */

typedef struct {
  const char* what;
  sw_error_code_t code;
  const char* needle;
} refusal_t;

/* The file of `b` through the opener (naming the file and, where one is at
 * fault, the tensor) and through the hook. */
static void expect_refusal(fixture_t* f, buf_t b, const char* name, sw_error_code_t code, const char* needle) {
  char path[512];
  path_in(f, "lying.gguf", path, sizeof path);
  write_bytes(path, b.data, b.size);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  const sw_file_tensor_info_t untouched = info;
  sw_carrier_t* file = NULL;
  sw_error_t* e = sw_carrier_open_gguf(f->rt, path, name, NULL, &info, &file);
  if (!e) fail_msg("opening '%s' succeeded; expected %s (%s)", name, sw_error_code_name(code), needle);
  if (sw_error_code(e) != code || !strstr(sw_error_message(e), needle) || !strstr(sw_error_message(e), path))
    fail_msg("got %s (%s); expected %s naming '%s' and the file", sw_error_code_name(sw_error_code(e)),
             sw_error_message(e), sw_error_code_name(code), needle);
  sw_error_free(e);
  assert_null(file);
  assert_memory_equal(&info, &untouched, sizeof info);
  e = sw_testing_parse_gguf_header(b.data, b.size, 0, name, NULL, NULL, NULL);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), code);
  sw_error_free(e);
  free(b.data);
}

static void lying_headers(void** state) {
  fixture_t* f = FIXTURE(state);
  const info_t w = {"w", 2, {4, 3}, GGML_F32, 0};
  /* Offsets past the end: the data is 4 bytes short. */
  expect_refusal(f, gguf_file(3, NULL, 0, &w, 1, 32, NULL, 44), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' offset: [0, +48) passes the end of the file's data (44 bytes");
  info_t far = w;
  far.offset = (uint64_t)1 << 63;
  expect_refusal(f, gguf_file(3, NULL, 0, &far, 1, 32, NULL, 48), "w", SW_ERROR_DATA_CORRUPT, "passes the end");
  /* Overlapping tensors. */
  const info_t overlap[2] = {w, {"v", 1, {8}, GGML_F32, 32}};
  expect_refusal(f, gguf_file(3, NULL, 0, overlap, 2, 32, NULL, 64), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'v' offset: overlaps tensor 'w'");
  /* A misaligned offset. */
  info_t odd = w;
  odd.offset = 4;
  expect_refusal(f, gguf_file(3, NULL, 0, &odd, 1, 32, NULL, 64), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' offset: 4 is not a multiple of the alignment 32");
  /* A first dimension the block does not divide (Q8_0: 32). */
  const info_t q = {"q", 2, {48, 2}, GGML_Q8_0, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &q, 1, 32, NULL, 204), "q", SW_ERROR_DATA_CORRUPT,
                 "tensor 'q' ne: the first dimension 48 is not a multiple of Q8_0's block of 32 elements");
  /* Absurd dimensions, counts and lengths; overflowing size products. */
  const info_t five = {"w", 5, {1, 1, 1, 1, 1}, GGML_F32, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &five, 1, 32, NULL, 4), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' n_dims: 5 dimensions; GGUF tensors have at most 4");
  const info_t huge_dim = {"w", 1, {(uint64_t)1 << 63}, GGML_F32, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &huge_dim, 1, 32, NULL, 0), "w", SW_ERROR_DATA_CORRUPT, "above 2^63 - 1");
  const info_t count_overflow = {"w", 2, {(uint64_t)1 << 40, (uint64_t)1 << 40}, GGML_F32, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &count_overflow, 1, 32, NULL, 0), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' ne: the element count of ne (1099511627776, 1099511627776) overflows");
  const info_t bytes_overflow = {"w", 1, {(uint64_t)1 << 62}, GGML_F32, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &bytes_overflow, 1, 32, NULL, 0), "w", SW_ERROR_DATA_CORRUPT,
                 "the byte size of ne (4611686018427387904,) of F32 overflows");
  buf_t b = gguf_file(3, NULL, 0, &w, 1, 32, NULL, 48);
  b.data[8] = 0xff; /* tensor count 255 + ... in a 160-byte file */
  b.data[14] = 0x10;
  expect_refusal(f, b, "w", SW_ERROR_DATA_CORRUPT, "tensor count: ");
  b = gguf_file(3, NULL, 0, &w, 1, 32, NULL, 48);
  b.data[23] = 0x10;
  expect_refusal(f, b, "w", SW_ERROR_DATA_CORRUPT, "metadata count: ");
  buf_t kv = {0};
  put_le(&kv, (uint64_t)1 << 40, 8); /* a key's length */
  expect_refusal(f, gguf_file(3, &kv, 1, NULL, 0, 32, NULL, 64), "w", SW_ERROR_DATA_CORRUPT,
                 "string length 1099511627776 passes the end of the file");
  free(kv.data);
  kv = (buf_t){0};
  put_str(&kv, "tokenizer.ggml.tokens");
  put_le(&kv, 9, 4);
  put_le(&kv, 8, 4);
  put_le(&kv, (uint64_t)1 << 50, 8);
  expect_refusal(f, gguf_file(3, &kv, 1, NULL, 0, 32, NULL, 64), "w", SW_ERROR_DATA_CORRUPT,
                 "metadata 'tokenizer.ggml.tokens': an array of 1125899906842624 STRING values cannot fit");
  free(kv.data);
  /* Unknown ggml type and value type. */
  info_t unknown = w;
  unknown.type = 4;
  expect_refusal(f, gguf_file(3, NULL, 0, &unknown, 1, 32, NULL, 48), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' type: unknown ggml type 4");
  kv = (buf_t){0};
  put_str(&kv, "k");
  put_le(&kv, 13, 4);
  put_le(&kv, 0, 8);
  expect_refusal(f, gguf_file(3, &kv, 1, NULL, 0, 32, NULL, 0), "w", SW_ERROR_DATA_CORRUPT,
                 "metadata 'k': unknown value type 13");
  free(kv.data);
  /* Duplicates. */
  const info_t twice[2] = {w, {"w", 1, {4}, GGML_F32, 64}};
  expect_refusal(f, gguf_file(3, NULL, 0, twice, 2, 32, NULL, 80), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w': duplicate tensor name");
  kv = (buf_t){0};
  kv_u32(&kv, "k", 1);
  kv_u32(&kv, "k", 2);
  expect_refusal(f, gguf_file(3, &kv, 2, NULL, 0, 32, NULL, 0), "w", SW_ERROR_DATA_CORRUPT,
                 "metadata 'k': duplicate key");
  free(kv.data);
  /* general.alignment: a UINT32 power of two, which offsets follow. */
  kv = (buf_t){0};
  kv_u32(&kv, "general.alignment", 48);
  expect_refusal(f, gguf_file(3, &kv, 1, &w, 1, 48, NULL, 48), "w", SW_ERROR_DATA_CORRUPT,
                 "metadata 'general.alignment': 48 is not a power of two");
  free(kv.data);
  kv = (buf_t){0};
  put_str(&kv, "general.alignment");
  put_le(&kv, 10, 4);
  put_le(&kv, 64, 8);
  expect_refusal(f, gguf_file(3, &kv, 1, &w, 1, 64, NULL, 48), "w", SW_ERROR_DATA_CORRUPT,
                 "metadata 'general.alignment': is UINT64, not UINT32");
  free(kv.data);
  kv = (buf_t){0};
  kv_u32(&kv, "general.alignment", 64);
  info_t at32 = w;
  at32.offset = 32;
  expect_refusal(f, gguf_file(3, &kv, 1, &at32, 1, 64, NULL, 96), "w", SW_ERROR_DATA_CORRUPT,
                 "tensor 'w' offset: 32 is not a multiple of the alignment 64");
  free(kv.data);
  /* Magic and versions. */
  b = gguf_file(3, NULL, 0, &w, 1, 32, NULL, 48);
  b.data[3] = 'G';
  expect_refusal(f, b, "w", SW_ERROR_DATA_CORRUPT, "magic: not a GGUF file");
  expect_refusal(f, gguf_file(1, NULL, 0, &w, 1, 32, NULL, 48), "w", SW_ERROR_UNSUPPORTED,
                 "version: GGUF version 1 is not supported; versions 2 and 3 are");
  expect_refusal(f, gguf_file(4, NULL, 0, &w, 1, 32, NULL, 48), "w", SW_ERROR_UNSUPPORTED, "GGUF version 4");
  expect_refusal(f, gguf_file(0x03000000u, NULL, 0, &w, 1, 32, NULL, 48), "w", SW_ERROR_UNSUPPORTED,
                 "a big-endian GGUF file");
  /* The quantized types StrideWeave holds open as their dtypes, slots
   * counting elements; the other quantized types are refused naming them. */
  const struct {
    uint32_t type;
    uint64_t ne0;
    size_t bytes;
    sw_dtype_t dtype;
  } quantized[] = {{GGML_Q8_0, 64, 68, SW_DTYPE_Q8_0},
                   {GGML_Q4_0, 64, 36, SW_DTYPE_Q4_0},
                   {GGML_Q4_K, 256, 144, SW_DTYPE_Q4_K},
                   {GGML_Q6_K, 512, 420, SW_DTYPE_Q6_K},
                   {GGML_MXFP4, 32, 17, SW_DTYPE_MXFP4}};
  for (size_t k = 0; k < sizeof quantized / sizeof quantized[0]; ++k) {
    const info_t qi = {"blk.0.ffn_down_exps.weight", 1, {quantized[k].ne0}, quantized[k].type, 0};
    /* The header itself is valid: the block table sizes the data exactly. */
    b = gguf_file(3, NULL, 0, &qi, 1, 32, NULL, quantized[k].bytes);
    SW_OK_(sw_testing_parse_gguf_header(b.data, b.size, 0, NULL, NULL, NULL, NULL));
    b.size -= 1;
    sw_error_t* e = sw_testing_parse_gguf_header(b.data, b.size, 0, NULL, NULL, NULL, NULL);
    assert_non_null(e);
    assert_int_equal(sw_error_code(e), SW_ERROR_DATA_CORRUPT);
    sw_error_free(e);
    b.size += 1;
    char qpath[512];
    path_in(f, "quantized.gguf", qpath, sizeof qpath);
    write_bytes(qpath, b.data, b.size);
    sw_carrier_t* c = NULL;
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    SW_OK_(sw_carrier_open_gguf(f->rt, qpath, "blk.0.ffn_down_exps.weight", NULL, &info, &c));
    assert_int_equal(info.dtype, quantized[k].dtype);
    size_t slots = 0;
    SW_OK_(sw_carrier_size(c, &slots));
    assert_int_equal(slots, quantized[k].ne0);
    sw_carrier_release(c);
    free(b.data);
  }
  const info_t q41 = {"w", 1, {32}, GGML_Q4_1, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &q41, 1, 32, NULL, 20), "w", SW_ERROR_UNSUPPORTED,
                 "unsupported dtype: ggml type Q4_1 has no StrideWeave dtype");
  const info_t i8 = {"w", 1, {4}, GGML_I8, 0};
  expect_refusal(f, gguf_file(3, NULL, 0, &i8, 1, 32, NULL, 4), "w", SW_ERROR_UNSUPPORTED,
                 "unsupported dtype: ggml type I8 has no StrideWeave dtype");
  /* A request the file cannot serve: a scalar (a valid header). */
  const info_t scalar = {"w", 0, {0}, GGML_F32, 0};
  b = gguf_file(3, NULL, 0, &scalar, 1, 32, NULL, 4);
  char path[512];
  path_in(f, "scalar.gguf", path, sizeof path);
  write_bytes(path, b.data, b.size);
  SW_OK_(sw_testing_parse_gguf_header(b.data, b.size, 0, "w", NULL, NULL, NULL));
  sw_carrier_t* file = NULL;
  SW_FAILS(sw_carrier_open_gguf(f->rt, path, "w", NULL, NULL, &file), SW_ERROR_VALUE, "tensor 'w' of GGUF file '");
  free(b.data);
  path_in(f, "missing.gguf", path, sizeof path);
  SW_FAILS(sw_carrier_open_gguf(f->rt, path, "w", NULL, NULL, &file), SW_ERROR_IO, "cannot open");
  SW_FAILS(sw_carrier_open_gguf(f->rt, NULL, "w", NULL, NULL, &file), SW_ERROR_VALUE, "path");
  SW_FAILS(sw_carrier_open_gguf(f->rt, path, NULL, NULL, NULL, &file), SW_ERROR_VALUE, "name");
}

/* A header longer than the first read (a big vocabulary) is read whole. */
static void long_metadata(void** state) {
  fixture_t* f = FIXTURE(state);
  enum { TOKENS = 200000 };
  buf_t kv = {0};
  put_str(&kv, "tokenizer.ggml.tokens");
  put_le(&kv, 9, 4);
  put_le(&kv, 8, 4);
  put_le(&kv, TOKENS, 8);
  char token[32];
  for (int k = 0; k < TOKENS; ++k) {
    snprintf(token, sizeof token, "token-%d", k);
    put_str(&kv, token);
  }
  const info_t w = {"w", 1, {4}, GGML_F32, 0};
  const float values[4] = {1, 2, 3, 4};
  buf_t b = gguf_file(3, &kv, 1, &w, 1, 32, values, sizeof values);
  assert_true(b.size > (2u << 20));
  char path[512];
  path_in(f, "vocab.gguf", path, sizeof path);
  write_bytes(path, b.data, b.size);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "w", NULL, &info, &file));
  assert_int_equal(info.data_offset, b.size - sizeof values);
  float got[4];
  SW_OK_(sw_carrier_read(file, 0, 4, got));
  assert_memory_equal(got, values, sizeof values);
  sw_carrier_release(file);
  free(kv.data);
  free(b.data);
}

/* ---- saving ------------------------------------------------------------- */

static uint64_t le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void save_gguf_roundtrip(void** state) {
  fixture_t* f = FIXTURE(state);
  /* A dense (2, 3) f32 tensor (first mode fastest) and a bf16 one. */
  const int64_t ext[2] = {2, 3};
  float values[6];
  for (int k = 0; k < 6; ++k) values[k] = (float)k * 1.5f - 2.0f;
  sw_tensor_t *t = NULL, *h = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 2, values, &t));
  const uint16_t halves[3] = {0x3f80, 0xc000, 0x7f80}; /* 1, -2, inf */
  const int64_t hext[1] = {3};
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_BF16, hext, 1, halves, &h));
  char path[512];
  path_in(f, "saved.gguf", path, sizeof path);
  const char* names[2] = {"dense", "halves"};
  sw_tensor_t* tensors[2] = {t, h};
  sw_gguf_save_desc_t d;
  sw_gguf_save_desc_init(&d);
  const char* keys[3] = {"general.architecture", "llama.block_count", "llama.rope.freq_base"};
  const sw_gguf_value_type_t types[3] = {SW_GGUF_TYPE_STRING, SW_GGUF_TYPE_UINT32, SW_GGUF_TYPE_FLOAT32};
  const uint32_t blocks = 2;
  const float base = 10000.0f;
  const void* vals[3] = {"llama", &blocks, &base};
  d.metadata_keys = keys;
  d.metadata_types = types;
  d.metadata_values = vals;
  d.metadata_count = 3;
  d.alignment = 64;
  SW_OK_(sw_save_gguf(path, names, tensors, 2, &d));

  size_t n = 0;
  unsigned char* file = read_bytes(path, &n);
  assert_memory_equal(file, "GGUF", 4);
  assert_int_equal(le(file + 4, 4), 3);
  assert_int_equal(le(file + 8, 8), 2);
  assert_int_equal(le(file + 16, 8), 4); /* three keys and general.alignment */
  size_t tensors_n = 0, keys_n = 0;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  SW_OK_(sw_testing_parse_gguf_header(file, n, 0, "dense", &tensors_n, &keys_n, &info));
  assert_int_equal(tensors_n, 2);
  assert_int_equal(keys_n, 4);
  /* Its shape (2, 3) is NumPy's; ne is (3, 2); the data is row-major. */
  assert_int_equal(info.shape[0], 2);
  assert_int_equal(info.shape[1], 3);
  assert_int_equal(info.data_offset % 64, 0);
  const float* saved = (const float*)(file + info.data_offset);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b) assert_true(saved[a * 3 + b] == values[a + 2 * b]);
  SW_OK_(sw_testing_parse_gguf_header(file, n, 0, "halves", NULL, NULL, &info));
  assert_int_equal(info.dtype, SW_DTYPE_BF16);
  assert_int_equal(info.data_offset % 64, 0);
  assert_memory_equal(file + info.data_offset, halves, sizeof halves);
  assert_int_equal(n % 64, 0); /* the data section ends padded */
  /* The opener reads it back. */
  sw_carrier_t* carrier = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "dense", NULL, &info, &carrier));
  float got[6];
  SW_OK_(sw_carrier_read(carrier, 0, 6, got));
  assert_memory_equal(got, saved, sizeof got);
  sw_carrier_release(carrier);
  free(file);

  /* Errors: nothing is written. */
  char bad[512];
  path_in(f, "bad.gguf", bad, sizeof bad);
  d.alignment = 48;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &d), SW_ERROR_VALUE, "alignment 48 is not a power of two");
  d.alignment = 0;
  const char* align_key[1] = {"general.alignment"};
  const sw_gguf_value_type_t u32[1] = {SW_GGUF_TYPE_UINT32};
  const void* align_val[1] = {&blocks};
  d.metadata_keys = align_key;
  d.metadata_types = u32;
  d.metadata_values = align_val;
  d.metadata_count = 1;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &d), SW_ERROR_VALUE,
           "'general.alignment' is written from the alignment");
  const sw_gguf_value_type_t arr[1] = {SW_GGUF_TYPE_ARRAY};
  d.metadata_keys = keys;
  d.metadata_types = arr;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &d), SW_ERROR_UNSUPPORTED, "array values are not written");
  const sw_gguf_value_type_t unknown[1] = {(sw_gguf_value_type_t)13};
  d.metadata_types = unknown;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &d), SW_ERROR_VALUE, "unknown value type 13");
  const void* null_val[1] = {NULL};
  d.metadata_types = u32;
  d.metadata_values = null_val;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &d), SW_ERROR_VALUE, "must not be NULL");
  const char* twice[2] = {"dense", "dense"};
  SW_FAILS(sw_save_gguf(bad, twice, tensors, 2, NULL), SW_ERROR_VALUE, "tensor 'dense' is named twice");
  sw_tensor_t* u8 = NULL;
  const unsigned char bytes[3] = {1, 2, 3};
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_U8, hext, 1, bytes, &u8));
  SW_FAILS(sw_save_gguf(bad, names, &u8, 1, NULL), SW_ERROR_TYPE, "has dtype u8, which GGUF cannot hold");
  const int64_t five[5] = {1, 1, 1, 1, 2};
  sw_tensor_t* rank5 = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, five, 5, values, &rank5));
  SW_FAILS(sw_save_gguf(bad, names, &rank5, 1, NULL), SW_ERROR_VALUE, "GGUF tensors have at most 4");
  sw_gguf_save_desc_t old = d;
  old.struct_size = 7;
  SW_FAILS(sw_save_gguf(bad, names, tensors, 2, &old), SW_ERROR_VALUE, "struct_size 7");
  assert_int_equal(access(bad, F_OK), -1);
  sw_tensor_release(rank5);
  sw_tensor_release(u8);
  sw_tensor_release(h);
  sw_tensor_release(t);
}

/* A TiledEvictable opened from a GGUF file saves back through its file view
 * with the file's ne, tile by tile, a dirty value included. */
static void save_tiled_keeps_ne(void** state) {
  fixture_t* f = FIXTURE(state);
  enum { D = 8, F = 3, E = 2 };
  float w[D * F * E];
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < F; ++r)
      for (int d = 0; d < D; ++d) w[(e * F + r) * D + d] = weight(e, r, d);
  const info_t in = {"blk.0.ffn_gate_exps.weight", 3, {D, F, E}, GGML_F32, 0};
  buf_t b = gguf_file(3, NULL, 0, &in, 1, 32, w, sizeof w);
  char src[512], out[512];
  path_in(f, "src.gguf", src, sizeof src);
  path_in(f, "out.gguf", out, sizeof out);
  write_bytes(src, b.data, b.size);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, src, in.name, NULL, &info, &file));
  /* A writable secondary (the file carrier is read-only): a scratch copy. */
  sw_carrier_t* scratch = NULL;
  SW_OK_(sw_carrier_create_file(f->rt, SW_DTYPE_F32, D * F * E, NULL, &scratch));
  float copy[D * F * E];
  SW_OK_(sw_carrier_read(file, 0, D * F * E, copy));
  SW_OK_(sw_carrier_write(scratch, 0, D * F * E, copy));
  sw_carrier_release(file);
  file = scratch;
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t *full = NULL, *view = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  SW_OK_(sw_file_tensor_view(full, &info, &view));
  /* A dirty primary value saves too. */
  const int64_t c[3] = {5, 2, 1};
  SW_OK_(sw_tensor_set(full, c, 3, -7.0));
  const char* names[1] = {in.name};
  SW_OK_(sw_save_gguf(out, names, &view, 1, NULL));
  size_t n = 0;
  unsigned char* bytes = read_bytes(out, &n);
  sw_file_tensor_info_t saved;
  sw_file_tensor_info_init(&saved);
  SW_OK_(sw_testing_parse_gguf_header(bytes, n, 0, in.name, NULL, NULL, &saved));
  for (int k = 0; k < 3; ++k) assert_int_equal(saved.logical_shape[k], info.logical_shape[k]);
  w[(1 * F + 2) * D + 5] = -7.0f;
  assert_memory_equal(bytes + saved.data_offset, w, sizeof w);
  free(bytes);
  free(b.data);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
}

/* Random byte changes of a valid header (every value type, three tensors)
 * never crash and give only content errors, or a description of "a" whose
 * bytes lie inside the file (a deterministic sweep; the fuzzer goes
 * further). Changes favour the bytes that lie best: counts, lengths,
 * types, dimensions and offsets set to 0, 1, all ones or a high bit. */
static void parser_survives_mutations(void** state) {
  (void)state;
  buf_t kv = {0};
  kv_u32(&kv, "general.alignment", 64);
  put_str(&kv, "general.name");
  put_le(&kv, 8, 4);
  put_str(&kv, "mixtral");
  put_str(&kv, "tokens");
  put_le(&kv, 9, 4);
  put_le(&kv, 8, 4);
  put_le(&kv, 2, 8);
  put_str(&kv, "a");
  put_str(&kv, "bc");
  put_str(&kv, "nested");
  put_le(&kv, 9, 4);
  put_le(&kv, 9, 4);
  put_le(&kv, 1, 8);
  put_le(&kv, 0, 4);
  put_le(&kv, 3, 8);
  put_le(&kv, 0x030201, 3);
  const info_t infos[3] = {{"a", 3, {4, 3, 2}, GGML_F32, 0},
                           {"q", 2, {32, 2}, GGML_Q8_0, 128},
                           {"b", 1, {4}, GGML_BF16, 256}};
  buf_t b = gguf_file(3, &kv, 4, infos, 3, 64, NULL, 264);
  SW_OK_(sw_testing_parse_gguf_header(b.data, b.size, 0, "a", NULL, NULL, NULL));
  unsigned char* work = (unsigned char*)malloc(b.size);
  uint64_t rng = 0x2545f4914f6cdd1dULL;
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    memcpy(work, b.data, b.size);
    const int changes = 1 + (int)(sw_test_random(&rng) % 3);
    for (int k = 0; k < changes; ++k) {
      const size_t at = (size_t)(sw_test_random(&rng) % b.size);
      const uint64_t r = sw_test_random(&rng);
      static const unsigned char bytes[] = {0x00, 0x01, 0xff, 0x80, 0x7f, 0x09, 0x08, 0x1e, 0x40, 0x20};
      work[at] = (r & 1) ? (unsigned char)(r >> 8) : bytes[(r >> 8) % sizeof bytes];
    }
    const size_t len = (sw_test_random(&rng) % 4 == 0) ? (size_t)(sw_test_random(&rng) % (b.size + 1)) : b.size;
    const uint64_t file_size = (sw_test_random(&rng) % 4 == 0) ? len + (sw_test_random(&rng) % 4096) : 0;
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_error_t* e = sw_testing_parse_gguf_header(work, len, file_size, "a", NULL, NULL, &info);
    if (e) {
      const sw_error_code_t code = sw_error_code(e);
      if (code != SW_ERROR_DATA_CORRUPT && code != SW_ERROR_UNSUPPORTED && code != SW_ERROR_VALUE)
        fail_msg("round %d: %s (%s)", round, sw_error_code_name(code), sw_error_message(e));
      sw_error_free(e);
      continue;
    }
    ++accepted;
    const uint64_t whole = file_size ? file_size : len;
    assert_true(info.data_offset <= whole && info.data_bytes <= whole - info.data_offset);
  }
  assert_true(accepted > 0);
  free(work);
  free(kv.data);
  free(b.data);
}

/* ---- the seed corpus ---------------------------------------------------- */

/* Every seed file gives the code its name states (NAME.CODE.gguf), and
 * every prefix of it fails cleanly or passes. */
static void corpus_replay(void** state) {
  (void)state;
  const char* root = getenv("SW_CORPUS_DIR");
  if (!root) SW_SKIP("SW_CORPUS_DIR is not set (meson sets it to tests/corpus)");
  char dirpath[512];
  snprintf(dirpath, sizeof dirpath, "%s/gguf", root);
  DIR* d = opendir(dirpath);
  assert_non_null(d);
  int replayed = 0, valid = 0;
  struct dirent* ent;
  while ((ent = readdir(d)) != NULL) {
    if (ent->d_name[0] == '.') continue;
    char name[256], path[800];
    snprintf(name, sizeof name, "%s", ent->d_name);
    snprintf(path, sizeof path, "%s/%s", dirpath, ent->d_name);
    char* ext = strrchr(name, '.');
    assert_non_null(ext);
    *ext = '\0';
    const char* expected = strrchr(name, '.');
    assert_non_null(expected);
    ++expected;
    size_t n = 0;
    unsigned char* data = read_bytes(path, &n);
    sw_error_t* e = sw_testing_parse_gguf_header(data, n, 0, NULL, NULL, NULL, NULL);
    const char* got = e ? sw_error_code_name(sw_error_code(e)) : "OK";
    if (strcmp(got, expected) != 0) fail_msg("%s: got %s (%s), expected %s", path, got, sw_error_message(e), expected);
    if (!e) ++valid;
    sw_error_free(e);
    for (size_t cut = 0; cut < n && cut < 4096; ++cut) {
      sw_error_t* p = sw_testing_parse_gguf_header(data, cut, 0, NULL, NULL, NULL, NULL);
      if (p) {
        const sw_error_code_t code = sw_error_code(p);
        if (code != SW_ERROR_DATA_CORRUPT && code != SW_ERROR_UNSUPPORTED)
          fail_msg("%s cut at %zu: %s (%s)", path, cut, sw_error_code_name(code), sw_error_message(p));
      }
      sw_error_free(p);
    }
    free(data);
    ++replayed;
  }
  closedir(d);
  assert_true(replayed >= 40);
  assert_true(valid >= 10);
}

/* A (64, 3) q4_0 tensor and its column view (64, 2) of columns 1 and 2:
 * ggml type Q4_0 with ne (64, 3) and (64, 2), the blocks as stored (two
 * 18-byte blocks per column), read back by the parser and the opener. */
static void save_gguf_quantized(void** state) {
  fixture_t* f = FIXTURE(state);
  unsigned char blocks[3 * 2 * 18];
  for (size_t i = 0; i < sizeof blocks; ++i) blocks[i] = (unsigned char)(i * 7 + 3);
  for (int b = 0; b < 6; ++b) { /* finite f16 scales */
    blocks[18 * b] = 0x00;
    blocks[18 * b + 1] = (unsigned char)(0x38 + b);
  }
  const int64_t ext[2] = {64, 3};
  sw_tensor_t *q = NULL, *cols = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_Q4_0, ext, 2, blocks, &q));
  SW_OK_(sw_tensor_slice(q, 1, 1, 3, 1, &cols));
  char path[512];
  path_in(f, "quantized.gguf", path, sizeof path);
  const char* names[2] = {"q", "cols"};
  sw_tensor_t* tensors[2] = {q, cols};
  SW_OK_(sw_save_gguf(path, names, tensors, 2, NULL));

  size_t n = 0;
  unsigned char* file = read_bytes(path, &n);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  SW_OK_(sw_testing_parse_gguf_header(file, n, 0, "q", NULL, NULL, &info));
  assert_int_equal(info.dtype, SW_DTYPE_Q4_0);
  assert_int_equal(info.logical_shape[0], 64); /* ne */
  assert_int_equal(info.logical_shape[1], 3);
  assert_int_equal(info.data_bytes, sizeof blocks);
  assert_memory_equal(file + info.data_offset, blocks, sizeof blocks);
  SW_OK_(sw_testing_parse_gguf_header(file, n, 0, "cols", NULL, NULL, &info));
  assert_int_equal(info.logical_shape[0], 64);
  assert_int_equal(info.logical_shape[1], 2);
  assert_memory_equal(file + info.data_offset, blocks + 36, 72);
  free(file);
  /* The opener reads the same blocks. */
  sw_carrier_t* carrier = NULL;
  SW_OK_(sw_carrier_open_gguf(f->rt, path, "q", NULL, &info, &carrier));
  assert_int_equal(info.dtype, SW_DTYPE_Q4_0);
  unsigned char got[sizeof blocks];
  SW_OK_(sw_carrier_read(carrier, 0, 192, got));
  assert_memory_equal(got, blocks, sizeof blocks);
  sw_carrier_release(carrier);
  sw_tensor_release(cols);
  sw_tensor_release(q);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(f32_tensor_by_name),
      T(every_plain_type),
      T(stacked_experts_one_per_tile),
      T(lying_headers),
      T(long_metadata),
      T(save_gguf_roundtrip),
      T(save_gguf_quantized),
      T(save_tiled_keeps_ne),
      cmocka_unit_test(parser_survives_mutations),
      cmocka_unit_test(corpus_replay),
  };
#undef T
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
