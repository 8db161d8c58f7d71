/* Model files as secondary tiers: .npy, .safetensors and raw tensors opened
 * as File carriers with the geometry that gives each tile one expert, per-
 * expert safetensors tensors as one segmented carrier (of one file, or of
 * several: a sharded checkpoint), direct I/O through bounce buffers, saving
 * tensors and TiledEvictables to .safetensors and .npy, every header error
 * rule through the openers and the parsing hooks, and the seed corpus
 * (tests/corpus) replayed through those hooks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "sw_test.h"
#include "sw_file_test.h"

static int fixture_setup(void** state) { return file_fixture_setup(state, "sw_model_test"); }

/* An npy 1.0 file: the dictionary text as given, padded to 64 bytes. */
static void write_npy(const char* path, const char* dict, const void* data, size_t n) {
  size_t len = strlen(dict) + 1;
  size_t pad = (64 - (10 + len) % 64) % 64;
  size_t total = 10 + len + pad + n;
  unsigned char* buf = (unsigned char*)malloc(total);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)((len + pad) & 0xff);
  buf[9] = (unsigned char)((len + pad) >> 8);
  memcpy(buf + 10, dict, strlen(dict));
  memset(buf + 10 + strlen(dict), ' ', pad);
  buf[10 + len + pad - 1] = '\n';
  if (n) memcpy(buf + 10 + len + pad, data, n);
  write_bytes(path, buf, total);
  free(buf);
}

/* A safetensors file: the 8-byte length, the JSON as given, the data. */
static void write_st(const char* path, const char* json, const void* data, size_t n) {
  size_t len = strlen(json);
  unsigned char* buf = (unsigned char*)malloc(8 + len + n + 1);
  for (int i = 0; i < 8; ++i) buf[i] = (unsigned char)(((uint64_t)len >> (8 * i)) & 0xff);
  memcpy(buf + 8, json, len);
  if (n) memcpy(buf + 8 + len, data, n);
  write_bytes(path, buf, 8 + len + n);
  free(buf);
}

/* The value of expert e's (o, i) in the test weights. */
static float weight(int64_t e, int64_t o, int64_t i) { return (float)(e * 10000 + o * 100 + i); }

static sw_carrier_t* tiled_over(fixture_t* f, sw_carrier_t* file, const sw_file_tensor_info_t* info) {
  sw_carrier_t *cpu = NULL, *tiled = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, info->dtype, 0, &cpu));
  SW_OK_(sw_tiled_create(cpu, file, info->grid_shape, info->tile_shape, info->rank, NULL, &tiled));
  sw_carrier_release(cpu);
  return tiled;
}

static sw_tensor_t* permuted(sw_tensor_t* t, const size_t* perm, size_t rank) {
  sw_tensor_t* v = NULL;
  SW_OK_(sw_tensor_permute(t, perm, rank, &v));
  return v;
}

/* The full tensor of a TiledEvictable, indexed as its file does. */
static sw_tensor_t* file_view(sw_tensor_t* full, const sw_file_tensor_info_t* info) {
  sw_tensor_t* v = NULL;
  SW_OK_(sw_file_tensor_view(full, info, &v));
  return v;
}

static double get3(const sw_tensor_t* t, int64_t a, int64_t b, int64_t c) {
  int64_t coord[3] = {a, b, c};
  double v = 0;
  SW_OK_(sw_tensor_get(t, coord, 3, &v));
  return v;
}

/* Projects experts `chosen` of a (1, 1, E) grid; returns the compact tensor. */
static sw_tensor_t* project_experts(sw_carrier_t* tiled, sw_tensor_t* full, const int64_t* chosen, size_t n) {
  int64_t zero = 0;
  const int64_t* axes[3] = {&zero, &zero, chosen};
  size_t counts[3] = {1, 1, n};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 3, &sel));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(tiled, full, sel, NULL, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* compact = NULL;
  SW_OK_(sw_await_result(a, &compact));
  sw_await_release(a);
  sw_tile_selection_release(sel);
  return compact;
}

/* ---- npy --------------------------------------------------------------- */

static void npy_c_order_is_the_reversed_tensor(void** state) {
  fixture_t* f = FIXTURE(state);
  enum { E = 3, O = 4, I = 5 };
  float data[E * O * I];
  for (int e = 0; e < E; ++e)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < I; ++i) data[(e * O + o) * I + i] = weight(e, o, i);
  char path[512];
  path_in(f, "experts.npy", path, sizeof path);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4, 5), }", data, sizeof data);

  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &file));
  assert_int_equal(info.dtype, SW_DTYPE_F32);
  assert_int_equal(info.rank, 3);
  assert_int_equal(info.order, SW_FILE_ORDER_ROW_MAJOR);
  assert_int_equal(info.shape[0], E);
  assert_int_equal(info.shape[1], O);
  assert_int_equal(info.shape[2], I);
  assert_int_equal(info.data_offset, 128); /* 10 + 63 dictionary bytes, padded to 64 */
  assert_int_equal(info.data_bytes, sizeof data);
  assert_int_equal(info.segments, 1);
  const int64_t logical[3] = {I, O, E}, grid[3] = {1, 1, E}, tile[3] = {I, O, 1};
  const size_t perm[3] = {2, 1, 0};
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(info.logical_shape[k], logical[k]);
    assert_int_equal(info.grid_shape[k], grid[k]);
    assert_int_equal(info.tile_shape[k], tile[k]);
    assert_int_equal(info.permutation[k], perm[k]);
  }
  assert_int_equal(info.shape[3], 0);
  bool read_only = false;
  SW_OK_(sw_carrier_is_read_only(file, &read_only));
  assert_true(read_only);

  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  /* The full tensor reads back as the file's bytes: its tiles are the experts. */
  float back[E * O * I];
  SW_OK_(sw_tensor_read(full, back, sizeof back));
  assert_memory_equal(back, data, sizeof data);
  /* The permuted view indexes as the file does. */
  sw_tensor_t* view = file_view(full, &info);
  int64_t vshape[3];
  SW_OK_(sw_tensor_shape(view, vshape, 3));
  assert_int_equal(vshape[0], E);
  assert_int_equal(vshape[2], I);
  for (int e = 0; e < E; ++e)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < I; ++i) assert_true(get3(view, e, o, i) == weight(e, o, i));

  /* Projecting experts 2 and 0 copies two blocks: (I, O, 2), permuted to (2, O, I). */
  const int64_t chosen[2] = {2, 0};
  sw_tensor_t* compact = project_experts(tiled, full, chosen, 2);
  float got[2 * O * I];
  SW_OK_(sw_tensor_read(compact, got, sizeof got));
  assert_memory_equal(got, data + 2 * O * I, O * I * sizeof(float));
  assert_memory_equal(got + O * I, data, O * I * sizeof(float));
  sw_tensor_t* experts = permuted(compact, info.permutation, 3);
  for (int s = 0; s < 2; ++s)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < I; ++i) assert_true(get3(experts, s, o, i) == weight(chosen[s], o, i));
  /* The view is no full tensor: projection takes the carrier's own. */
  {
    int64_t zero = 0, two = 2;
    const int64_t* axes[3] = {&zero, &zero, &two};
    size_t counts[3] = {1, 1, 1};
    sw_tile_selection_t* sel = NULL;
    SW_OK_(sw_tile_selection_create(axes, counts, 3, &sel));
    sw_await_t* a = NULL;
    SW_FAILS(sw_tiled_project(tiled, view, sel, NULL, &a), SW_ERROR_VALUE, "tile footprints");
    sw_tile_selection_release(sel);
  }
  sw_tensor_release(experts);
  sw_tensor_release(compact);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
}

static void npy_fortran_order_maps_as_is(void** state) {
  fixture_t* f = FIXTURE(state);
  enum { A = 3, B = 4, C = 5 };
  double data[A * B * C];
  for (int c = 0; c < C; ++c)
    for (int b = 0; b < B; ++b)
      for (int a = 0; a < A; ++a) data[a + A * (b + B * c)] = a * 100 + b * 10 + c;
  char path[512];
  path_in(f, "fortran.npy", path, sizeof path);
  write_npy(path, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4, 5), }", data, sizeof data);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &file));
  assert_int_equal(info.order, SW_FILE_ORDER_FIRST_MODE_FASTEST);
  const int64_t logical[3] = {A, B, C}, grid[3] = {1, 1, C}, tile[3] = {A, B, 1};
  for (size_t k = 0; k < 3; ++k) {
    assert_int_equal(info.logical_shape[k], logical[k]);
    assert_int_equal(info.grid_shape[k], grid[k]);
    assert_int_equal(info.tile_shape[k], tile[k]);
    assert_int_equal(info.permutation[k], k);
  }
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* view = file_view(full, &info);
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c) assert_true(get3(view, a, b, c) == a * 100 + b * 10 + c);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
}

/* Each supported npy dtype: its bytes come back unchanged, in order. */
static void npy_every_dtype(void** state) {
  fixture_t* f = FIXTURE(state);
  static const struct {
    const char* descr;
    sw_dtype_t dtype;
  } cases[] = {{"<f4", SW_DTYPE_F32}, {"<f8", SW_DTYPE_F64}, {"<f2", SW_DTYPE_F16}, {"<i4", SW_DTYPE_I32},
               {"<i8", SW_DTYPE_I64}, {"|u1", SW_DTYPE_U8},  {"|b1", SW_DTYPE_BOOL}, {"=f4", SW_DTYPE_F32},
               {"u1", SW_DTYPE_U8}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const size_t es = sw_dtype_size(cases[c].dtype), n = 7 * 3;
    unsigned char data[7 * 3 * 8];
    for (size_t k = 0; k < n * es; ++k) data[k] = (unsigned char)(cases[c].dtype == SW_DTYPE_BOOL ? k % 2 : k * 7 + 1);
    char path[512], dict[160];
    path_in(f, "dtype.npy", path, sizeof path);
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (7, 3), }", cases[c].descr);
    write_npy(path, dict, data, n * es);
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* file = NULL;
    SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &file));
    assert_int_equal(info.dtype, cases[c].dtype);
    sw_carrier_t* tiled = tiled_over(f, file, &info);
    sw_tensor_t* full = NULL;
    SW_OK_(sw_tiled_full_tensor(tiled, &full));
    unsigned char back[7 * 3 * 8];
    SW_OK_(sw_tensor_read(full, back, n * es));
    assert_memory_equal(back, data, n * es);
    sw_tensor_release(full);
    sw_carrier_release(tiled);
    sw_carrier_release(file);
  }
}

/* ---- safetensors ------------------------------------------------------- */

static void safetensors_tensor_by_name(void** state) {
  fixture_t* f = FIXTURE(state);
  /* Two tensors and metadata; "b" (2, 3) f32 after "a" (4,) i64. */
  int64_t a[4] = {5, -6, 7, 1LL << 40};
  float b[6] = {1, 2, 3, 4, 5, 6};
  unsigned char data[32 + 24];
  memcpy(data, a, 32);
  memcpy(data + 32, b, 24);
  char path[512];
  path_in(f, "two.safetensors", path, sizeof path);
  write_st(path,
           "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"I64\",\"shape\":[4],\"data_offsets\":[0,32]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[32,56]}}",
           data, sizeof data);
  const size_t header = 8 + strlen("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"I64\",\"shape\":[4],"
                                   "\"data_offsets\":[0,32]},\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[32,56]}}");
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_safetensors(f->rt, path, "b", NULL, &info, &file));
  assert_int_equal(info.dtype, SW_DTYPE_F32);
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.shape[0], 2);
  assert_int_equal(info.shape[1], 3);
  assert_int_equal(info.data_offset, header + 32);
  assert_int_equal(info.grid_shape[0], 1);
  assert_int_equal(info.grid_shape[1], 2);
  assert_int_equal(info.tile_shape[0], 3);
  assert_int_equal(info.tile_shape[1], 1);
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* view = file_view(full, &info);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      int64_t coord[2] = {r, c};
      double v;
      SW_OK_(sw_tensor_get(view, coord, 2, &v));
      assert_true(v == b[r * 3 + c]);
    }
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  /* A rank-1 tensor is one tile; NULL out_info is fine. */
  sw_carrier_t* ca = NULL;
  SW_OK_(sw_carrier_open_safetensors(f->rt, path, "a", NULL, NULL, &ca));
  int64_t back[4];
  SW_OK_(sw_carrier_read(ca, 0, 4, back));
  assert_memory_equal(back, a, sizeof a);
  sw_carrier_release(ca);
  SW_OK_(sw_carrier_open_safetensors(f->rt, path, "a", NULL, &info, &ca));
  assert_int_equal(info.grid_shape[0], 1);
  assert_int_equal(info.tile_shape[0], 4);
  assert_int_equal(info.permutation[0], 0);
  sw_carrier_release(ca);

  /* A missing name is VALUE naming it and the file; metadata is no tensor. */
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "c", NULL, &info, &ca), SW_ERROR_VALUE, "no tensor named 'c'");
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "c", NULL, &info, &ca), SW_ERROR_VALUE, path);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "__metadata__", NULL, &info, &ca), SW_ERROR_VALUE, "__metadata__");
}

