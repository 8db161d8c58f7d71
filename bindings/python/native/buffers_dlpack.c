/* strideweave._native: host memory in and out (sw_py.h lists the module's
 * files).
 *
 * Buffers: a CPU carrier over a NumPy array's memory (the array kept alive
 * until the library releases the memory, from any thread) or over a copy of
 * a buffer, and copies between carriers or tensors and buffers of an exact
 * size, with the GIL released around the copy.
 *
 * DLPack: the library's exports as "dltensor"/"dltensor_versioned" capsules
 * leased to a Python owner, and the import of a producer's capsule.
 */
#include "module.h"

/* A CPU carrier over `bytes` bytes of host memory at `address` (a Python
 * int) without a copy. `owner` is the object that keeps the memory alive (a
 * NumPy array): the carrier holds a reference to it and drops it when it
 * releases the memory, from whichever thread that happens on. */
PyObject* carrier_create_cpu_external(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* owner, PyObject* address,
                                      size_t bytes, bool read_only) {
  void* data = PyLong_AsVoidPtr(address);
  if (!data && PyErr_Occurred()) return NULL;
  sw_external_memory_desc_t desc;
  sw_external_memory_desc_init(&desc);
  desc.data = data;
  desc.bytes = bytes;
  desc.read_only = read_only;
  desc.release = sw_py_release_owner;
  desc.user_data = owner;
  Py_INCREF(owner);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_create_cpu_external(runtime, dtype, &desc, &carrier);
  if (e) {
    Py_DECREF(owner); /* on failure the library did not take the memory */
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(carrier, SW_PY_CARRIER);
}

size_t sw_py_dtype_bytes(sw_dtype_t dtype, size_t count) {
  const size_t block = sw_dtype_block_elements(dtype);
  if (block > 1) return count / block * sw_dtype_block_bytes(dtype);
  return count * sw_dtype_size(dtype);
}

/* A CPU carrier holding a copy of `data` (a contiguous buffer of
 * size * dtype size bytes). */
PyObject* carrier_create_cpu_from(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* data, size_t size) {
  Py_buffer view;
  if (sw_py_get_buffer(data, &view, 0, sw_py_dtype_bytes(dtype, size)) < 0) return NULL;
  sw_carrier_t* carrier = NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_create_cpu_from(runtime, dtype, view.buf, size, &carrier);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(carrier, SW_PY_CARRIER);
}

/* Reads `count` slots from `first_slot` into a writable buffer of exactly
 * count * dtype size bytes. */
PyObject* carrier_read_into(sw_carrier_t* carrier, size_t first_slot, size_t count, PyObject* destination) {
  sw_dtype_t dtype;
  SW_PY_CHECK(sw_carrier_dtype(carrier, &dtype));
  Py_buffer view;
  if (sw_py_get_buffer(destination, &view, 1, sw_py_dtype_bytes(dtype, count)) < 0) return NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_read(carrier, first_slot, count, view.buf);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}

PyObject* carrier_write_from(sw_carrier_t* carrier, size_t first_slot, size_t count, PyObject* source) {
  sw_dtype_t dtype;
  SW_PY_CHECK(sw_carrier_dtype(carrier, &dtype));
  Py_buffer view;
  if (sw_py_get_buffer(source, &view, 0, sw_py_dtype_bytes(dtype, count)) < 0) return NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_write(carrier, first_slot, count, view.buf);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* Copies every element, first mode fastest, into a writable buffer of
 * exactly numel * dtype size bytes. */
PyObject* tensor_read_into(const sw_tensor_t* tensor, PyObject* destination) {
  int64_t numel = 0;
  sw_dtype_t dtype;
  SW_PY_CHECK(sw_tensor_numel(tensor, &numel));
  SW_PY_CHECK(sw_tensor_dtype(tensor, &dtype));
  Py_buffer view;
  size_t bytes = sw_py_dtype_bytes(dtype, (size_t)numel);
  if (sw_py_get_buffer(destination, &view, 1, bytes) < 0) return NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_tensor_read(tensor, view.buf, bytes);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}

PyObject* tensor_write_from(sw_tensor_t* tensor, PyObject* source) {
  int64_t numel = 0;
  sw_dtype_t dtype;
  SW_PY_CHECK(sw_tensor_numel(tensor, &numel));
  SW_PY_CHECK(sw_tensor_dtype(tensor, &dtype));
  Py_buffer view;
  size_t bytes = sw_py_dtype_bytes(dtype, (size_t)numel);
  if (sw_py_get_buffer(source, &view, 0, bytes) < 0) return NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_tensor_write(tensor, view.buf, bytes);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* The structs of the DLPack header the library builds against
 * (third_party/dlpack). */
#include <dlpack/dlpack.h>

typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;

/* An export of the library (sw_tensor_to_dlpack[_versioned]) handed to a
 * Python consumer: the managed tensor's own context and deleter move here,
 * and the deleter installed in their place puts them back, runs the
 * library's and then drops `owner` (what the package counts as an export of
 * the carrier), on whichever thread the consumer deletes the tensor. */
typedef struct {
  void* manager_ctx;
  union {
    void (*legacy)(DLManagedTensor*);
    void (*versioned)(DLManagedTensorVersioned*);
  } deleter;
  PyObject* owner;
} sw_py_dlpack_lease_t;

static void sw_py_dlpack_return_legacy(DLManagedTensor* m) {
  sw_py_dlpack_lease_t* lease = (sw_py_dlpack_lease_t*)m->manager_ctx;
  PyObject* owner = lease->owner;
  m->manager_ctx = lease->manager_ctx;
  m->deleter = lease->deleter.legacy;
  free(lease);
  m->deleter(m);
  sw_py_decref_anywhere(owner);
}
static void sw_py_dlpack_return_versioned(DLManagedTensorVersioned* m) {
  sw_py_dlpack_lease_t* lease = (sw_py_dlpack_lease_t*)m->manager_ctx;
  PyObject* owner = lease->owner;
  m->manager_ctx = lease->manager_ctx;
  m->deleter = lease->deleter.versioned;
  free(lease);
  m->deleter(m);
  sw_py_decref_anywhere(owner);
}

/* Capsule destructors: a capsule never consumed still owns its tensor. */
static void sw_py_dlpack_capsule_legacy(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter) m->deleter(m);
  }
}
static void sw_py_dlpack_capsule_versioned(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m && m->deleter) m->deleter(m);
  }
}

