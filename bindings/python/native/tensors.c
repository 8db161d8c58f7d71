/* strideweave._native: layouts and tensors (sw_py.h lists the module's
 * files): layouts from and to tuples, a tensor's shape, permuted views,
 * matmul (computed transposed for a row-major b), random tensors, and
 * cat/stack of a sequence of handles.
 */
#include "module.h"

/* Frees an error that is only a "no" to the caller; true if there was one. */
static int sw_py_ignore(sw_error_t* e) {
  if (!e) return 0;
  sw_error_free(e);
  return 1;
}

/* Whether sw.matmul computes a @ b as (b^T a^T)^T: b a row-major matrix in
 * NumPy's sense (last mode N of unit stride, the one before it, K, of
 * another; both extents > 1), a of rank >= 2 too, and the product at least
 * 2^15 multiply-adds (below that the library's own small kernels run it
 * whatever the orientation, and the two extra views would cost more than
 * they save). Errors read as "no": the plain call then reports them. */
static int sw_py_matmul_flips(const sw_tensor_t* a, const sw_tensor_t* b, size_t* ra, size_t* rb) {
  int64_t ea[SW_MAX_RANK], eb[SW_MAX_RANK];
  if (sw_py_ignore(sw_tensor_rank(b, rb)) || *rb < 2 || *rb > SW_MAX_RANK) return 0;
  if (sw_py_ignore(sw_tensor_rank(a, ra)) || *ra < 2 || *ra > SW_MAX_RANK) return 0;
  if (sw_py_ignore(sw_tensor_shape(b, eb, SW_MAX_RANK)) || sw_py_ignore(sw_tensor_shape(a, ea, SW_MAX_RANK)))
    return 0;
  const int64_t k = eb[*rb - 2], n = eb[*rb - 1], m = ea[*ra - 2];
  if (k < 2 || n < 2 || m < 1 || (double)m * (double)n * (double)k < 32768.0) return 0;
  sw_layout_t* layout = NULL;
  if (sw_py_ignore(sw_tensor_layout(b, &layout))) return 0;
  int64_t coord[SW_MAX_RANK] = {0}, at0 = 0, at_n = 0, at_k = 0;
  int ok = !sw_py_ignore(sw_layout_index(layout, coord, *rb, &at0));
  coord[*rb - 1] = 1;
  ok = ok && !sw_py_ignore(sw_layout_index(layout, coord, *rb, &at_n));
  coord[*rb - 1] = 0;
  coord[*rb - 2] = 1;
  ok = ok && !sw_py_ignore(sw_layout_index(layout, coord, *rb, &at_k));
  sw_layout_release(layout);
  return ok && at_n - at0 == 1 && at_k - at0 != 1;
}

/* sw.matmul: sw_matmul, or sw_matmul_ex with the desc field Python exposes
 * (out_dtype: the result's dtype code; 0, the operands', is sw_matmul), with
 * the GIL released around the product. When b is row major (NumPy's and
 * PyTorch's layout: a (K, N) weight as PyTorch holds it; see
 * sw_py_matmul_flips) it computes the same product transposed, (b^T a^T)^T,
 * through free views: the C ABI's result is dense first mode fastest, so the
 * transposed product's result seen through the last view is the row-major
 * (M, N) matrix NumPy and PyTorch give, written in place by the GEMM, and
 * the GEMM gets the weight in the orientation its fast kernels take when
 * the product is split over threads (split by columns, a row-major weight
 * is a strided source that oneDNN's bf16 kernels refuse; docs/matmul.md).
 * The values are the same; autograd sees two transposes around the
 * product. An operand that takes no view (a TiledEvictable's) gets the
 * plain call. */