/* Per-expert tensors, stored out of order with other tensors between them,
 * open as one carrier whose tile e is expert e. */
enum { XE = 4, XO = 6, XI = 10 };

static void write_per_expert(const char* path, size_t* out_header) {
  /* Storage order: expert 2, a bias, expert 0, expert 3, expert 1. */
  const int order[XE] = {2, 0, 3, 1};
  char json[2048];
  size_t at = 0, len = 0;
  const size_t bytes = XO * XI * sizeof(float);
  unsigned char* data = (unsigned char*)malloc(XE * bytes + 12 + XO * XI * 2);
  len += (size_t)snprintf(json + len, sizeof json - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int k = 0; k < XE; ++k) {
    const int e = order[k];
    float* w = (float*)(data + at);
    for (int o = 0; o < XO; ++o)
      for (int i = 0; i < XI; ++i) w[o * XI + i] = weight(e, o, i);
    len += (size_t)snprintf(json + len, sizeof json - len,
                            ",\"model.layers.0.block_sparse_moe.experts.%d.w1.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                            "\"data_offsets\":[%zu,%zu]}",
                            e, XO, XI, at, at + bytes);
    at += bytes;
    if (k == 0) {
      memset(data + at, 0x7f, 12);
      len += (size_t)snprintf(json + len, sizeof json - len,
                              ",\"model.layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[%zu,%zu]}", at,
                              at + 12);
      at += 12;
    }
  }
  len += (size_t)snprintf(json + len, sizeof json - len, ",\"other\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}}",
                          XO, XI, at, at + XO * XI * 2);
  memset(data + at, 0, XO * XI * 2);
  at += XO * XI * 2;
  write_st(path, json, data, at);
  if (out_header) *out_header = 8 + len;
  free(data);
}

static const char* expert_names[XE] = {
    "model.layers.0.block_sparse_moe.experts.0.w1.weight", "model.layers.0.block_sparse_moe.experts.1.w1.weight",
    "model.layers.0.block_sparse_moe.experts.2.w1.weight", "model.layers.0.block_sparse_moe.experts.3.w1.weight"};

static void check_experts(sw_carrier_t* tiled, const sw_file_tensor_info_t* info) {
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* view = file_view(full, info);
  for (int e = 0; e < XE; ++e)
    for (int o = 0; o < XO; ++o)
      for (int i = 0; i < XI; ++i) assert_true(get3(view, e, o, i) == weight(e, o, i));
  const int64_t chosen[2] = {3, 1};
  sw_tensor_t* compact = project_experts(tiled, full, chosen, 2);
  sw_tensor_t* experts = permuted(compact, info->permutation, 3);
  for (int s = 0; s < 2; ++s)
    for (int o = 0; o < XO; ++o)
      for (int i = 0; i < XI; ++i) assert_true(get3(experts, s, o, i) == weight(chosen[s], o, i));
  sw_tensor_release(experts);
  sw_tensor_release(compact);
  sw_tensor_release(view);
  sw_tensor_release(full);
}

static void safetensors_stack_per_expert(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  path_in(f, "mixtral.safetensors", path, sizeof path);
  size_t header = 0;
  write_per_expert(path, &header);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, expert_names, XE, NULL, &info, &file));
  assert_int_equal(info.rank, 3);
  assert_int_equal(info.shape[0], XE);
  assert_int_equal(info.shape[1], XO);
  assert_int_equal(info.shape[2], XI);
  assert_int_equal(info.segments, XE);
  assert_int_equal(info.data_bytes, XE * XO * XI * sizeof(float));
  /* Expert 0 is stored second, after expert 2 and the 12-byte bias. */
  assert_int_equal(info.data_offset, header + XO * XI * sizeof(float) + 12);
  assert_int_equal(info.grid_shape[2], XE);
  assert_int_equal(info.tile_shape[0], XI);
  assert_int_equal(info.tile_shape[1], XO);
  size_t size = 0;
  SW_OK_(sw_carrier_size(file, &size));
  assert_int_equal(size, XE * XO * XI);
  /* Slot reads across segment boundaries follow the given order. */
  float row[XI + 4];
  SW_OK_(sw_carrier_read(file, XO * XI - 2, XI + 4, row));
  assert_true(row[0] == weight(0, XO - 1, XI - 2) && row[1] == weight(0, XO - 1, XI - 1));
  assert_true(row[2] == weight(1, 0, 0) && row[3] == weight(1, 0, 1));
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  check_experts(tiled, &info);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  /* The order given is the tile order. */
  const char* reversed[2] = {expert_names[3], expert_names[0]};
  SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, reversed, 2, NULL, &info, &file));
  float first;
  SW_OK_(sw_carrier_read(file, 0, 1, &first));
  assert_true(first == weight(3, 0, 0));
  SW_OK_(sw_carrier_read(file, XO * XI, 1, &first));
  assert_true(first == weight(0, 0, 0));
  sw_carrier_release(file);
}

static void safetensors_stack_errors(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  path_in(f, "mixtral.safetensors", path, sizeof path);
  write_per_expert(path, NULL);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_file_tensor_info_t before = info;
  sw_carrier_t* file = (sw_carrier_t*)(uintptr_t)0x1;
  const char* missing[2] = {expert_names[0], "model.layers.0.block_sparse_moe.experts.9.w1.weight"};
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, missing, 2, NULL, &info, &file), SW_ERROR_VALUE,
           "no tensor named 'model.layers.0.block_sparse_moe.experts.9.w1.weight'");
  const char* twice[2] = {expert_names[1], expert_names[1]};
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, twice, 2, NULL, &info, &file), SW_ERROR_VALUE, "named twice");
  const char* dtypes[2] = {expert_names[0], "other"};
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, dtypes, 2, NULL, &info, &file), SW_ERROR_VALUE, "one dtype");
  const char* shapes[2] = {expert_names[0], "model.layers.0.bias"};
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, shapes, 2, NULL, &info, &file), SW_ERROR_VALUE, "one shape");
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, expert_names, 0, NULL, &info, &file), SW_ERROR_VALUE,
           "no tensor names");
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, NULL, 2, NULL, &info, &file), SW_ERROR_VALUE, "names");
  const char* null_name[2] = {expert_names[0], NULL};
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, null_name, 2, NULL, &info, &file), SW_ERROR_VALUE, "names[1]");
  /* Nothing was written on error. */
  assert_ptr_equal(file, (sw_carrier_t*)(uintptr_t)0x1);
  assert_memory_equal(&info, &before, sizeof info);
}

/* ---- raw tensors and segments ------------------------------------------ */

static void raw_tensor_and_segments(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  path_in(f, "raw.bin", path, sizeof path);
  int32_t data[3 + 2 * 3 * 4];
  for (int k = 0; k < 3 + 24; ++k) data[k] = k * 3 - 7;
  write_bytes(path, data, sizeof data);
  const int64_t shape[3] = {2, 3, 4};
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 12, shape, 3, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file));
  assert_int_equal(info.data_offset, 12);
  assert_int_equal(info.logical_shape[0], 4);
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* view = file_view(full, &info);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) assert_true(get3(view, a, b, c) == data[3 + (a * 3 + b) * 4 + c]);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  SW_OK_(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 12, shape, 3, SW_FILE_ORDER_FIRST_MODE_FASTEST, NULL,
                                    &info, &file));
  assert_int_equal(info.order, SW_FILE_ORDER_FIRST_MODE_FASTEST);
  assert_int_equal(info.logical_shape[0], 2);
  assert_int_equal(info.tile_shape[2], 1);
  sw_carrier_release(file);

  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 12, shape, 3, (sw_file_order_t)7, NULL, &info, &file),
           SW_ERROR_VALUE, "order 7");
  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 16, shape, 3, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file),
           SW_ERROR_VALUE, "passes the end");
  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_INVALID, 0, shape, 3, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file),
           SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 0, shape, 17, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file),
           SW_ERROR_VALUE, "SW_MAX_RANK");
  const int64_t empty[2] = {3, 0};
  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 0, empty, 2, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file),
           SW_ERROR_VALUE, "no elements");
  SW_FAILS(sw_carrier_open_raw_tensor(f->rt, path, SW_DTYPE_I32, 0, shape, 0, SW_FILE_ORDER_ROW_MAJOR, NULL, &info, &file),
           SW_ERROR_VALUE, "scalar");

  /* Segments: slots 0..3 are values 10..13, then 2..4, an empty segment, 20. */
  const sw_file_segment_t segs[4] = {{40, 4}, {8, 3}, {0, 0}, {80, 1}};
  SW_OK_(sw_carrier_open_file_segments(f->rt, SW_DTYPE_I32, path, segs, 4, NULL, &file));
  size_t size;
  SW_OK_(sw_carrier_size(file, &size));
  assert_int_equal(size, 8);
  int32_t got[8];
  SW_OK_(sw_carrier_read(file, 0, 8, got));
  const int32_t want[8] = {data[10], data[11], data[12], data[13], data[2], data[3], data[4], data[20]};
  assert_memory_equal(got, want, sizeof want);
  SW_OK_(sw_carrier_read(file, 3, 2, got));
  assert_memory_equal(got, want + 3, 2 * sizeof(int32_t));
  /* An asynchronous transfer (a move) crosses the segments too. */
  sw_layout_t* l = NULL;
  const int64_t eight = 8;
  SW_OK_(sw_layout_dense(&eight, 1, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(file, 0, l, &t));
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_I32, 0, &cpu));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, cpu, &a));
  SW_OK_(sw_await_wait(a, -1));
  SW_OK_(sw_carrier_read(cpu, 0, 8, got));
  assert_memory_equal(got, want, sizeof want);
  sw_await_release(a);
  sw_carrier_release(cpu);
  sw_tensor_release(t);
  sw_layout_release(l);
  sw_carrier_release(file);

  const sw_file_segment_t past[2] = {{0, 2}, {104, 2}};
  SW_FAILS(sw_carrier_open_file_segments(f->rt, SW_DTYPE_I32, path, past, 2, NULL, &file), SW_ERROR_VALUE, "segment 1");
  SW_FAILS(sw_carrier_open_file_segments(f->rt, SW_DTYPE_I32, path, NULL, 2, NULL, &file), SW_ERROR_VALUE, "segments");
  SW_FAILS(sw_carrier_open_file_segments(f->rt, SW_DTYPE_INVALID, path, segs, 4, NULL, &file), SW_ERROR_TYPE, NULL);
}

/* ---- direct I/O -------------------------------------------------------- */

static sw_file_io_stats_t io_stats(const sw_carrier_t* file) {
  sw_file_io_stats_t s;
  sw_file_io_stats_init(&s);
  SW_OK_(sw_testing_file_io_stats(file, &s));
  return s;
}

/* Larger experts, so that reads span several 4096-byte blocks and tile
 * buffers come 4096-aligned from the pool (64 KiB and up). */
enum { DE = 3, DO = 64, DI = 300 };

static void write_big_experts(const char* path, const char** names) {
  const size_t bytes = DO * DI * sizeof(float);
  unsigned char* data = (unsigned char*)malloc(DE * bytes);
  char json[1024];
  size_t len = 0;
  len += (size_t)snprintf(json, sizeof json, "{");
  for (int e = 0; e < DE; ++e) {
    float* w = (float*)(data + (size_t)e * bytes);
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i) w[o * DI + i] = weight(e, o, i);
    len += (size_t)snprintf(json + len, sizeof json - len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                            e ? "," : "", names[e], DO, DI, (size_t)e * bytes, (size_t)(e + 1) * bytes);
  }
  /* An odd header length: no tensor starts on a 4096-byte boundary. */
  len += (size_t)snprintf(json + len, sizeof json - len, "}   ");
  write_st(path, json, data, DE * bytes);
  free(data);
}