/* The capsule `name` over the library's managed tensor `m`, leased with
 * `owner` (see sw_py_dlpack_lease_t); on failure the export is deleted. */
static PyObject* sw_py_dlpack_capsule(void* m, bool versioned, PyObject* owner) {
  DLManagedTensor* legacy = (DLManagedTensor*)m;
  DLManagedTensorVersioned* current = (DLManagedTensorVersioned*)m;
  sw_py_dlpack_lease_t* lease = (sw_py_dlpack_lease_t*)calloc(1, sizeof *lease);
  if (!lease) {
    if (versioned)
      current->deleter(current);
    else
      legacy->deleter(legacy);
    return PyErr_NoMemory();
  }
  Py_INCREF(owner);
  lease->owner = owner;
  if (versioned) {
    lease->manager_ctx = current->manager_ctx;
    lease->deleter.versioned = current->deleter;
    current->manager_ctx = lease;
    current->deleter = sw_py_dlpack_return_versioned;
  } else {
    lease->manager_ctx = legacy->manager_ctx;
    lease->deleter.legacy = legacy->deleter;
    legacy->manager_ctx = lease;
    legacy->deleter = sw_py_dlpack_return_legacy;
  }
  PyObject* capsule = versioned
      ? PyCapsule_New(m, "dltensor_versioned", sw_py_dlpack_capsule_versioned)
      : PyCapsule_New(m, "dltensor", sw_py_dlpack_capsule_legacy);
  if (!capsule) {
    if (versioned)
      current->deleter(current);
    else
      legacy->deleter(legacy);
  }
  return capsule;
}

/* An imported tensor: the consumer side keeps the producer's managed
 * tensor until this capsule is collected. */