PyObject* matmul_rows(sw_tensor_t* a, sw_tensor_t* b, int out_dtype) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = (sw_dtype_t)out_dtype;
  size_t ra = 0, rb = 0;
  sw_tensor_t* result = NULL;
  if (sw_py_matmul_flips(a, b, &ra, &rb)) {
    sw_tensor_t *at = NULL, *bt = NULL, *ct = NULL;
    sw_error_t* e = sw_tensor_transpose(a, ra - 2, ra - 1, &at);
    if (!e) e = sw_tensor_transpose(b, rb - 2, rb - 1, &bt);
    if (!e) {
      Py_BEGIN_ALLOW_THREADS
      e = out_dtype ? sw_matmul_ex(bt, at, &desc, &ct) : sw_matmul(bt, at, &ct);
      Py_END_ALLOW_THREADS
    }
    if (at) sw_tensor_release(at);
    if (bt) sw_tensor_release(bt);
    if (!e) {
      const size_t rc = ra > rb ? ra : rb;
      e = sw_tensor_transpose(ct, rc - 2, rc - 1, &result);
      sw_tensor_release(ct);
    }
    if (!e) return sw_py_handle(result, SW_PY_TENSOR);
    /* Operands the transposed call refuses: the plain call reports them as
     * they were given (the transposed call names them and their extents
     * swapped). */
    sw_error_free(e);
    result = NULL;
  }
  SW_PY_CHECK_NOGIL(out_dtype ? sw_matmul_ex(a, b, &desc, &result) : sw_matmul(a, b, &result));
  return sw_py_handle(result, SW_PY_TENSOR);
}

/* sw_tensor_random with the desc fields as arguments: distribution 1
 * uniform in [p0, p1), 2 normal with mean p0 and stddev p1. */
PyObject* tensor_random(sw_runtime_t* runtime, int distribution, int dtype, unsigned long long seed, double p0,
                        double p1, PyObject* extents) {
  int64_t* ext = NULL;
  size_t rank = 0;
  if (sw_py_int64_array(extents, &ext, &rank) < 0) return NULL;
  sw_random_desc_t desc;
  sw_random_desc_init(&desc);
  desc.distribution = (sw_random_distribution_t)distribution;
  desc.dtype = (sw_dtype_t)dtype;
  desc.seed = (uint64_t)seed;
  if (distribution == SW_RANDOM_NORMAL) {
    desc.mean = p0;
    desc.stddev = p1;
  } else {
    desc.low = p0;
    desc.high = p1;
  }
  sw_tensor_t* result = NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_tensor_random(runtime, &desc, ext, rank, &result);
  Py_END_ALLOW_THREADS
  free(ext);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(result, SW_PY_TENSOR);
}

/* sw_cat (stack false) or sw_stack of a sequence of tensor handles. */
PyObject* tensors_join(PyObject* handles, int64_t axis, bool stack) {
  PyObject* fast = PySequence_Fast(handles, "expected a sequence of tensor handles");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  sw_tensor_t** ts = (sw_tensor_t**)calloc((size_t)n + 1, sizeof(sw_tensor_t*));
  PyObject* result = NULL;
  if (!ts) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; ++i)
    if (sw_py_pointer(PySequence_Fast_GET_ITEM(fast, i), SW_PY_TENSOR, (void**)&ts[i], "tensor") < 0)
      goto done;
  {
    sw_tensor_t* out = NULL;
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = stack ? sw_stack(ts, (size_t)n, axis, &out) : sw_cat(ts, (size_t)n, axis, &out);
    Py_END_ALLOW_THREADS
    if (e) {
      sw_py_raise(e);
      goto done;
    }
    result = sw_py_handle(out, SW_PY_TENSOR);
  }
done:
  free(ts);
  Py_DECREF(fast);
  return result;
}