static void check_direct(fixture_t* f, const char* dir, bool expect_direct) {
  char path[512];
  snprintf(path, sizeof path, "%s/direct.safetensors", dir);
  const char* names[DE] = {"e0", "e1", "e2"};
  write_big_experts(path, names);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = true;
  d.chunk_bytes = 8192;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, names, DE, &d, &info, &file));
  sw_file_io_stats_t s = io_stats(file);
  if (expect_direct) assert_true(s.direct_open);
  /* A synchronous read through bounce buffers, across a segment boundary. */
  float* got = (float*)malloc(DE * DO * DI * sizeof(float));
  SW_OK_(sw_carrier_read(file, 5, DO * DI, got));
  for (int k = 0; k < DO * DI; ++k) {
    const int s0 = 5 + k, e = s0 / (DO * DI), r = s0 % (DO * DI);
    assert_true(got[k] == weight(e, r / DI, r % DI));
  }
  s = io_stats(file);
  if (s.direct_open) {
    assert_int_equal(s.bounce_bytes + s.direct_bytes, DO * DI * sizeof(float));
    assert_int_equal(s.buffered_bytes, 0);
  } else {
    assert_false(expect_direct);
    assert_int_equal(s.buffered_bytes, DO * DI * sizeof(float));
  }
  /* Asynchronous promotions of every expert (the library's transfers). */
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tile_set_t* all = NULL;
  int64_t coords[DE * 3];
  for (int e = 0; e < DE; ++e) {
    coords[3 * e] = 0;
    coords[3 * e + 1] = 0;
    coords[3 * e + 2] = e;
  }
  SW_OK_(sw_tile_set_create(coords, DE, 3, &all));
  SW_OK_(sw_tiled_promote(tiled, all));
  sw_tile_set_release(all);
  const sw_file_io_stats_t after = io_stats(file);
  const uint64_t moved = (after.bounce_bytes + after.direct_bytes + after.buffered_bytes) -
                         (s.bounce_bytes + s.direct_bytes + s.buffered_bytes);
  assert_int_equal(moved, DE * DO * DI * sizeof(float));
  if (after.direct_open) assert_int_equal(after.buffered_bytes, 0);
  if (after.direct_open) {
    /* Each tile buffer starts at its tensor's file offset modulo 4096 and
     * owns the blocks around it, so even the blocks holding a tensor's two
     * ends are read in place (padded into the buffer's own blocks; the last
     * tensor's end is the file's, read short): no bounce read, every byte
     * direct. */
    assert_int_equal(after.bounce_bytes, s.bounce_bytes);
    assert_int_equal(after.direct_bytes - s.direct_bytes, DE * DO * DI * sizeof(float));
  }
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  SW_OK_(sw_tensor_read(full, got, DE * DO * DI * sizeof(float)));
  for (int e = 0; e < DE; ++e)
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i) assert_true(got[(e * DO + o) * DI + i] == weight(e, o, i));
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  /* One tile over all three tensors: its two ends are read in place, the
   * blocks at the two boundaries inside it (where one tensor's bytes meet the
   * next one's in the tile buffer) through bounce reads. */
  SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, names, DE, &d, &info, &file));
  const sw_file_io_stats_t s2 = io_stats(file);
  const int64_t one_grid[3] = {1, 1, 1}, one_tile[3] = {DI, DO, DE};
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
  SW_OK_(sw_tiled_create(cpu, file, one_grid, one_tile, 3, NULL, &tiled));
  sw_carrier_release(cpu);
  const int64_t tile0[3] = {0, 0, 0};
  SW_OK_(sw_tile_set_create(tile0, 1, 3, &all));
  SW_OK_(sw_tiled_promote(tiled, all));
  sw_tile_set_release(all);
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  memset(got, 0, DE * DO * DI * sizeof(float));
  SW_OK_(sw_tensor_read(full, got, DE * DO * DI * sizeof(float)));
  for (int e = 0; e < DE; ++e)
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i) assert_true(got[(e * DO + o) * DI + i] == weight(e, o, i));
  const sw_file_io_stats_t s3 = io_stats(file);
  assert_int_equal((s3.bounce_bytes + s3.direct_bytes + s3.buffered_bytes) -
                       (s2.bounce_bytes + s2.direct_bytes + s2.buffered_bytes),
                   DE * DO * DI * sizeof(float));
  if (s3.direct_open) {
    const uint64_t bounced = s3.bounce_bytes - s2.bounce_bytes;
    assert_true(bounced > 0);
    assert_true(bounced < (DE - 1) * 2 * 4096);
  }
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);

  /* An aligned region read into aligned memory goes in place. */
  void* aligned = NULL;
  assert_int_equal(posix_memalign(&aligned, 4096, 8192), 0);
  SW_OK_(sw_carrier_open_file(f->rt, SW_DTYPE_U8, path, 4096, 8192, &d, &file));
  SW_OK_(sw_carrier_read(file, 0, 8192, aligned));
  s = io_stats(file);
  if (expect_direct) assert_int_equal(s.direct_bytes, 8192);
  assert_int_equal(s.direct_bytes + s.bounce_bytes + s.buffered_bytes, 8192);
  sw_carrier_release(file);
  free(aligned);
  free(got);
  unlink(path);
}

/* On this machine's ext4 (the test directory), direct I/O opens: a read of
 * an unaligned tensor into unaligned memory goes through O_DIRECT bounce
 * reads, a promotion of its tiles in place, their unaligned ends too. */
static void direct_io_bounce_reads(void** state) {
  fixture_t* f = FIXTURE(state);
  struct statfs fs;
  assert_int_equal(statfs(f->dir, &fs), 0);
  const bool ext4 = fs.f_type == 0xEF53;
  if (!ext4) fprintf(stderr, "note: %s is not ext4; direct I/O may fall back to buffered reads\n", f->dir);
  check_direct(f, f->dir, ext4);
}

/* Direct reads over many geometries: a tensor stack after a head tensor of
 * any size (so the stack starts at any file offset modulo 4096) and before a
 * tail tensor of any size (so the last tile ends at the file's end or
 * short of it), tensors from a few hundred bytes to a few hundred KiB (tile
 * buffers below and above the 64 KiB from which they own their blocks),
 * tiles of one or several tensors, and any chunk size. Every promotion,
 * again after an eviction (pooled buffers come back with stale bytes
 * around them) and as a synchronous read at random offsets, gives the
 * file's values; on ext4 no byte goes through the page cache. */
static void direct_io_random_geometries(void** state) {
  fixture_t* f = FIXTURE(state);
  struct statfs fs;
  assert_int_equal(statfs(f->dir, &fs), 0);
  const bool ext4 = fs.f_type == 0xEF53;
  char path[512];
  path_in(f, "geometry.safetensors", path, sizeof path);
  static const size_t kChunks[] = {1000, 4096, 5000, 8192, 12288, 65536, 1 << 20};
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int c = 0; c < 48; ++c) {
    const int E = 2 + (int)(sw_test_random(&rng) % 5);
    const int64_t R = 1 + (int64_t)(sw_test_random(&rng) % 80);
    const int64_t C = c % 3 == 0 ? 1 + (int64_t)(sw_test_random(&rng) % 400) : 200 + (int64_t)(sw_test_random(&rng) % 600);
    /* Most files keep the stack 4-byte aligned, as real checkpoints do (the
     * tile buffers can then start at the file's phase and be read in place);
     * every third one does not (bounce reads only). */
    const bool aligned = c % 3 != 2;
    const size_t head = (size_t)(sw_test_random(&rng) % 9000) & (aligned ? ~(size_t)3 : ~(size_t)0);
    const size_t tail = (size_t)(sw_test_random(&rng) % 9000);
    const size_t per = (size_t)(R * C) * sizeof(float), stack = per * (size_t)E;
    const int group = (E % 2 == 0 && sw_test_random(&rng) % 3 == 0) ? 2 : sw_test_random(&rng) % 4 == 0 ? E : 1;
    const size_t chunk = kChunks[sw_test_random(&rng) % 7];
    const uint32_t in_flight = 1 + (uint32_t)(sw_test_random(&rng) % 8);
    char names[8][16];
    const char* name_ptrs[8];
    char json[2048];
    size_t len = (size_t)snprintf(json, sizeof json, "{\"head\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}",
                                  head, head);
    for (int e = 0; e < E; ++e) {
      snprintf(names[e], sizeof names[e], "x%d", e);
      name_ptrs[e] = names[e];
      len += (size_t)snprintf(json + len, sizeof json - len,
                              ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}", names[e],
                              (long long)R, (long long)C, head + (size_t)e * per, head + (size_t)(e + 1) * per);
    }
    len += (size_t)snprintf(json + len, sizeof json - len,
                            ",\"tail\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}}", tail,
                            head + stack, head + stack + tail);
    size_t spaces = (size_t)(sw_test_random(&rng) % 64);
    if (aligned) spaces += (4 - (len + spaces) % 4) % 4; /* 8 + len: the data's offset, a multiple of 4 */
    for (size_t i = 0; i < spaces && len + 1 < sizeof json; ++i) json[len++] = ' ';
    json[len] = '\0';
    unsigned char* data = (unsigned char*)malloc(head + stack + tail);
    memset(data, 0xa5, head);
    memset(data + head + stack, 0x5a, tail);
    float* values = (float*)malloc(stack);
    for (size_t i = 0; i < stack / sizeof(float); ++i) values[i] = (float)i + 0.25f;
    memcpy(data + head, values, stack);
    write_st(path, json, data, head + stack + tail);
    free(data);

    sw_file_carrier_desc_t d;
    sw_file_carrier_desc_init(&d);
    d.direct_io = true;
    d.chunk_bytes = chunk;
    d.requests_in_flight = in_flight;
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* file = NULL;
    SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, name_ptrs, (size_t)E, &d, &info, &file));
    const int64_t grid[3] = {1, 1, E / group}, tile[3] = {C, R, group};
    sw_carrier_t *cpu = NULL, *tiled = NULL;
    SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
    SW_OK_(sw_tiled_create(cpu, file, grid, tile, 3, NULL, &tiled));
    sw_carrier_release(cpu);
    int64_t coords[8 * 3];
    for (int t = 0; t < E / group; ++t) {
      coords[3 * t] = 0;
      coords[3 * t + 1] = 0;
      coords[3 * t + 2] = t;
    }
    sw_tile_set_t* all = NULL;
    SW_OK_(sw_tile_set_create(coords, (size_t)(E / group), 3, &all));
    float* got = (float*)malloc(stack + sizeof(float));
    /* Tiles of one tensor each, 64 KiB and up, in a 4-byte-aligned stack:
     * each promotion reads every byte in place, its two ends padded. */
    const bool in_place = ext4 && aligned && group == 1 && per >= 65536;
    for (int round = 0; round < 2; ++round) {
      const sw_file_io_stats_t before = io_stats(file);
      SW_OK_(sw_tiled_promote(tiled, all));
      const sw_file_io_stats_t after = io_stats(file);
      assert_int_equal((after.direct_bytes + after.bounce_bytes + after.buffered_bytes) -
                           (before.direct_bytes + before.bounce_bytes + before.buffered_bytes),
                       stack);
      if (in_place) assert_int_equal(after.direct_bytes - before.direct_bytes, stack);
      sw_tensor_t* full = NULL;
      SW_OK_(sw_tiled_full_tensor(tiled, &full));
      memset(got, 0, stack);
      SW_OK_(sw_tensor_read(full, got, stack));
      sw_tensor_release(full);
      if (memcmp(got, values, stack) != 0) {
        size_t i = 0;
        while (got[i] == values[i]) ++i;
        fail_msg("case %d (E %d, %lldx%lld, head %zu, tail %zu, tile of %d, chunk %zu, %u in flight), round %d: "
                 "element %zu is %g, not %g", c, E, (long long)R, (long long)C, head, tail, group, chunk, in_flight,
                 round, i, (double)got[i], (double)values[i]);
      }
      SW_OK_(sw_tiled_evict(tiled, all));
    }
    /* Synchronous reads at random element ranges into unaligned memory. */
    for (int r = 0; r < 4; ++r) {
      const size_t n = stack / sizeof(float), at = (size_t)(sw_test_random(&rng) % n);
      const size_t count = 1 + (size_t)(sw_test_random(&rng) % (n - at));
      float* into = (float*)((unsigned char*)got + sizeof(float) * (r % 2));
      SW_OK_(sw_carrier_read(file, at, count, into));
      assert_memory_equal(into, values + at, count * sizeof(float));
    }
    const sw_file_io_stats_t s = io_stats(file);
    if (ext4) {
      assert_true(s.direct_open);
      assert_int_equal(s.buffered_bytes, 0);
    }
    sw_tile_set_release(all);
    sw_carrier_release(tiled);
    sw_carrier_release(file);
    free(got);
    free(values);
    unlink(path);
  }
}