static void sw_py_dlpack_keeper_destroy(PyObject* capsule) {
  void* p = PyCapsule_GetPointer(capsule, "strideweave.dlpack_keeper");
  void* ctx = PyCapsule_GetContext(capsule);
  if (!p) {
    PyErr_Clear();
    return;
  }
  if (ctx == (void*)1) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)p;
    if (m->deleter) m->deleter(m);
  } else {
    DLManagedTensor* m = (DLManagedTensor*)p;
    if (m->deleter) m->deleter(m);
  }
}

/* A "dltensor" capsule over the library's legacy export of `tensor`
 * (sw_tensor_to_dlpack); `owner` stays alive until the consumer deletes
 * the tensor. */
PyObject* tensor_dlpack(sw_tensor_t* tensor, PyObject* owner) {
  void* m = NULL;
  SW_PY_CHECK(sw_tensor_to_dlpack(tensor, &m));
  return sw_py_dlpack_capsule(m, false, owner);
}

/* A "dltensor_versioned" capsule over the library's versioned export of
 * `tensor` for a consumer that reads up to max_major.max_minor
 * (sw_tensor_to_dlpack_versioned); `copied` marks a tensor made for the
 * export, which the consumer then owns (DLPACK_FLAG_BITMASK_IS_COPIED). */
PyObject* tensor_dlpack_versioned(sw_tensor_t* tensor, uint32_t max_major, uint32_t max_minor, PyObject* owner,
                                  bool copied) {
  void* m = NULL;
  SW_PY_CHECK(sw_tensor_to_dlpack_versioned(tensor, max_major, max_minor, &m));
  if (copied) ((DLManagedTensorVersioned*)m)->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  return sw_py_dlpack_capsule(m, true, owner);
}

/* Consumes a "dltensor" or "dltensor_versioned" capsule (renaming it to its
 * "used_" name, as the protocol asks) and describes it:
 * (address, device_type, device_id, code, bits, lanes, shape, strides or
 *  None, read_only, keeper), where `keeper` owns the producer's tensor and
 * calls its deleter when collected. */
PyObject* dlpack_import(PyObject* capsule) {
  DLTensor* t = NULL;
  void* managed = NULL;
  int versioned = 0;
  int read_only = 0;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m->version.major != DLPACK_MAJOR_VERSION)
      return PyErr_Format(PyExc_BufferError, "DLPack version %u.%u is not supported", m->version.major,
                          m->version.minor);
    t = &m->dl_tensor;
    managed = m;
    versioned = 1;
    read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    t = &m->dl_tensor;
    managed = m;
  } else {
    return PyErr_Format(SW_PY_TYPE_ERROR, "expected an unconsumed DLPack capsule");
  }
  if (t->ndim < 0 || t->ndim > 64) return PyErr_Format(PyExc_BufferError, "DLPack ndim %d", (int)t->ndim);
  PyObject* shape = PyTuple_New(t->ndim);
  PyObject* strides = t->strides ? PyTuple_New(t->ndim) : (Py_INCREF(Py_None), Py_None);
  if (!shape || !strides) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  for (int i = 0; i < t->ndim; ++i) {
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
    if (t->strides) PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(t->strides[i]));
  }
  PyObject* keeper = PyCapsule_New(managed, "strideweave.dlpack_keeper", sw_py_dlpack_keeper_destroy);
  if (!keeper) {
    Py_DECREF(shape);
    Py_DECREF(strides);
    return NULL;
  }
  PyCapsule_SetContext(keeper, versioned ? (void*)1 : (void*)0);
  if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0) {
    PyCapsule_SetPointer(keeper, managed); /* keep it valid; then neutralise */
    PyCapsule_SetDestructor(keeper, NULL);
    Py_DECREF(keeper);
    Py_DECREF(shape);
    Py_DECREF(strides);
    return NULL;
  }
  char* address = (char*)t->data + t->byte_offset;
  return Py_BuildValue("(NiiiiiNNON)", PyLong_FromVoidPtr(address), (int)t->device.device_type,
                       (int)t->device.device_id, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes, shape,
                       strides, read_only ? Py_True : Py_False, keeper);
}