PyObject* layout_create(PyObject* shape, PyObject* stride) {
  int64_t *sh = NULL, *st = NULL;
  size_t n = 0, m = 0;
  PyObject* result = NULL;
  if (sw_py_int64_array(shape, &sh, &n) < 0) goto done;
  if (sw_py_int64_array(stride, &st, &m) < 0) goto done;
  if (n != m) {
    PyErr_SetString(SW_PY_VALUE_ERROR, "shape and stride differ in rank");
    goto done;
  }
  {
    sw_layout_t* layout = NULL;
    sw_error_t* e = sw_layout_create(sh, st, n, &layout);
    if (e) {
      sw_py_raise(e);
      goto done;
    }
    result = sw_py_handle(layout, SW_PY_LAYOUT);
  }
done:
  free(sh);
  free(st);
  return result;
}

PyObject* layout_extents(const sw_layout_t* layout) {
  size_t rank = 0;
  int64_t extents[SW_MAX_RANK + 1];
  SW_PY_CHECK(sw_layout_rank(layout, &rank));
  if (rank > SW_MAX_RANK) return PyErr_Format(SW_PY_VALUE_ERROR, "layout rank %zu exceeds %d", rank, SW_MAX_RANK);
  SW_PY_CHECK(sw_layout_extents(layout, extents, SW_MAX_RANK));
  return sw_py_tuple_from_int64(extents, rank);
}

PyObject* layout_decode(const sw_layout_t* layout, int64_t ordinal) {
  size_t rank = 0;
  int64_t coord[SW_MAX_RANK + 1];
  SW_PY_CHECK(sw_layout_rank(layout, &rank));
  if (rank > SW_MAX_RANK) return PyErr_Format(SW_PY_VALUE_ERROR, "layout rank %zu exceeds %d", rank, SW_MAX_RANK);
  SW_PY_CHECK(sw_layout_decode(layout, ordinal, coord, SW_MAX_RANK));
  return sw_py_tuple_from_int64(coord, rank);
}

PyObject* layout_to_string(const sw_layout_t* layout) {
  size_t length = 0;
  SW_PY_CHECK(sw_layout_to_string(layout, NULL, 0, &length));
  char* text = (char*)malloc(length + 1);
  if (!text) return PyErr_NoMemory();
  sw_error_t* e = sw_layout_to_string(layout, text, length + 1, &length);
  if (e) {
    free(text);
    sw_py_raise(e);
    return NULL;
  }
  PyObject* s = PyUnicode_FromStringAndSize(text, (Py_ssize_t)length);
  free(text);
  return s;
}

PyObject* tensor_shape(const sw_tensor_t* tensor) {
  size_t rank = 0;
  int64_t extents[SW_MAX_RANK + 1];
  SW_PY_CHECK(sw_tensor_rank(tensor, &rank));
  if (rank > SW_MAX_RANK) return PyErr_Format(SW_PY_VALUE_ERROR, "tensor rank %zu exceeds %d", rank, SW_MAX_RANK);
  SW_PY_CHECK(sw_tensor_shape(tensor, extents, SW_MAX_RANK));
  return sw_py_tuple_from_int64(extents, rank);
}

PyObject* tensor_permute(sw_tensor_t* tensor, PyObject* perm) {
  int64_t* values = NULL;
  size_t n = 0;
  if (sw_py_int64_array(perm, &values, &n) < 0) return NULL;
  size_t p[SW_MAX_RANK];
  if (n > SW_MAX_RANK) {
    free(values);
    return PyErr_Format(SW_PY_VALUE_ERROR, "permutation of %zu modes exceeds %d", n, SW_MAX_RANK);
  }
  for (size_t i = 0; i < n; ++i) {
    if (values[i] < 0) {
      long long bad = (long long)values[i];
      free(values);
      return PyErr_Format(SW_PY_INDEX_ERROR, "permutation entry %lld is negative", bad);
    }
    p[i] = (size_t)values[i];
  }
  free(values);
  sw_tensor_t* view = NULL;
  SW_PY_CHECK(sw_tensor_permute(tensor, p, n, &view));
  return sw_py_handle(view, SW_PY_TENSOR);
}