/* tmpfs: O_DIRECT opens on recent kernels and falls back to buffered I/O
 * where it is refused; the values are the same either way. */
static void direct_io_tmpfs(void** state) {
  fixture_t* f = FIXTURE(state);
  struct statfs fs;
  if (statfs("/dev/shm", &fs) != 0 || fs.f_type != 0x01021994) SW_SKIP("no tmpfs at /dev/shm");
  char dir[] = "/dev/shm/sw_model_test_XXXXXX";
  if (!mkdtemp(dir)) SW_SKIP("cannot create a directory in /dev/shm");
  check_direct(f, dir, false);
  remove_all(dir);
  rmdir(dir);
}

/* A file system that refuses O_DIRECT (injected: this machine's all accept
 * it), at open or at the first transfer: buffered I/O, the same values. */
static void direct_io_falls_back(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  path_in(f, "direct.safetensors", path, sizeof path);
  const char* names[DE] = {"e0", "e1", "e2"};
  write_big_experts(path, names);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = true;
  float* got = (float*)malloc(DE * DO * DI * sizeof(float));
  for (uint64_t nth = 1; nth <= 2; ++nth) {
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_DIRECT_IO, nth));
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* file = NULL;
    SW_OK_(sw_carrier_open_safetensors_stack(f->rt, path, names, DE, &d, &info, &file));
    sw_file_io_stats_t s = io_stats(file);
    if (nth == 1) assert_false(s.direct_open);
    sw_carrier_t* tiled = tiled_over(f, file, &info);
    sw_tensor_t* full = NULL;
    SW_OK_(sw_tiled_full_tensor(tiled, &full));
    SW_OK_(sw_tensor_read(full, got, DE * DO * DI * sizeof(float)));
    for (int e = 0; e < DE; ++e)
      for (int o = 0; o < DO; ++o)
        for (int i = 0; i < DI; ++i) assert_true(got[(e * DO + o) * DI + i] == weight(e, o, i));
    s = io_stats(file);
    assert_false(s.direct_open);
    assert_int_equal(s.buffered_bytes, DE * DO * DI * sizeof(float));
    assert_int_equal(s.direct_bytes + s.bounce_bytes, 0);
    sw_tensor_release(full);
    sw_carrier_release(tiled);
    sw_carrier_release(file);
  }
  free(got);
  SW_FAILS(sw_testing_inject_fault(f->rt, (sw_fault_kind_t)10, 1), SW_ERROR_VALUE, "unknown fault kind 10");
}

/* ---- header reads are fault points -------------------------------------- */

static int open_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

/* Opens `path` with opener `which` (0 npy, 1 safetensors, 2 stack). */
static sw_error_t* open_with(const fixture_t* f, int which, const char* path, sw_file_tensor_info_t* info,
                             sw_carrier_t** out) {
  static const char* const names[2] = {"b", "a"};
  if (which == 0) return sw_carrier_open_npy(f->rt, path, NULL, info, out);
  if (which == 1) return sw_carrier_open_safetensors(f->rt, path, "a", NULL, info, out);
  return sw_carrier_open_safetensors_stack(f->rt, path, names, 2, NULL, info, out);
}

/* Each opener reads its header in two requests (the fixed prefix, then the
 * header), each an SW_FAULT_READ operation: an injected failure of either
 * fails the open IO, naming the injection and the file, with no carrier
 * made, the info untouched and no file descriptor left open; the next open
 * succeeds. */
static void header_reads_are_fault_points(void** state) {
  fixture_t* f = FIXTURE(state);
  char npy[512], st[512];
  path_in(f, "faults.npy", npy, sizeof npy);
  path_in(f, "faults.safetensors", st, sizeof st);
  const float v[4] = {1, 2, 3, 4};
  write_npy(npy, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", v, sizeof v);
  write_st(st,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
           v, sizeof v);
  for (int which = 0; which < 3; ++which) {
    const char* path = which == 0 ? npy : st;
    /* Two reads reached, none failed. */
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, UINT64_MAX));
    sw_carrier_t* c = NULL;
    SW_OK_(open_with(f, which, path, NULL, &c));
    uint64_t reached = 0, injected = 0, injected_before = 0;
    SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_READ, &reached, &injected_before));
    assert_int_equal(reached, 2);
    sw_carrier_release(c);
    for (uint64_t nth = 1; nth <= 2; ++nth) {
      sw_file_tensor_info_t info, untouched;
      sw_file_tensor_info_init(&info);
      info.rank = 99;
      untouched = info;
      c = NULL;
      const int fds = open_fds();
      SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, nth));
      sw_error_t* e = open_with(f, which, path, &info, &c);
      if (!e) fail_msg("opener %d, read %llu failed: the open succeeded", which, (unsigned long long)nth);
      assert_int_equal(sw_error_code(e), SW_ERROR_IO);
      assert_non_null(strstr(sw_error_message(e), "injected read failure"));
      assert_non_null(strstr(sw_error_message(e), path));
      sw_error_free(e);
      assert_null(c);
      assert_memory_equal(&info, &untouched, sizeof info);
      assert_int_equal(open_fds(), fds);
      SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_READ, NULL, &injected));
      assert_int_equal(injected, injected_before + nth);
      SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, 0));
      SW_OK_(open_with(f, which, path, &info, &c));
      assert_int_equal(info.rank, which == 0 ? 2 : which == 1 ? 1 : 2);
      sw_carrier_release(c);
    }
  }
  unlink(npy);
  unlink(st);
}

/* ---- a stack over several files (a sharded checkpoint) ------------------ */

/* SE experts of (DO, DI) f32 weights (75 KiB each: tile buffers that own
 * their blocks) spread over three files, each after a head tensor (so no
 * tensor starts on a 4096-byte boundary; all on 4-byte ones, as in real
 * checkpoints) and stored out of order:
 * shard 0 holds experts 4 and 0 and a bias, shard 1 experts 2 and 5 and a
 * BF16 tensor "other" of their shape, shard 2 experts 1 and 3. Every shard
 * also holds a tensor "shared" of the experts' shape, all -(s + 1): one name
 * in several files. */
enum { SE = 6 };
static const int kShardOf[SE] = {0, 2, 1, 2, 0, 1};
static const int kShardExperts[3][2] = {{4, 0}, {2, 5}, {1, 3}};
static const char* shard_names[SE] = {"model.layers.0.block_sparse_moe.experts.0.w1.weight",
                                      "model.layers.0.block_sparse_moe.experts.1.w1.weight",
                                      "model.layers.0.block_sparse_moe.experts.2.w1.weight",
                                      "model.layers.0.block_sparse_moe.experts.3.w1.weight",
                                      "model.layers.0.block_sparse_moe.experts.4.w1.weight",
                                      "model.layers.0.block_sparse_moe.experts.5.w1.weight"};

/* Writes the three shards into paths[s]; offsets[e] gets expert e's byte
 * offset in its file. */
static void write_shards(const fixture_t* f, char paths[3][512], uint64_t offsets[SE]) {
  const size_t bytes = DO * DI * sizeof(float);
  for (int s = 0; s < 3; ++s) {
    char name[64];
    snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", s + 1);
    path_in(f, name, paths[s], 512);
    const size_t head = 100 + 36 * (size_t)s;
    unsigned char* data = (unsigned char*)malloc(head + 4 * bytes);
    char json[1024];
    size_t len = (size_t)snprintf(json, sizeof json,
                                  "{\"head\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}", head, head);
    memset(data, 0xa5, head);
    size_t at = head, rel[2];
    for (int k = 0; k < 2; ++k) {
      const int e = kShardExperts[s][k];
      float* w = (float*)(data + at);
      for (int o = 0; o < DO; ++o)
        for (int i = 0; i < DI; ++i) w[o * DI + i] = weight(e, o, i);
      len += (size_t)snprintf(json + len, sizeof json - len,
                              ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                              shard_names[e], DO, DI, at, at + bytes);
      rel[k] = at;
      at += bytes;
    }
    float* shared = (float*)(data + at);
    for (int k = 0; k < DO * DI; ++k) shared[k] = (float)-(s + 1);
    len += (size_t)snprintf(json + len, sizeof json - len,
                            ",\"shared\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", DO, DI, at,
                            at + bytes);
    at += bytes;
    if (s == 0) {
      memset(data + at, 0x7f, 12);
      len += (size_t)snprintf(json + len, sizeof json - len,
                              ",\"model.layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[%zu,%zu]}",
                              at, at + 12);
      at += 12;
    } else if (s == 1) {
      memset(data + at, 0, bytes / 2);
      len += (size_t)snprintf(json + len, sizeof json - len,
                              ",\"other\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", DO, DI,
                              at, at + bytes / 2);
      at += bytes / 2;
    }
    len += (size_t)snprintf(json + len, sizeof json - len, "}");
    while ((8 + len) % 8) json[len++] = ' '; /* the data 8-byte aligned */
    json[len] = '\0';
    write_st(paths[s], json, data, at);
    for (int k = 0; k < 2; ++k) offsets[kShardExperts[s][k]] = 8 + len + rel[k];
    free(data);
  }
}

/* The open descriptors come back to `want`: a released carrier closes its
 * files once the loop thread let go of its last transfer, soon after. */
static void expect_fds_back_to(int want) {
  for (int waited = 0; open_fds() != want && waited < 10000; ++waited) usleep(1000);
  assert_int_equal(open_fds(), want);
}

/* A stack of the SE experts in expert order, each from its shard (so the
 * names come in no file's order and the files interleave), with or without
 * direct I/O: the info of a one-file stack, one descriptor per file (and
 * one O_DIRECT descriptor each), reads across file boundaries, and every
 * value exact through a TiledEvictable's promotion and projection. */
