/* strideweave._native: conversions (sw_py.h lists the module's files).
 *
 * Handles: SWIG pointer objects made and read through SWIG's own functions,
 * which native.i's %init registers with the descriptor of each handle type
 * (sw_py_register_swig, sw_py_register_type) when the module is imported.
 * Integers: the argument checks native.i's integer typemaps call, and int64
 * arrays from sequences. Tuples of ints, and buffers of an exact size.
 */
#include "module.h"

static sw_py_new_pointer_fn sw_py_new_pointer;
static sw_py_convert_pointer_fn sw_py_convert_pointer;
static struct swig_type_info* sw_py_types[SW_PY_KINDS];

void sw_py_register_swig(sw_py_new_pointer_fn new_pointer, sw_py_convert_pointer_fn convert_pointer) {
  sw_py_new_pointer = new_pointer;
  sw_py_convert_pointer = convert_pointer;
}

void sw_py_register_type(sw_py_kind_t kind, struct swig_type_info* type) { sw_py_types[kind] = type; }

/* SWIG_NewPointerObj(handle, type, 0) outside SWIG's builtin types. */
PyObject* sw_py_handle(void* handle, sw_py_kind_t kind) {
  return sw_py_new_pointer(NULL, handle, sw_py_types[kind], 0);
}

/* SWIG_ConvertPtr(object, out, type, 0). */
int sw_py_convert(PyObject* object, sw_py_kind_t kind, void** out) {
  return sw_py_convert_pointer(object, out, sw_py_types[kind], 0, NULL);
}

int sw_py_pointer(PyObject* object, sw_py_kind_t kind, void** out, const char* what) {
  if (object == Py_None) {
    *out = NULL;
    return 0;
  }
  if (sw_py_convert(object, kind, out) < 0) {
    PyErr_Format(SW_PY_TYPE_ERROR, "expected a %s handle", what);
    return -1;
  }
  return 0;
}

int sw_py_int64_array(PyObject* seq, int64_t** out, size_t* out_count) {
  PyObject* fast = PySequence_Fast(seq, "expected a sequence of integers");
  if (!fast) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  int64_t* values = NULL;
  if (n > 0) {
    values = (int64_t*)malloc((size_t)n * sizeof(int64_t));
    if (!values) {
      Py_DECREF(fast);
      PyErr_NoMemory();
      return -1;
    }
  }
  PyObject** items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (PyBool_Check(items[i])) {
      PyErr_SetString(SW_PY_TYPE_ERROR, "expected an integer, got bool");
      goto fail;
    }
    if (!PyLong_Check(items[i]) && !PyIndex_Check(items[i])) {
      PyErr_Format(SW_PY_TYPE_ERROR, "expected an integer, got %s", Py_TYPE(items[i])->tp_name);
      goto fail;
    }
    long long v = PyLong_AsLongLong(items[i]);
    if (v == -1 && PyErr_Occurred()) {
      if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        PyErr_Format(SW_PY_VALUE_ERROR, "integer %R is outside the 64-bit range", items[i]);
      }
      goto fail;
    }
    values[i] = (int64_t)v;
  }
  Py_DECREF(fast);
  *out = values;
  *out_count = (size_t)n;
  return 0;
fail:
  free(values);
  Py_DECREF(fast);
  return -1;
}

/* Integer arguments: a non-integer is TypeError and a value outside the C
 * type's range ValueError, with messages that name the value and the range,
 * never a generated wrapper (SWIG's own conversions raise OverflowError "in
 * method 'sw_...', argument 3 of type 'size_t'"). */
static int sw_py_index(PyObject* o, PyObject** out) {
  if (!PyLong_Check(o) && !PyIndex_Check(o)) {
    PyErr_Format(SW_PY_TYPE_ERROR, "expected an integer, got %s", Py_TYPE(o)->tp_name);
    return -1;
  }
  *out = PyNumber_Index(o);
  return *out ? 0 : -1;
}

int sw_py_signed_arg(PyObject* o, long long lo, long long hi, long long* out) {
  PyObject* n = NULL;
  if (sw_py_index(o, &n) < 0) return -1;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    Py_DECREF(n);
    return -1;
  }
  if (overflow || v < lo || v > hi) {
    PyErr_Format(SW_PY_VALUE_ERROR, "integer %R is out of range: it must be in [%lld, %lld]", n, lo, hi);
    Py_DECREF(n);
    return -1;
  }
  Py_DECREF(n);
  *out = v;
  return 0;
}

int sw_py_unsigned_arg(PyObject* o, unsigned long long hi, unsigned long long* out) {
  PyObject* n = NULL;
  if (sw_py_index(o, &n) < 0) return -1;
  const unsigned long long v = PyLong_AsUnsignedLongLong(n);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
      Py_DECREF(n);
      return -1;
    }
    PyErr_Clear();
  } else if (v <= hi) {
    Py_DECREF(n);
    *out = v;
    return 0;
  }
  PyErr_Format(SW_PY_VALUE_ERROR, "integer %R is out of range: it must be in [0, %llu]", n, hi);
  Py_DECREF(n);
  return -1;
}

PyObject* sw_py_tuple_from_int64(const int64_t* values, size_t count) {
  PyObject* t = PyTuple_New((Py_ssize_t)count);
  if (!t) return NULL;
  for (size_t i = 0; i < count; ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (!v) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
  }
  return t;
}

/* count rows of `rank` values as a tuple of tuples. */
PyObject* sw_py_rows(const int64_t* values, size_t count, size_t rank) {
  PyObject* t = PyTuple_New((Py_ssize_t)count);
  if (!t) return NULL;
  for (size_t i = 0; i < count; ++i) {
    PyObject* row = sw_py_tuple_from_int64(values + i * rank, rank);
    if (!row) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, (Py_ssize_t)i, row);
  }
  return t;
}

/* A buffer of exactly `bytes` bytes (writable if asked). */
int sw_py_get_buffer(PyObject* object, Py_buffer* view, int writable, size_t bytes) {
  if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
  if ((size_t)view->len != bytes) {
    PyErr_Format(SW_PY_VALUE_ERROR, "the buffer holds %zd bytes; %zu are needed", view->len, bytes);
    PyBuffer_Release(view);
    return -1;
  }
  return 0;
}
