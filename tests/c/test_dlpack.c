/* DLPack exports of tensors and device views, read through the structs of the
 * vendored dlpack.h: what the managed tensors describe, their versions and
 * flags, that an export keeps what it lends alive until its deleter runs and
 * that the deleter lets go of it exactly once (on any thread), and the error
 * of each bad argument. */
#include <pthread.h>

#include <dlpack/dlpack.h>

#include "sw_test.h"

typedef struct DLManagedTensorVersioned Versioned;

static void count_release(void* user_data) { ++*(int*)user_data; }

/* A CPU carrier over `data`; the library's release of the memory counts in
 * *released when that is not NULL. */
static sw_carrier_t* lent(sw_runtime_t* rt, float* data, size_t n, bool read_only, int* released) {
  sw_external_memory_desc_t d;
  sw_external_memory_desc_init(&d);
  d.data = data;
  d.bytes = n * sizeof(float);
  d.read_only = read_only;
  d.release = released ? count_release : NULL;
  d.user_data = released;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, &c));
  return c;
}

/* A tensor at `offset` of `carrier` with the layout `text`. */
static sw_tensor_t* tensor_of(sw_carrier_t* carrier, int64_t offset, const char* text) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(text, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(carrier, offset, l, &t));
  sw_layout_release(l);
  return t;
}

static void assert_describes_2x3(const DLTensor* t, const float* data) {
  assert_ptr_equal(t->data, data + 1);
  assert_int_equal(t->device.device_type, kDLCPU);
  assert_int_equal(t->device.device_id, 0);
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->dtype.code, kDLFloat);
  assert_int_equal(t->dtype.bits, 32);
  assert_int_equal(t->dtype.lanes, 1);
  assert_int_equal(t->shape[0], 2);
  assert_int_equal(t->shape[1], 3);
  assert_int_equal(t->strides[0], 1); /* first mode fastest, in elements */
  assert_int_equal(t->strides[1], 2);
  assert_int_equal(t->byte_offset, 0);
}

static void test_versioned_tensor_export_keeps_the_tensor_until_its_deleter(void** state) {
  sw_runtime_t* rt = *state;
  float data[7] = {-1, 0, 1, 2, 3, 4, 5};
  int released = 0;
  sw_carrier_t* c = lent(rt, data, 7, false, &released);
  sw_tensor_t* t = tensor_of(c, 1, "(2,3):(1,2)");
  void* out = NULL;
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
  sw_tensor_release(t);
  sw_carrier_release(c);
  assert_int_equal(released, 0); /* the export holds the tensor, its carrier and so the memory */
  Versioned* m = out;
  assert_int_equal(m->version.major, 1);
  assert_int_equal(m->version.minor, 0);
  assert_int_equal(m->flags, 0);
  assert_non_null(m->deleter);
  assert_describes_2x3(&m->dl_tensor, data);
  assert_true(((float*)m->dl_tensor.data)[5] == 5.0f);
  m->deleter(m);
  assert_int_equal(released, 1);
}

static void test_legacy_tensor_export_keeps_the_tensor_until_its_deleter(void** state) {
  sw_runtime_t* rt = *state;
  float data[7] = {-1, 0, 1, 2, 3, 4, 5};
  int released = 0;
  sw_carrier_t* c = lent(rt, data, 7, false, &released);
  sw_tensor_t* t = tensor_of(c, 1, "(2,3):(1,2)");
  void* out = NULL;
  SW_OK_(sw_tensor_to_dlpack(t, &out));
  sw_tensor_release(t);
  sw_carrier_release(c);
  assert_int_equal(released, 0);
  DLManagedTensor* m = out;
  assert_describes_2x3(&m->dl_tensor, data);
  m->deleter(m);
  assert_int_equal(released, 1);
}