static void check_shard_stack(fixture_t* f, bool direct, bool expect_direct) {
  char paths[3][512], respelled[600];
  uint64_t offsets[SE];
  write_shards(f, paths, offsets);
  /* Expert 3 names its shard by another spelling: still one file. */
  snprintf(respelled, sizeof respelled, "%s/./model-00003-of-00003.safetensors", f->dir);
  const char* entry_paths[SE];
  for (int e = 0; e < SE; ++e) entry_paths[e] = e == 3 ? respelled : paths[kShardOf[e]];
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = direct;
  d.chunk_bytes = 8192;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  const int fds = open_fds();
  SW_OK_(sw_carrier_open_safetensors_stack_files(f->rt, entry_paths, shard_names, SE, &d, &info, &file));
  sw_file_io_stats_t s = io_stats(file);
  if (expect_direct) assert_true(s.direct_open);
  if (!direct) assert_false(s.direct_open);
  /* Three files, each opened once: three descriptors, six with O_DIRECT. */
  if (!direct) assert_int_equal(open_fds(), fds + 3);
  if (s.direct_open) assert_int_equal(open_fds(), fds + 6);
  assert_int_equal(info.dtype, SW_DTYPE_F32);
  assert_int_equal(info.rank, 3);
  assert_int_equal(info.order, SW_FILE_ORDER_ROW_MAJOR);
  assert_int_equal(info.segments, SE);
  assert_int_equal(info.data_offset, offsets[0]);
  assert_int_equal(info.data_bytes, SE * DO * DI * sizeof(float));
  const int64_t shape[3] = {SE, DO, DI}, logical[3] = {DI, DO, SE}, grid[3] = {1, 1, SE}, tile[3] = {DI, DO, 1};
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(info.shape[k], shape[k]);
    assert_int_equal(info.logical_shape[k], logical[k]);
    assert_int_equal(info.grid_shape[k], grid[k]);
    assert_int_equal(info.tile_shape[k], tile[k]);
    assert_int_equal(info.permutation[k], 2 - k);
  }
  bool read_only = false;
  SW_OK_(sw_carrier_is_read_only(file, &read_only));
  assert_true(read_only);

  /* A synchronous read from the end of expert 0 (shard 0) through expert 1
   * (shard 2) into expert 2 (shard 1), into unaligned memory. */
  const size_t n = DO * DI + 10, at = DO * DI - 5;
  float* got = (float*)malloc((SE * DO * DI + 1) * sizeof(float));
  float* into = got + 1;
  SW_OK_(sw_carrier_read(file, at, n, into));
  for (size_t k = 0; k < n; ++k) {
    const size_t slot = at + k, e = slot / (DO * DI), r = slot % (DO * DI);
    assert_true(into[k] == weight((int64_t)e, (int64_t)(r / DI), (int64_t)(r % DI)));
  }

  /* Promote every expert: each tile read from its own file. */
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  int64_t coords[SE * 3];
  for (int e = 0; e < SE; ++e) {
    coords[3 * e] = 0;
    coords[3 * e + 1] = 0;
    coords[3 * e + 2] = e;
  }
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tile_set_create(coords, SE, 3, &all));
  const sw_file_io_stats_t before = io_stats(file);
  SW_OK_(sw_tiled_promote(tiled, all));
  sw_tile_set_release(all);
  s = io_stats(file);
  assert_int_equal((s.direct_bytes + s.bounce_bytes + s.buffered_bytes) -
                       (before.direct_bytes + before.bounce_bytes + before.buffered_bytes),
                   SE * DO * DI * sizeof(float));
  if (s.direct_open) {
    /* Tiles of 75 KiB at each tensor's phase: all read in place. */
    assert_int_equal(s.buffered_bytes, 0);
    assert_int_equal(s.direct_bytes - before.direct_bytes, SE * DO * DI * sizeof(float));
  } else {
    assert_int_equal(s.direct_bytes + s.bounce_bytes, 0);
  }
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  memset(got, 0, SE * DO * DI * sizeof(float));
  SW_OK_(sw_tensor_read(full, got, SE * DO * DI * sizeof(float)));
  for (int e = 0; e < SE; ++e)
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i)
        if (got[(e * DO + o) * DI + i] != weight(e, o, i))
          fail_msg("expert %d [%d, %d] is %g, not %g", e, o, i, (double)got[(e * DO + o) * DI + i],
                   (double)weight(e, o, i));
  sw_tensor_t* view = file_view(full, &info);
  assert_true(get3(view, 3, 63, 299) == weight(3, 63, 299));
  assert_true(get3(view, 4, 0, 0) == weight(4, 0, 0));

  /* Evicted, then projected: experts 5, 1 and 3, (I, O, 3) as compact
   * blocks, (3, O, I) once permuted. */
  SW_OK_(sw_tile_set_create(coords, SE, 3, &all));
  SW_OK_(sw_tiled_evict(tiled, all));
  sw_tile_set_release(all);
  const int64_t chosen[3] = {5, 1, 3};
  sw_tensor_t* compact = project_experts(tiled, full, chosen, 3);
  memset(got, 0, 3 * DO * DI * sizeof(float));
  SW_OK_(sw_tensor_read(compact, got, 3 * DO * DI * sizeof(float)));
  for (int k = 0; k < 3; ++k)
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i) assert_true(got[(k * DO + o) * DI + i] == weight(chosen[k], o, i));
  sw_tensor_t* experts = permuted(compact, info.permutation, 3);
  for (int k = 0; k < 3; ++k) {
    assert_true(get3(experts, k, 0, 0) == weight(chosen[k], 0, 0));
    assert_true(get3(experts, k, DO - 1, DI - 1) == weight(chosen[k], DO - 1, DI - 1));
  }
  s = io_stats(file);
  if (expect_direct) {
    assert_true(s.direct_open);
    assert_int_equal(s.buffered_bytes, 0);
  }
  sw_tensor_release(experts);
  sw_tensor_release(compact);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
  expect_fds_back_to(fds);

  /* One name in several files is no repeat: tile s is shard s's "shared". */
  const char* shared[3] = {"shared", "shared", "shared"};
  const char* shared_paths[3] = {paths[2], paths[0], paths[1]};
  SW_OK_(sw_carrier_open_safetensors_stack_files(f->rt, shared_paths, shared, 3, &d, &info, &file));
  assert_int_equal(info.shape[0], 3);
  SW_OK_(sw_carrier_read(file, 0, 3 * DO * DI, got));
  for (int k = 0; k < 3 * DO * DI; ++k) assert_true(got[k] == (float)(k < DO * DI ? -3 : k < 2 * DO * DI ? -1 : -2));
  sw_carrier_release(file);
  free(got);
  for (int k = 0; k < 3; ++k) unlink(paths[k]);
}

static bool dir_is_ext4(const char* dir) {
  struct statfs fs;
  assert_int_equal(statfs(dir, &fs), 0);
  return fs.f_type == 0xEF53;
}

static void safetensors_stack_files_buffered(void** state) { check_shard_stack(FIXTURE(state), false, false); }

static void safetensors_stack_files_direct(void** state) {
  fixture_t* f = FIXTURE(state);
  check_shard_stack(f, true, dir_is_ext4(f->dir));
}

/* Each file has its own O_DIRECT state: a refusal for the second file
 * opened (shard 2, experts 1 and 3) makes that file buffered and leaves the
 * others direct, with the same values. */
static void safetensors_stack_files_direct_per_file(void** state) {
  fixture_t* f = FIXTURE(state);
  if (!dir_is_ext4(f->dir)) SW_SKIP("the test directory is not ext4; O_DIRECT may be refused anyway");
  char paths[3][512];
  uint64_t offsets[SE];
  write_shards(f, paths, offsets);
  const char* entry_paths[SE];
  for (int e = 0; e < SE; ++e) entry_paths[e] = paths[kShardOf[e]];
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = true;
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_DIRECT_IO, 2));
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_safetensors_stack_files(f->rt, entry_paths, shard_names, SE, &d, &info, &file));
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_DIRECT_IO, 0));
  assert_false(io_stats(file).direct_open);
  sw_carrier_t* tiled = tiled_over(f, file, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  float* got = (float*)malloc(SE * DO * DI * sizeof(float));
  SW_OK_(sw_tensor_read(full, got, SE * DO * DI * sizeof(float)));
  for (int e = 0; e < SE; ++e)
    for (int o = 0; o < DO; ++o)
      for (int i = 0; i < DI; ++i) assert_true(got[(e * DO + o) * DI + i] == weight(e, o, i));
  const sw_file_io_stats_t s = io_stats(file);
  assert_int_equal(s.buffered_bytes, 2 * DO * DI * sizeof(float));
  assert_int_equal(s.direct_bytes + s.bounce_bytes, 4 * DO * DI * sizeof(float));
  free(got);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(file);
  for (int k = 0; k < 3; ++k) unlink(paths[k]);
}

/* Every error names the file (and the tensor) at fault, writes nothing and
 * leaves no file open. */
static void safetensors_stack_files_errors(void** state) {
  fixture_t* f = FIXTURE(state);
  char paths[3][512], missing[512], bad[512], respelled[600], expected[1400];
  uint64_t offsets[SE];
  write_shards(f, paths, offsets);
  path_in(f, "model-00004-of-00003.safetensors", missing, sizeof missing);
  path_in(f, "bad.safetensors", bad, sizeof bad);
  write_bytes(bad, "\x00\x10\x00\x00\x00\x00\x00\x00{}", 10);
  snprintf(respelled, sizeof respelled, "%s/./model-00003-of-00003.safetensors", f->dir);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  info.rank = 99;
  const sw_file_tensor_info_t before = info;
  sw_carrier_t* file = (sw_carrier_t*)(uintptr_t)0x1;
  const int fds = open_fds();
  const char* two_paths[2] = {paths[0], paths[2]};
  const char* two_names[2] = {shard_names[0], shard_names[1]};

  /* Bad arguments. */
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, NULL, two_names, 2, NULL, &info, &file), SW_ERROR_VALUE,
           "paths must not be NULL");
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, two_paths, NULL, 2, NULL, &info, &file), SW_ERROR_VALUE,
           "names must not be NULL");
  const char* null_path[2] = {paths[0], NULL};
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, null_path, two_names, 2, NULL, &info, &file), SW_ERROR_VALUE,
           "paths[1]");
  const char* null_name[2] = {shard_names[0], NULL};
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, two_paths, null_name, 2, NULL, &info, &file), SW_ERROR_VALUE,
           "names[1]");
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, two_paths, two_names, 0, NULL, &info, &file), SW_ERROR_VALUE,
           "no tensor names given");
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, NULL, NULL, 0, NULL, &info, &file), SW_ERROR_VALUE,
           "no tensor names given");
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, two_paths, two_names, 2, NULL, &info, NULL), SW_ERROR_VALUE,
           "out_carrier");
  SW_FAILS(sw_carrier_open_safetensors_stack_files(NULL, two_paths, two_names, 2, NULL, &info, &file), SW_ERROR_TYPE,
           "runtime");

  /* A name its file lacks (expert 4 lies in shard 0, not shard 2). */
  const char* lacks_paths[3] = {paths[0], paths[1], paths[2]};
  const char* lacks_names[3] = {shard_names[0], shard_names[2], shard_names[4]};
  snprintf(expected, sizeof expected, "safetensors file '%s' holds no tensor named '%s'", paths[2], shard_names[4]);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, lacks_paths, lacks_names, 3, NULL, &info, &file),
           SW_ERROR_VALUE, expected);

  /* Another dtype, another shape, each named with its file and the first
   * tensor's. */
  const char* dtype_paths[2] = {paths[0], paths[1]};
  const char* dtype_names[2] = {shard_names[0], "other"};
  snprintf(expected, sizeof expected,
           "tensor 'other' of safetensors file '%s' is BF16, but '%s' of safetensors file '%s' is F32: one carrier "
           "holds one dtype",
           paths[1], shard_names[0], paths[0]);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, dtype_paths, dtype_names, 2, NULL, &info, &file),
           SW_ERROR_VALUE, expected);
  const char* shape_paths[3] = {paths[2], paths[1], paths[0]};
  const char* shape_names[3] = {shard_names[1], shard_names[5], "model.layers.0.bias"};
  snprintf(expected, sizeof expected,
           "tensor 'model.layers.0.bias' of safetensors file '%s' has shape (3,), but '%s' of safetensors file '%s' "
           "has (%d, %d): stacked tensors share one shape",
           paths[0], shard_names[1], paths[2], DO, DI);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, shape_paths, shape_names, 3, NULL, &info, &file),
           SW_ERROR_VALUE, expected);

  /* The same tensor of the same file twice, by one path or two spellings. */
  const char* twice_paths[3] = {paths[2], paths[1], paths[2]};
  const char* twice_names[3] = {shard_names[1], shard_names[2], shard_names[1]};
  snprintf(expected, sizeof expected, "tensor '%s' is named twice in the list for safetensors file '%s'",
           shard_names[1], paths[2]);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, twice_paths, twice_names, 3, NULL, &info, &file),
           SW_ERROR_VALUE, expected);
  twice_paths[2] = respelled;
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, twice_paths, twice_names, 3, NULL, &info, &file),
           SW_ERROR_VALUE, expected);

  /* A file that cannot be opened, after files that could: IO naming it. */
  const char* io_paths[3] = {paths[0], paths[1], missing};
  const char* io_names[3] = {shard_names[0], shard_names[2], shard_names[3]};
  snprintf(expected, sizeof expected, "cannot open '%s': No such file or directory", missing);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, io_paths, io_names, 3, NULL, &info, &file), SW_ERROR_IO,
           expected);
  io_paths[2] = f->dir;
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, io_paths, io_names, 3, NULL, &info, &file), SW_ERROR_IO,
           f->dir);

  /* A bad header: DATA_CORRUPT naming the file. */
  const char* bad_paths[3] = {paths[0], bad, paths[1]};
  const char* bad_names[3] = {shard_names[0], shard_names[3], shard_names[2]};
  snprintf(expected, sizeof expected, "'%s' is not a safetensors file: header length: 4096 bytes passes the end", bad);
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, bad_paths, bad_names, 3, NULL, &info, &file),
           SW_ERROR_DATA_CORRUPT, expected);

  /* The same failures with direct I/O, and a header read failing in any
   * file: no descriptor left either. */
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = true;
  SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, io_paths, io_names, 3, &d, &info, &file), SW_ERROR_IO,
           f->dir);
  const char* good_paths[3] = {paths[0], paths[2], paths[1]};
  for (uint64_t nth = 1; nth <= 4; ++nth) { /* two files, two header reads each */
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, nth));
    SW_FAILS(sw_carrier_open_safetensors_stack_files(f->rt, good_paths, two_names, 2, &d, &info, &file), SW_ERROR_IO,
             nth <= 2 ? paths[0] : paths[2]);
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, 0));
  }

  /* Nothing written, nothing left open. */
  assert_ptr_equal(file, (sw_carrier_t*)(uintptr_t)0x1);
  assert_memory_equal(&info, &before, sizeof info);
  assert_int_equal(open_fds(), fds);
  /* The same entries, fixed, open. */
  SW_OK_(sw_carrier_open_safetensors_stack_files(f->rt, two_paths, two_names, 2, &d, &info, &file));
  assert_int_equal(info.segments, 2);
  sw_carrier_release(file);
  expect_fds_back_to(fds);
  for (int k = 0; k < 3; ++k) unlink(paths[k]);
  unlink(bad);
}

