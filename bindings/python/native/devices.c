/* strideweave._native: the device bridge (sw_py.h lists the module's
 * files): the fake device of the tests, allocations from a spec, views
 * described as tuples, and synchronous copies with buffers.
 *
 * device_create_fake returns the library's error: SWIG generates its
 * Python call.
 */
#include "module.h"

/* The fake backend's allocate hook for memory the host cannot address (as
 * device-local GPU memory): no host pointer, so views have none either. */
static sw_error_code_t sw_py_fake_unmapped_allocate(void* user_data, uint64_t allocation_id, uint64_t bytes,
                                                    uint64_t alignment, void** out_host_pointer) {
  *out_host_pointer = NULL;
  return SW_OK;
}

/* sw_device_create_fake: host memory, or (host_visible false) memory the
 * host cannot address, whose views have no pointer and whose copies fail. */
sw_error_t* device_create_fake(sw_runtime_t* runtime, bool host_visible, sw_device_t** out_device) {
  sw_fake_device_vtable_t vtable;
  sw_fake_device_vtable_init(&vtable);
  vtable.allocate = sw_py_fake_unmapped_allocate;
  return sw_device_create_fake(runtime, host_visible ? NULL : &vtable, out_device);
}

/* sw_device_alloc with the spec's fields as arguments, `shape` a sequence
 * of ints. */
PyObject* device_alloc(sw_device_t* device, sw_dtype_t dtype, PyObject* shape, uint64_t extent_bytes,
                       uint64_t max_extent_bytes, uint64_t alignment) {
  int64_t* values = NULL;
  size_t rank = 0;
  if (sw_py_int64_array(shape, &values, &rank) < 0) return NULL;
  if (rank > SW_MAX_RANK) {
    free(values);
    return PyErr_Format(SW_PY_VALUE_ERROR, "a shape of rank %zu exceeds the maximum rank %d", rank, SW_MAX_RANK);
  }
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.dtype = dtype;
  spec.rank = rank;
  if (rank) memcpy(spec.shape, values, rank * sizeof(int64_t));
  free(values);
  spec.max_extent_bytes = max_extent_bytes;
  spec.alignment = alignment;
  sw_device_allocation_t* allocation = NULL;
  SW_PY_CHECK_NOGIL(sw_device_alloc(device, &spec, extent_bytes, &allocation));
  return sw_py_handle(allocation, SW_PY_DEVICE_ALLOCATION);
}

/* sw_device_view_describe: (pointer, dtype, shape, byte strides), the
 * pointer 0 when the memory is not host visible. */
PyObject* device_view_describe(const sw_device_view_t* view) {
  sw_view_info_t info;
  sw_view_info_init(&info);
  SW_PY_CHECK(sw_device_view_describe(view, &info));
  PyObject* shape = sw_py_tuple_from_int64(info.shape, info.rank);
  PyObject* strides = shape ? sw_py_tuple_from_int64(info.strides_bytes, info.rank) : NULL;
  if (!strides) {
    Py_XDECREF(shape);
    return NULL;
  }
  return Py_BuildValue("(NiNN)", PyLong_FromVoidPtr(info.pointer), (int)info.dtype, shape, strides);
}

/* A synchronous copy between a contiguous buffer and [offset, offset +
 * len(buffer)) of the allocation: host_to_device reads `buffer`, else
 * it is written (and must be writable). The GIL is released. */
PyObject* device_copy(sw_device_allocation_t* allocation, uint64_t offset, PyObject* buffer, bool host_to_device) {
  Py_buffer view;
  if (PyObject_GetBuffer(buffer, &view, PyBUF_ANY_CONTIGUOUS | (host_to_device ? 0 : PyBUF_WRITABLE)) < 0)
    return NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = host_to_device ? sw_device_host_to_device(allocation, offset, view.buf, (uint64_t)view.len, false, NULL)
                     : sw_device_device_to_host(allocation, offset, view.buf, (uint64_t)view.len, false, NULL);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}