static void test_each_export_is_its_own(void** state) {
  sw_runtime_t* rt = *state;
  float data[7] = {0};
  int released = 0;
  sw_carrier_t* c = lent(rt, data, 7, false, &released);
  sw_tensor_t* t = tensor_of(c, 1, "(2,3):(1,2)");
  void *a = NULL, *b = NULL;
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 1, &a));
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 1, &b));
  assert_ptr_not_equal(a, b);
  sw_tensor_release(t);
  sw_carrier_release(c);
  ((Versioned*)a)->deleter(a);
  assert_int_equal(released, 0); /* the other export still holds it */
  ((Versioned*)b)->deleter(b);
  assert_int_equal(released, 1);
}

static void* delete_versioned(void* managed) {
  ((Versioned*)managed)->deleter(managed);
  return NULL;
}

static void test_the_deleter_may_run_on_another_thread(void** state) {
  sw_runtime_t* rt = *state;
  float data[6] = {0};
  int released = 0;
  sw_carrier_t* c = lent(rt, data, 6, false, &released);
  sw_tensor_t* t = tensor_of(c, 0, "(6):(1)");
  void* out = NULL;
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
  sw_tensor_release(t);
  sw_carrier_release(c);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, delete_versioned, out), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(released, 1);
}

static void test_versions_follow_the_consumer(void** state) {
  sw_runtime_t* rt = *state;
  float data[6] = {0};
  sw_carrier_t* c = lent(rt, data, 6, false, NULL);
  sw_tensor_t* t = tensor_of(c, 0, "(6):(1)");
  const struct { uint32_t max_major, max_minor, major, minor; } cases[] = {
      {1, 0, 1, 0},
      {1, DLPACK_MINOR_VERSION, 1, DLPACK_MINOR_VERSION},
      {1, 1000, 1, DLPACK_MINOR_VERSION},           /* never newer than this library's */
      {2, 0, 1, DLPACK_MINOR_VERSION},              /* a later major gets this library's 1.x */
      {UINT32_MAX, UINT32_MAX, 1, DLPACK_MINOR_VERSION},
  };
  assert_int_equal(DLPACK_MAJOR_VERSION, 1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    void* out = NULL;
    SW_OK_(sw_tensor_to_dlpack_versioned(t, cases[i].max_major, cases[i].max_minor, &out));
    Versioned* m = out;
    assert_int_equal(m->version.major, cases[i].major);
    assert_int_equal(m->version.minor, cases[i].minor);
    m->deleter(m);
  }
  /* Before DLPack 1.0 there is no versioned struct. */
  void* sentinel = (void*)(uintptr_t)0x1;
  void* out = sentinel;
  SW_FAILS(sw_tensor_to_dlpack_versioned(t, 0, 8, &out), SW_ERROR_VALUE, "max_major 0");
  assert_ptr_equal(out, sentinel);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void test_read_only_carriers_export_read_only(void** state) {
  sw_runtime_t* rt = *state;
  float data[4] = {1, 2, 3, 4};
  for (int read_only = 0; read_only < 2; ++read_only) {
    sw_carrier_t* c = lent(rt, data, 4, read_only, NULL);
    sw_tensor_t* t = tensor_of(c, 0, "(4):(1)");
    void* out = NULL;
    SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
    Versioned* m = out;
    /* Read-only or nothing: an export shares memory, it is never a copy. */
    assert_int_equal(m->flags, read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
    assert_int_equal(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0);
    m->deleter(m);
    sw_tensor_release(t);
    sw_carrier_release(c);
  }
}

static void test_dtypes_map_onto_dlpack_codes(void** state) {
  sw_runtime_t* rt = *state;
  const struct { sw_dtype_t dtype; uint8_t code, bits; } cases[] = {
      {SW_DTYPE_F32, kDLFloat, 32}, {SW_DTYPE_F64, kDLFloat, 64}, {SW_DTYPE_F16, kDLFloat, 16},
      {SW_DTYPE_BF16, kDLBfloat, 16}, {SW_DTYPE_I32, kDLInt, 32}, {SW_DTYPE_I64, kDLInt, 64},
      {SW_DTYPE_U8, kDLUInt, 8}, {SW_DTYPE_BOOL, kDLBool, 8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    int64_t extents[1] = {3};
    sw_tensor_t* t = NULL;
    SW_OK_(sw_tensor_zeros(rt, cases[i].dtype, extents, 1, &t));
    void* out = NULL;
    SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
    Versioned* m = out;
    assert_int_equal(m->dl_tensor.dtype.code, cases[i].code);
    assert_int_equal(m->dl_tensor.dtype.bits, cases[i].bits);
    assert_int_equal(m->dl_tensor.dtype.lanes, 1);
    m->deleter(m);
    sw_tensor_release(t);
  }
}

static void test_nested_modes_export_when_each_is_one_progression(void** state) {
  sw_runtime_t* rt = *state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 16, &c));
  /* Mode 0 walks strides 1 then 2 over extents 2 and 2: one progression of stride 1. */
  sw_tensor_t* t = tensor_of(c, 0, "((2,2),4):((1,2),4)");
  void* out = NULL;
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
  Versioned* m = out;
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.shape[0], 4);
  assert_int_equal(m->dl_tensor.strides[0], 1);
  assert_int_equal(m->dl_tensor.strides[1], 4);
  m->deleter(m);
  sw_tensor_release(t);
  /* Strides 1 then 8 do not: DLPack cannot describe the mode. */
  t = tensor_of(c, 0, "((2,2),2):((1,8),2)");
  void* sentinel = (void*)(uintptr_t)0x1;
  out = sentinel;
  SW_FAILS(sw_tensor_to_dlpack_versioned(t, 1, 0, &out), SW_ERROR_UNSUPPORTED, "arithmetic progression");
  SW_FAILS(sw_tensor_to_dlpack(t, &out), SW_ERROR_UNSUPPORTED, "arithmetic progression");
  assert_ptr_equal(out, sentinel);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void test_host_carriers_export_and_others_do_not(void** state) {
  sw_runtime_t* rt = *state;
  sw_carrier_t* host = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 4, &host));
  void* base = NULL;
  SW_OK_(sw_carrier_host_pointer(host, &base));
  sw_tensor_t* t = tensor_of(host, 0, "(4):(1)");
  void* out = NULL;
  SW_OK_(sw_tensor_to_dlpack_versioned(t, 1, 0, &out));
  assert_ptr_equal(((Versioned*)out)->dl_tensor.data, base);
  ((Versioned*)out)->deleter(out);
  sw_tensor_release(t);
  sw_carrier_release(host);

  sw_zstd_carrier_desc_t zd;
  sw_zstd_carrier_desc_init(&zd);
  sw_carrier_t* zstd = NULL;
  SW_OK_(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 4, &zd, &zstd));
  t = tensor_of(zstd, 0, "(4):(1)");
  void* sentinel = (void*)(uintptr_t)0x1;
  out = sentinel;
  SW_FAILS(sw_tensor_to_dlpack_versioned(t, 1, 0, &out), SW_ERROR_UNSUPPORTED, "not host addressable");
  SW_FAILS(sw_tensor_to_dlpack(t, &out), SW_ERROR_UNSUPPORTED, "not host addressable");
  assert_ptr_equal(out, sentinel);
  sw_tensor_release(t);
  sw_carrier_release(zstd);
}