/* ---- errors through the openers ---------------------------------------- */

static void opener_errors(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512], missing[512];
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* c = NULL;
  path_in(f, "missing.npy", missing, sizeof missing);
  SW_FAILS(sw_carrier_open_npy(f->rt, missing, NULL, &info, &c), SW_ERROR_IO, missing);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, missing, "x", NULL, &info, &c), SW_ERROR_IO, "No such file");
  SW_FAILS(sw_carrier_open_npy(f->rt, f->dir, NULL, &info, &c), SW_ERROR_IO, f->dir);

  /* Bad content: DATA_CORRUPT naming the file and the field. */
  path_in(f, "bad.npy", path, sizeof path);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", NULL, 0);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, path);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "shape: negative dimension -3");
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "abcd", 4);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "data: truncated");
  write_npy(path, "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", "abcd", 4);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_UNSUPPORTED, "'<i2'");
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "abcd", 4);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_VALUE, "scalar");
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", NULL, 0);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_VALUE, "no elements");
  write_bytes(path, "\x93NUMPY\x01\x00\xff\xff{}", 12);
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "header length: 65535 bytes passes the end");

  path_in(f, "bad.safetensors", path, sizeof path);
  write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "abcd", 4);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, path);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT,
           "tensor 'w' data_offsets: end 8 passes the end");
  write_st(path, "{\"w\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", "ab", 2);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_UNSUPPORTED, "F8_E5M2");
  write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", "abcdefgh", 8);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "header: not valid JSON");
  write_bytes(path, "\x00\x10\x00\x00\x00\x00\x00\x00{}", 10);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "header length");
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, expert_names, 1, NULL, &info, &c), SW_ERROR_DATA_CORRUPT,
           "header length");

  /* Bad requests. */
  write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "abcdefgh", 8);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, NULL, NULL, &info, &c), SW_ERROR_VALUE, "name");
  SW_FAILS(sw_carrier_open_safetensors(f->rt, NULL, "w", NULL, &info, &c), SW_ERROR_VALUE, "path");
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, NULL), SW_ERROR_VALUE, "out_carrier");
  SW_FAILS(sw_carrier_open_safetensors(NULL, path, "w", NULL, &info, &c), SW_ERROR_TYPE, "runtime");
  sw_file_tensor_info_t odd = info;
  odd.struct_size = 12;
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &odd, &c), SW_ERROR_VALUE, "struct_size 12");
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.struct_size = 3;
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", &d, &info, &c), SW_ERROR_VALUE, "struct_size 3");
  SW_FAILS(sw_carrier_open_npy(f->rt, path, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, "magic");
  assert_null(c);
}

/* ---- the parsers, through the testing hooks ---------------------------- */

typedef struct {
  const char* text;  /* header text (npy dictionary or safetensors JSON) */
  size_t data;       /* data bytes after the header */
  sw_error_code_t code;
  const char* needle;
} header_case_t;

static unsigned char* npy_buffer(const char* dict, size_t data, size_t* out_n) {
  const size_t len = strlen(dict);
  unsigned char* buf = (unsigned char*)calloc(10 + len + data + 1, 1);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(len & 0xff);
  buf[9] = (unsigned char)(len >> 8);
  memcpy(buf + 10, dict, len);
  *out_n = 10 + len + data;
  return buf;
}

static unsigned char* st_buffer(const char* json, size_t data, size_t* out_n) {
  const size_t len = strlen(json);
  unsigned char* buf = (unsigned char*)calloc(8 + len + data + 1, 1);
  for (int i = 0; i < 8; ++i) buf[i] = (unsigned char)(((uint64_t)len >> (8 * i)) & 0xff);
  memcpy(buf + 8, json, len);
  *out_n = 8 + len + data;
  return buf;
}

/* A file of another kind opened as safetensors (a checkpoint's index.json, an
 * .npy, a text file) is DATA_CORRUPT saying so and naming the file, not a
 * report of the absurd header length its first 8 bytes would give. */