static void test_bad_tensor_arguments(void** state) {
  sw_runtime_t* rt = *state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_tensor_t* t = tensor_of(c, 0, "(4):(1)");
  sw_layout_t* layout = NULL;
  SW_OK_(sw_layout_parse("(4):(1)", &layout));
  void* sentinel = (void*)(uintptr_t)0x1;
  void* out = sentinel;
  SW_FAILS(sw_tensor_to_dlpack_versioned(NULL, 1, 0, &out), SW_ERROR_TYPE, "tensor");
  SW_FAILS(sw_tensor_to_dlpack_versioned((sw_tensor_t*)layout, 1, 0, &out), SW_ERROR_TYPE, "tensor");
  SW_FAILS(sw_tensor_to_dlpack_versioned(t, 1, 0, NULL), SW_ERROR_VALUE, "out_managed_tensor");
  SW_FAILS(sw_tensor_to_dlpack(NULL, &out), SW_ERROR_TYPE, "tensor");
  SW_FAILS(sw_tensor_to_dlpack(t, NULL), SW_ERROR_VALUE, "out_managed_tensor");
  /* A released carrier has no memory to lend. */
  SW_OK_(sw_carrier_dispose(c));
  SW_FAILS(sw_tensor_to_dlpack_versioned(t, 1, 0, &out), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tensor_to_dlpack(t, &out), SW_ERROR_STATE, "released");
  assert_ptr_equal(out, sentinel);
  sw_layout_release(layout);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void test_versioned_view_export(void** state) {
  sw_runtime_t* rt = *state;
  sw_device_t* dev = NULL;
  SW_OK_(sw_device_create_fake(rt, NULL, &dev));
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.dtype = SW_DTYPE_F32;
  spec.rank = 2;
  spec.shape[0] = 4;
  spec.shape[1] = 3;
  spec.max_extent_bytes = 4096;
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(dev, &spec, 48, &a));
  sw_device_view_t* v = NULL;
  SW_OK_(sw_device_view(a, SW_DTYPE_F32, spec.shape, 2, &v));
  sw_view_info_t info;
  sw_view_info_init(&info);
  SW_OK_(sw_device_view_describe(v, &info));

  void* sentinel = (void*)(uintptr_t)0x1;
  void* out = sentinel;
  SW_FAILS(sw_device_view_to_dlpack_versioned(NULL, 1, 0, &out), SW_ERROR_TYPE, "view");
  SW_FAILS(sw_device_view_to_dlpack_versioned(v, 1, 0, NULL), SW_ERROR_VALUE, "out_managed_tensor");
  SW_FAILS(sw_device_view_to_dlpack_versioned(v, 0, 0, &out), SW_ERROR_VALUE, "max_major 0");
  assert_ptr_equal(out, sentinel);

  SW_OK_(sw_device_view_to_dlpack_versioned(v, 1, 0, &out));
  sw_device_view_release(v);
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "in use"); /* the export keeps the view, a use */
  Versioned* m = out;
  assert_int_equal(m->version.major, 1);
  assert_int_equal(m->version.minor, 0);
  assert_int_equal(m->flags, 0);
  assert_ptr_equal(m->dl_tensor.data, info.pointer);
  assert_int_equal(m->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.dtype.code, kDLFloat);
  assert_int_equal(m->dl_tensor.shape[1], 3);
  assert_int_equal(m->dl_tensor.strides[0], 1);
  assert_int_equal(m->dl_tensor.strides[1], 4);
  m->deleter(m);
  SW_OK_(sw_device_free(a));

  /* A view from before a restart is stale. */
  sw_device_allocation_t* b = NULL;
  SW_OK_(sw_device_alloc(dev, &spec, 48, &b));
  SW_OK_(sw_device_view(b, SW_DTYPE_F32, spec.shape, 2, &v));
  SW_OK_(sw_device_restart(dev));
  SW_FAILS(sw_device_view_to_dlpack_versioned(v, 1, 0, &out), SW_ERROR_STALE_HANDLE, NULL);
  sw_device_view_release(v);
  sw_device_allocation_release(b);
  sw_device_allocation_release(a);
  sw_device_release(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versioned_tensor_export_keeps_the_tensor_until_its_deleter),
      cmocka_unit_test(test_legacy_tensor_export_keeps_the_tensor_until_its_deleter),
      cmocka_unit_test(test_each_export_is_its_own),
      cmocka_unit_test(test_the_deleter_may_run_on_another_thread),
      cmocka_unit_test(test_versions_follow_the_consumer),
      cmocka_unit_test(test_read_only_carriers_export_read_only),
      cmocka_unit_test(test_dtypes_map_onto_dlpack_codes),
      cmocka_unit_test(test_nested_modes_export_when_each_is_one_progression),
      cmocka_unit_test(test_host_carriers_export_and_others_do_not),
      cmocka_unit_test(test_bad_tensor_arguments),
      cmocka_unit_test(test_versioned_view_export),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