static void safetensors_opener_refuses_other_files(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512], expected[600];
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* c = NULL;
  const char* names[1] = {"w"};

  static const char index_json[] =
      "{\"metadata\": {\"total_size\": 16}, \"weight_map\": {\"w\": \"model-00001-of-00001.safetensors\"}}\n";
  path_in(f, "model.safetensors.index.json", path, sizeof path);
  write_bytes(path, index_json, strlen(index_json));
  snprintf(expected, sizeof expected, "'%s' is not a safetensors file: ", path);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, expected);
  SW_FAILS(sw_carrier_open_safetensors_stack(f->rt, path, names, 1, NULL, &info, &c), SW_ERROR_DATA_CORRUPT, expected);

  const float values[4] = {1, 2, 3, 4};
  path_in(f, "w.npy", path, sizeof path);
  write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", values, sizeof values);
  snprintf(expected, sizeof expected, "'%s' is not a safetensors file: ", path);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, expected);
  SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &c)); /* the file itself is fine */
  sw_carrier_release(c);
  c = NULL;

  path_in(f, "notes.txt", path, sizeof path);
  write_bytes(path, "weights go here\n", 16);
  snprintf(expected, sizeof expected, "'%s' is not a safetensors file: ", path);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "w", NULL, &info, &c), SW_ERROR_DATA_CORRUPT, expected);
  assert_null(c);

  /* The parser itself: a length within the buffer whose header is not JSON. */
  const unsigned char npy_like[16] = {2, 0, 0, 0, 0, 0, 0, 0, 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  SW_FAILS(sw_testing_parse_safetensors_header(npy_like, sizeof npy_like, 0, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT,
           "safetensors buffer: not a safetensors file");
}

static void npy_header_rules(void** state) {
  (void)state;
  static const header_case_t cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, SW_OK, NULL},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23, SW_ERROR_DATA_CORRUPT, "data: truncated"},
      {"{'descr': '<f4', 'fortran_order': False, }", 0, SW_ERROR_DATA_CORRUPT, "shape: missing"},
      {"{'fortran_order': False, 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "descr: missing"},
      {"{'descr': '<f4', 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "fortran_order: missing"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, SW_ERROR_DATA_CORRUPT, "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", 8, SW_ERROR_DATA_CORRUPT, "duplicate key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8, SW_ERROR_DATA_CORRUPT, "shape: (n) is an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", 8, SW_ERROR_DATA_CORRUPT, "shape: negative dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", 0, SW_ERROR_DATA_CORRUPT, "shape: a dimension exceeds"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3037000500, 3037000500), }", 0, SW_ERROR_DATA_CORRUPT, "shape: the element count"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }", 0, SW_ERROR_DATA_CORRUPT, "shape: the byte size"},
      {"{'descr': 'q9', 'fortran_order': False, 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "descr: 'q9' is not a NumPy dtype"},
      {"{'descr': 5, 'fortran_order': False, 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "descr: not a string"},
      {"{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "fortran_order: not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", 8, SW_ERROR_DATA_CORRUPT, "unexpected text"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", 8, SW_ERROR_DATA_CORRUPT, "header"},
      {"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,), }", 8, SW_ERROR_DATA_CORRUPT, "escape"},
      {"{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", 16, SW_ERROR_UNSUPPORTED, "big-endian"},
      {"{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", 2, SW_OK, NULL},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4, SW_ERROR_UNSUPPORTED, "'<u2' is not supported"},
      {"{'descr': '<U5', 'fortran_order': False, 'shape': (2,), }", 40, SW_ERROR_UNSUPPORTED, "'<U5'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, SW_ERROR_UNSUPPORTED, "'|O'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, SW_ERROR_UNSUPPORTED, "structured"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4, SW_ERROR_UNSUPPORTED, "rank 17"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    size_t n = 0;
    unsigned char* buf = npy_buffer(cases[k].text, cases[k].data, &n);
    sw_error_t* e = sw_testing_parse_npy_header(buf, n, 0, NULL);
    if (sw_error_code(e) != cases[k].code || sw_test_lacks(sw_error_message(e), cases[k].needle) ||
        (e && sw_test_lacks(sw_error_message(e), "npy buffer")))
      fail_msg("case %zu (%s): got %s \"%s\", expected %s with \"%s\"", k, cases[k].text,
               sw_error_code_name(sw_error_code(e)), sw_error_message(e), sw_error_code_name(cases[k].code),
               cases[k].needle ? cases[k].needle : "");
    sw_error_free(e);
    free(buf);
  }

  /* The prefix rules. */
  size_t n = 0;
  unsigned char* buf = npy_buffer("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, &n);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  SW_OK_(sw_testing_parse_npy_header(buf, n, 0, &info));
  assert_int_equal(info.order, SW_FILE_ORDER_FIRST_MODE_FASTEST);
  assert_int_equal(info.data_offset, n - 24);
  assert_int_equal(info.data_bytes, 24);
  assert_int_equal(info.tile_shape[0], 2);
  assert_int_equal(info.grid_shape[1], 3);
  /* The buffer may be just the header when file_size says the rest exists. */
  SW_OK_(sw_testing_parse_npy_header(buf, n - 24, n, &info));
  SW_FAILS(sw_testing_parse_npy_header(buf, n - 25, n, &info), SW_ERROR_DATA_CORRUPT, "truncated");
  SW_FAILS(sw_testing_parse_npy_header(buf, n, n - 1, &info), SW_ERROR_DATA_CORRUPT, "data: truncated");
  buf[0] = 'x';
  SW_FAILS(sw_testing_parse_npy_header(buf, n, 0, &info), SW_ERROR_DATA_CORRUPT, "magic");
  buf[0] = 0x93;
  buf[6] = 3;
  SW_FAILS(sw_testing_parse_npy_header(buf, n, 0, &info), SW_ERROR_UNSUPPORTED, "version: npy format 3.0");
  buf[6] = 1;
  buf[7] = 1;
  SW_FAILS(sw_testing_parse_npy_header(buf, n, 0, &info), SW_ERROR_UNSUPPORTED, "version: npy format 1.1");
  buf[7] = 0;
  buf[20] = (unsigned char)0xc3;
  SW_FAILS(sw_testing_parse_npy_header(buf, n, 0, &info), SW_ERROR_DATA_CORRUPT, "non-ASCII byte at header byte 10");
  buf[8] = 0xff;
  buf[9] = 0xff;
  SW_FAILS(sw_testing_parse_npy_header(buf, n, 0, &info), SW_ERROR_DATA_CORRUPT, "header length: 65535 bytes passes the end");
  SW_FAILS(sw_testing_parse_npy_header(buf, 9, 0, &info), SW_ERROR_DATA_CORRUPT, "truncated");
  SW_FAILS(sw_testing_parse_npy_header(NULL, 4, 0, &info), SW_ERROR_VALUE, "data");
  SW_FAILS(sw_testing_parse_npy_header(NULL, 0, 0, &info), SW_ERROR_DATA_CORRUPT, "truncated");
  free(buf);
}

static void safetensors_header_rules(void** state) {
  (void)state;
#define W(d, s, o) "{\"dtype\":\"" d "\",\"shape\":" s ",\"data_offsets\":" o "}"
  static const header_case_t cases[] = {
      {"{\"a\":" W("F32", "[2]", "[0,8]") "}", 8, SW_OK, NULL},
      {"{\"__metadata__\":{\"k\":\"v\"},\"a\":" W("BF16", "[2,1]", "[0,4]") "}  ", 4, SW_OK, NULL},
      {"{}", 0, SW_OK, NULL},
      {"{\"a\":" W("F32", "[2]", "[0,8]") "}", 7, SW_ERROR_DATA_CORRUPT, "tensor 'a' data_offsets: end 8 passes the end"},
      {"{\"a\":" W("F32", "[3]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' data_offsets: [0, 8) holds 8 bytes, but shape (3,)"},
      {"{\"a\":" W("F32", "[2]", "[8,0]") "}", 8, SW_ERROR_DATA_CORRUPT, "begin 8 is past end 0"},
      {"{\"a\":" W("F32", "[2]", "[0]") "}", 8, SW_ERROR_DATA_CORRUPT, "not an array of two offsets"},
      {"{\"a\":" W("F32", "[2]", "\"0-8\"") "}", 8, SW_ERROR_DATA_CORRUPT, "data_offsets: not an array"},
      {"{\"a\":" W("F32", "[2]", "[0,18446744073709551616]") "}", 8, SW_ERROR_DATA_CORRUPT, "data_offsets: value exceeds"},
      {"{\"a\":" W("F32", "[-2]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: negative value"},
      {"{\"a\":" W("F32", "[2.5]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: not an integer"},
      {"{\"a\":" W("F32", "[1e3]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: not an integer"},
      {"{\"a\":" W("F32", "2", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: not an array"},
      {"{\"a\":" W("F32", "[9223372036854775808]", "[0,0]") "}", 0, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: value exceeds"},
      {"{\"a\":" W("F32", "[4294967296,4294967296]", "[0,0]") "}", 0, SW_ERROR_DATA_CORRUPT, "element count"},
      {"{\"a\":" W("F64", "[2305843009213693952]", "[0,0]") "}", 0, SW_ERROR_DATA_CORRUPT, "byte size"},
      {"{\"a\":" W("F32", "[1]", "[0,4]") ",\"b\":" W("F32", "[1]", "[2,6]") "}", 6, SW_ERROR_DATA_CORRUPT, "overlaps tensor"},
      {"{\"a\":" W("F32", "[1]", "[0,4]") ",\"a\":" W("F32", "[1]", "[4,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a': duplicate tensor name"},
      {"{\"a\":" W("F32", "[0]", "[0,0]") ",\"b\":" W("F32", "[0]", "[0,0]") "}", 0, SW_OK, NULL},
      {"{\"a\":" W("Q32", "[2]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' dtype: unknown dtype 'Q32'"},
      {"{\"a\":" W("U16", "[2]", "[0,4]") "}", 4, SW_ERROR_UNSUPPORTED, "tensor 'a' dtype: dtype U16 is not supported"},
      {"{\"a\":" W("C64", "[1]", "[0,8]") "}", 8, SW_ERROR_UNSUPPORTED, "C64"},
      {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' dtype: missing"},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' shape: missing"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' data_offsets: missing"},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SW_ERROR_DATA_CORRUPT, "tensor 'a' dtype: appears twice"},
      {"{\"a\":" W("F32", "[2]", "[0,8]") ",\"__metadata__\":[1]}", 8, SW_ERROR_DATA_CORRUPT, "__metadata__: not an object"},
      {"{\"__metadata__\":{\"k\":null}}", 0, SW_ERROR_DATA_CORRUPT, "the value of 'k' is not a string"},
      {"{\"a\":7}", 0, SW_ERROR_DATA_CORRUPT, "tensor 'a': not an object"},
      {"{\"a\":" W("F32", "[2]", "[0,8]") "", 8, SW_ERROR_DATA_CORRUPT, "not valid JSON"},
      {"{\"a\" " W("F32", "[2]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "expected ':'"},
      {"{\"a\":" W("F32", "[2]", "[0,8]") ",}", 8, SW_ERROR_DATA_CORRUPT, "expected a string key"},
      {"{\"a\":" W("F32", "[2,]", "[0,8]") "}", 8, SW_ERROR_DATA_CORRUPT, "not valid JSON"},
      {"{\"a\":tru}", 0, SW_ERROR_DATA_CORRUPT, "not valid JSON"},
      {"{\"a\\q\":1}", 0, SW_ERROR_DATA_CORRUPT, "a bad escape"},
      {"{\"\\u00e9\":" W("F32", "[2]", "[0,8]") "}", 8, SW_OK, NULL},
      {"{\"\\ud83d\\ude00\":" W("F32", "[2]", "[0,8]") "}", 8, SW_OK, NULL},
      {"{\"\\udc00\":1}", 0, SW_ERROR_DATA_CORRUPT, "lone low surrogate"},
      {"{\"\\u12\":1}", 0, SW_ERROR_DATA_CORRUPT, "\\u escape"},
      {"{\"a\":-}", 0, SW_ERROR_DATA_CORRUPT, "expected a digit"},
      {"{\"a\":1.}", 0, SW_ERROR_DATA_CORRUPT, "after '.'"},
      {"[1,2]", 0, SW_ERROR_DATA_CORRUPT, "must start with '{'"},
      {" {}", 0, SW_ERROR_DATA_CORRUPT, "must start with '{'"},
      {"{} {}", 0, SW_ERROR_DATA_CORRUPT, "unexpected text after the JSON value"},
  };
#undef W
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    size_t n = 0;
    unsigned char* buf = st_buffer(cases[k].text, cases[k].data, &n);
    size_t count = 99;
    sw_error_t* e = sw_testing_parse_safetensors_header(buf, n, 0, NULL, &count, NULL);
    if (sw_error_code(e) != cases[k].code || sw_test_lacks(sw_error_message(e), cases[k].needle) ||
        (e && sw_test_lacks(sw_error_message(e), "safetensors buffer")))
      fail_msg("case %zu (%s): got %s \"%s\", expected %s with \"%s\"", k, cases[k].text,
               sw_error_code_name(sw_error_code(e)), sw_error_message(e), sw_error_code_name(cases[k].code),
               cases[k].needle ? cases[k].needle : "");
    if (!e) assert_true(count <= 2);
    sw_error_free(e);
    free(buf);
  }

  /* Info of one tensor, and the length prefix rules. */
  const char* json = "{\"__metadata__\":{},\"a\":{\"dtype\":\"I32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
                     "\"b\":{\"dtype\":\"BOOL\",\"shape\":[5],\"data_offsets\":[24,29]}}";
  size_t n = 0;
  unsigned char* buf = st_buffer(json, 29, &n);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  size_t count = 0;
  SW_OK_(sw_testing_parse_safetensors_header(buf, n, 0, "b", &count, &info));
  assert_int_equal(count, 2);
  assert_int_equal(info.dtype, SW_DTYPE_BOOL);
  assert_int_equal(info.rank, 1);
  assert_int_equal(info.shape[0], 5);
  assert_int_equal(info.data_offset, 8 + strlen(json) + 24);
  assert_int_equal(info.data_bytes, 5);
  SW_OK_(sw_testing_parse_safetensors_header(buf, n, 0, "a", NULL, &info));
  assert_int_equal(info.order, SW_FILE_ORDER_ROW_MAJOR);
  assert_int_equal(info.logical_shape[0], 2);
  assert_int_equal(info.logical_shape[1], 3);
  assert_int_equal(info.grid_shape[1], 3);
  SW_FAILS(sw_testing_parse_safetensors_header(buf, n, 0, "c", NULL, &info), SW_ERROR_VALUE, "no tensor named 'c'");
  SW_OK_(sw_testing_parse_safetensors_header(buf, n - 29, n, NULL, NULL, NULL));
  SW_FAILS(sw_testing_parse_safetensors_header(buf, n - 30, n, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT, "truncated");
  SW_FAILS(sw_testing_parse_safetensors_header(buf, n, n - 1, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT, "passes the end");
  SW_FAILS(sw_testing_parse_safetensors_header(buf, 7, 0, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT, "8-byte length");
  buf[7] = 1;
  SW_FAILS(sw_testing_parse_safetensors_header(buf, n, 0, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT, "exceeds the limit");
  buf[7] = 0;
  buf[2] = 1;
  SW_FAILS(sw_testing_parse_safetensors_header(buf, n, 0, NULL, NULL, NULL), SW_ERROR_DATA_CORRUPT,
           "header length: 65" /* 65536 + len */);
  free(buf);
}

/* Every seed file gives the code its name states (NAME.CODE.EXT). */
static void corpus_replay(void** state) {
  (void)state;
  const char* root = getenv("SW_CORPUS_DIR");
  if (!root) SW_SKIP("SW_CORPUS_DIR is not set (meson sets it to tests/corpus)");
  static const char* kinds[2] = {"npy", "safetensors"};
  int replayed[2] = {0, 0}, valid[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    char dirpath[512];
    snprintf(dirpath, sizeof dirpath, "%s/%s", root, kinds[k]);
    DIR* d = opendir(dirpath);
    assert_non_null(d);
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
      sw_error_t* e = k == 0 ? sw_testing_parse_npy_header(data, n, 0, NULL)
                             : sw_testing_parse_safetensors_header(data, n, 0, NULL, NULL, NULL);
      const char* got = e ? sw_error_code_name(sw_error_code(e)) : "OK";
      if (strcmp(got, expected) != 0)
        fail_msg("%s: got %s (%s), expected %s", path, got, sw_error_message(e), expected);
      /* The same from a buffer holding only the header, the file's size given. */
      if (!e) ++valid[k];
      sw_error_free(e);
      /* Every prefix of the file fails cleanly or, for valid ones, passes. */
      for (size_t cut = 0; cut < n && cut < 4096; ++cut) {
        sw_error_t* p = k == 0 ? sw_testing_parse_npy_header(data, cut, 0, NULL)
                               : sw_testing_parse_safetensors_header(data, cut, 0, NULL, NULL, NULL);
        if (p) {
          const sw_error_code_t code = sw_error_code(p);
          if (code != SW_ERROR_DATA_CORRUPT && code != SW_ERROR_UNSUPPORTED)
            fail_msg("%s cut at %zu: %s (%s)", path, cut, sw_error_code_name(code), sw_error_message(p));
        }
        sw_error_free(p);
      }
      free(data);
      ++replayed[k];
    }
    closedir(d);
  }
  assert_true(replayed[0] >= 30 && replayed[1] >= 30);
  assert_true(valid[0] >= 8 && valid[1] >= 4);
}

/* Random byte flips of valid headers never crash and give only content
 * errors (a deterministic sweep; the hardening fuzzers go further). */

static void parsers_survive_mutations(void** state) {
  (void)state;
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  size_t nn = 0, ns = 0;
  unsigned char* npy = npy_buffer("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, &nn);
  unsigned char* st = st_buffer("{\"__metadata__\":{\"k\":\"v\\u00e9\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                                "\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[24,26]}}",
                                26, &ns);
  unsigned char* work = (unsigned char*)malloc(nn > ns ? nn : ns);
  for (int round = 0; round < 20000; ++round) {
    const bool is_npy = round % 2 == 0;
    const unsigned char* src = is_npy ? npy : st;
    const size_t n = is_npy ? nn : ns;
    memcpy(work, src, n);
    const int flips = 1 + (int)(sw_test_random(&rng) % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = (size_t)(sw_test_random(&rng) % n);
      const uint64_t r = sw_test_random(&rng);
      work[at] = (r & 1) ? (unsigned char)(r >> 8) : (unsigned char)"{}[]\",:0123456789-eE. tfn\\u'()TF"[(r >> 8) % 32];
    }
    const size_t len = (sw_test_random(&rng) % 4 == 0) ? (size_t)(sw_test_random(&rng) % (n + 1)) : n;
    sw_error_t* e = is_npy ? sw_testing_parse_npy_header(work, len, 0, NULL)
                           : sw_testing_parse_safetensors_header(work, len, 0, "a", NULL, NULL);
    if (e) {
      const sw_error_code_t code = sw_error_code(e);
      if (code != SW_ERROR_DATA_CORRUPT && code != SW_ERROR_UNSUPPORTED && code != SW_ERROR_VALUE)
        fail_msg("round %d: %s (%s)", round, sw_error_code_name(code), sw_error_message(e));
    }
    sw_error_free(e);
  }
  free(work);
  free(npy);
  free(st);
}

/* ---- saving ------------------------------------------------------------ */

static void save_safetensors_roundtrip(void** state) {
  fixture_t* f = FIXTURE(state);
  /* A dense (2, 3, 4) tensor (first mode fastest) and its permuted view. */
  const int64_t ext[3] = {2, 3, 4};
  float values[24];
  for (int k = 0; k < 24; ++k) values[k] = (float)k * 1.5f;
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 3, values, &t));
  const size_t perm[3] = {2, 0, 1};
  sw_tensor_t* v = permuted(t, perm, 3); /* (4, 2, 3) */
  const int64_t iext[2] = {2, 2};
  const int64_t ivalues[4] = {1, -2, 3, 1LL << 50};
  sw_tensor_t* it = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_I64, iext, 2, ivalues, &it));
  char path[512];
  path_in(f, "saved.safetensors", path, sizeof path);
  const char* names[3] = {"dense", "view", "ints"};
  sw_tensor_t* tensors[3] = {t, v, it};
  sw_safetensors_save_desc_t d;
  sw_safetensors_save_desc_init(&d);
  const char* keys[1] = {"format"};
  const char* vals[1] = {"pt"};
  d.metadata_keys = keys;
  d.metadata_values = vals;
  d.metadata_count = 1;
  SW_OK_(sw_save_safetensors(path, names, tensors, 3, &d));
  assert_int_equal(count_entries(f->dir, NULL, 0), 1); /* no temporary file left */

  size_t n = 0;
  unsigned char* file = read_bytes(path, &n);
  assert_non_null(strstr((const char*)file + 8, "\"__metadata__\":{\"format\":\"pt\"}"));
  /* The data starts at a multiple of 8. */
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= (uint64_t)file[i] << (8 * i);
  assert_int_equal((8 + hl) % 8, 0);
  size_t count = 0;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  SW_OK_(sw_testing_parse_safetensors_header(file, n, 0, "view", &count, &info));
  assert_int_equal(count, 3);
  assert_int_equal(info.rank, 3);
  assert_int_equal(info.shape[0], 4);
  assert_int_equal(info.shape[1], 2);
  assert_int_equal(info.shape[2], 3);
  /* Row-major bytes of the view: element (a, b, c) at (a * 2 + b) * 3 + c. */
  const float* saved = (const float*)(file + info.data_offset);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) assert_true(saved[(a * 2 + b) * 3 + c] == (float)get3(v, a, b, c));
  SW_OK_(sw_testing_parse_safetensors_header(file, n, 0, "dense", NULL, &info));
  saved = (const float*)(file + info.data_offset);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) assert_true(saved[(a * 3 + b) * 4 + c] == values[a + 2 * (b + 3 * c)]);
  free(file);

  /* Reopened, the view reads back as it was saved. */
  sw_carrier_t* fc = NULL;
  SW_OK_(sw_carrier_open_safetensors(f->rt, path, "view", NULL, &info, &fc));
  sw_carrier_t* tiled = tiled_over(f, fc, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* back = file_view(full, &info);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) assert_true(get3(back, a, b, c) == get3(v, a, b, c));
  /* Saving over the file a carrier reads replaces it; the carrier keeps the old one. */
  const char* one[1] = {"ints"};
  SW_OK_(sw_save_safetensors(path, one, &it, 1, NULL));
  assert_true(get3(back, 3, 1, 2) == get3(v, 3, 1, 2));
  sw_tensor_release(back);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(fc);
  SW_FAILS(sw_carrier_open_safetensors(f->rt, path, "view", NULL, &info, &fc), SW_ERROR_VALUE, "no tensor named 'view'");

  sw_tensor_release(it);
  sw_tensor_release(v);
  sw_tensor_release(t);
}

/* A TiledEvictable saves tile by tile from where each tile lives, dirty
 * primary values included, and nothing is promoted. */
static void save_tiled_streams_tiles(void** state) {
  fixture_t* f = FIXTURE(state);
  char src[512], out[512];
  path_in(f, "mixtral.safetensors", src, sizeof src);
  write_per_expert(src, NULL);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_open_safetensors_stack(f->rt, src, expert_names, XE, NULL, &info, &file));
  /* A writable secondary: copy the experts into a scratch file tier. */
  sw_carrier_t* scratch = NULL;
  SW_OK_(sw_carrier_create_file(f->rt, SW_DTYPE_F32, XE * XO * XI, NULL, &scratch));
  float* all = (float*)malloc(XE * XO * XI * sizeof(float));
  SW_OK_(sw_carrier_read(file, 0, XE * XO * XI, all));
  SW_OK_(sw_carrier_write(scratch, 0, XE * XO * XI, all));
  sw_carrier_release(file);
  sw_carrier_t* tiled = tiled_over(f, scratch, &info);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(tiled, &full));
  sw_tensor_t* view = file_view(full, &info);
  /* Expert 1 becomes primary and dirty with a new value at (1, 2, 3). */
  int64_t c[3] = {1, 2, 3};
  SW_OK_(sw_tensor_set(view, c, 3, -5.0));
  sw_tile_state_t st;
  sw_tile_state_init(&st);
  int64_t t1[3] = {0, 0, 1}, t2[3] = {0, 0, 2};
  SW_OK_(sw_tiled_tile_state(tiled, t1, 3, &st));
  assert_int_equal(st.location, SW_TILE_PRIMARY);
  assert_true(st.dirty);

  path_in(f, "experts-out.safetensors", out, sizeof out);
  const char* names[2] = {"experts", "full"};
  sw_tensor_t* tensors[2] = {view, full};
  SW_OK_(sw_save_safetensors(out, names, tensors, 2, NULL));
  /* Nothing moved: expert 2 is still on the secondary tier only. */
  SW_OK_(sw_tiled_tile_state(tiled, t2, 3, &st));
  assert_int_equal(st.location, SW_TILE_SECONDARY);
  SW_OK_(sw_tiled_tile_state(tiled, t1, 3, &st));
  assert_true(st.dirty);

  size_t n = 0;
  unsigned char* bytes = read_bytes(out, &n);
  SW_OK_(sw_testing_parse_safetensors_header(bytes, n, 0, "experts", NULL, &info));
  assert_int_equal(info.shape[0], XE);
  const float* saved = (const float*)(bytes + info.data_offset);
  for (int e = 0; e < XE; ++e)
    for (int o = 0; o < XO; ++o)
      for (int i = 0; i < XI; ++i) {
        const float want = (e == 1 && o == 2 && i == 3) ? -5.0f : weight(e, o, i);
        assert_true(saved[(e * XO + o) * XI + i] == want);
      }
  /* The full tensor (XI, XO, XE) saves in its own row-major order. */
  SW_OK_(sw_testing_parse_safetensors_header(bytes, n, 0, "full", NULL, &info));
  assert_int_equal(info.shape[0], XI);
  assert_int_equal(info.shape[2], XE);
  saved = (const float*)(bytes + info.data_offset);
  for (int i = 0; i < XI; ++i)
    for (int o = 0; o < XO; ++o)
      for (int e = 0; e < XE; ++e) {
        const float want = (e == 1 && o == 2 && i == 3) ? -5.0f : weight(e, o, i);
        assert_true(saved[(i * XO + o) * XE + e] == want);
      }
  free(bytes);
  free(all);
  sw_tensor_release(view);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(scratch);
}

static void save_npy_roundtrip(void** state) {
  fixture_t* f = FIXTURE(state);
  const int64_t ext[2] = {3, 5};
  double values[15];
  for (int k = 0; k < 15; ++k) values[k] = k - 4.25;
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F64, ext, 2, values, &t));
  sw_tensor_t* tt = NULL;
  SW_OK_(sw_tensor_transpose(t, 0, 1, &tt)); /* (5, 3) */
  char path[512];
  path_in(f, "saved.npy", path, sizeof path);
  SW_OK_(sw_save_npy(path, tt));
  size_t n = 0;
  unsigned char* bytes = read_bytes(path, &n);
  assert_int_equal(bytes[6], 1);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  SW_OK_(sw_testing_parse_npy_header(bytes, n, 0, &info));
  assert_int_equal(info.data_offset % 64, 0);
  assert_int_equal(info.shape[0], 5);
  assert_int_equal(info.shape[1], 3);
  assert_int_equal(info.order, SW_FILE_ORDER_ROW_MAJOR);
  const double* saved = (const double*)(bytes + info.data_offset);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) assert_true(saved[r * 3 + c] == values[c + 3 * r]);
  free(bytes);
  sw_carrier_t* fc = NULL;
  SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &fc));
  sw_carrier_release(fc);

  /* bf16 has no npy dtype. */
  const int64_t one = 2;
  const uint16_t bf[2] = {0x3f80, 0x4000};
  sw_tensor_t* b = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_BF16, &one, 1, bf, &b));
  SW_FAILS(sw_save_npy(path, b), SW_ERROR_UNSUPPORTED, "bf16");
  /* The failed save left the earlier file as it was. */
  SW_OK_(sw_carrier_open_npy(f->rt, path, NULL, &info, &fc));
  assert_int_equal(info.dtype, SW_DTYPE_F64);
  sw_carrier_release(fc);
  sw_tensor_release(b);
  sw_tensor_release(tt);
  sw_tensor_release(t);
}

static void save_errors(void** state) {
  fixture_t* f = FIXTURE(state);
  const int64_t ext = 3;
  const float values[3] = {1, 2, 3};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, &ext, 1, values, &t));
  char path[512], nodir[512];
  path_in(f, "e.safetensors", path, sizeof path);
  path_in(f, "no/such/dir/e.safetensors", nodir, sizeof nodir);
  sw_tensor_t* two[2] = {t, t};
  const char* dup[2] = {"a", "a"};
  SW_FAILS(sw_save_safetensors(path, dup, two, 2, NULL), SW_ERROR_VALUE, "tensor 'a' is named twice");
  const char* empty[1] = {""};
  SW_FAILS(sw_save_safetensors(path, empty, two, 1, NULL), SW_ERROR_VALUE, "empty");
  const char* meta[1] = {"__metadata__"};
  SW_FAILS(sw_save_safetensors(path, meta, two, 1, NULL), SW_ERROR_VALUE, "reserved");
  const char* bad_utf8[1] = {"\xff"};
  SW_FAILS(sw_save_safetensors(path, bad_utf8, two, 1, NULL), SW_ERROR_VALUE, "UTF-8");
  const char* ok[1] = {"a"};
  SW_FAILS(sw_save_safetensors(NULL, ok, two, 1, NULL), SW_ERROR_VALUE, "path");
  SW_FAILS(sw_save_safetensors(path, NULL, two, 1, NULL), SW_ERROR_VALUE, "names");
  SW_FAILS(sw_save_safetensors(path, ok, NULL, 1, NULL), SW_ERROR_VALUE, "tensors");
  sw_tensor_t* null_tensor[1] = {NULL};
  SW_FAILS(sw_save_safetensors(path, ok, null_tensor, 1, NULL), SW_ERROR_TYPE, "tensors[0]");
  SW_FAILS(sw_save_safetensors(nodir, ok, two, 1, NULL), SW_ERROR_IO, nodir);
  sw_safetensors_save_desc_t d;
  sw_safetensors_save_desc_init(&d);
  const char* keys[2] = {"k", "k"};
  const char* vals[2] = {"1", "2"};
  d.metadata_keys = keys;
  d.metadata_values = vals;
  d.metadata_count = 2;
  SW_FAILS(sw_save_safetensors(path, ok, two, 1, &d), SW_ERROR_VALUE, "metadata key 'k' is given twice");
  d.metadata_values = NULL;
  SW_FAILS(sw_save_safetensors(path, ok, two, 1, &d), SW_ERROR_VALUE, "metadata_values");
  d.struct_size = 5;
  SW_FAILS(sw_save_safetensors(path, ok, two, 1, &d), SW_ERROR_VALUE, "struct_size 5");
  SW_FAILS(sw_save_npy(path, NULL), SW_ERROR_TYPE, "tensor");
  /* A released carrier is STATE. */
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(t, &c));
  SW_OK_(sw_carrier_dispose(c));
  SW_FAILS(sw_save_safetensors(path, ok, two, 1, NULL), SW_ERROR_STATE, "released");
  SW_FAILS(sw_save_npy(path, t), SW_ERROR_STATE, "released");
  sw_carrier_release(c);
  /* No file, temporary or final, was left behind. */
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  /* Zero tensors make a valid, empty file. */
  SW_OK_(sw_save_safetensors(path, NULL, NULL, 0, NULL));
  size_t n = 0, count = 9;
  unsigned char* bytes = read_bytes(path, &n);
  SW_OK_(sw_testing_parse_safetensors_header(bytes, n, 0, NULL, &count, NULL));
  assert_int_equal(count, 0);
  free(bytes);
  sw_tensor_release(t);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(npy_c_order_is_the_reversed_tensor),
      T(npy_fortran_order_maps_as_is),
      T(npy_every_dtype),
      T(safetensors_tensor_by_name),
      T(safetensors_stack_per_expert),
      T(safetensors_stack_errors),
      T(raw_tensor_and_segments),
      T(direct_io_bounce_reads),
      T(direct_io_random_geometries),
      T(direct_io_tmpfs),
      T(direct_io_falls_back),
      T(header_reads_are_fault_points),
      T(safetensors_stack_files_buffered),
      T(safetensors_stack_files_direct),
      T(safetensors_stack_files_direct_per_file),
      T(safetensors_stack_files_errors),
      T(opener_errors),
      T(safetensors_opener_refuses_other_files),
      cmocka_unit_test(npy_header_rules),
      cmocka_unit_test(safetensors_header_rules),
      cmocka_unit_test(corpus_replay),
      cmocka_unit_test(parsers_survive_mutations),
      T(save_safetensors_roundtrip),
      T(save_tiled_streams_tiles),
      T(save_npy_roundtrip),
      T(save_errors),
  };
#undef T
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
