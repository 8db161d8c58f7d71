/* What the C sources of strideweave._native share (bindings/python/native/).
 *
 * The extension is one module built from the SWIG wrapper (native_wrap.c,
 * generated from ../native.i) and these files: native.i keeps the typemaps
 * and SWIG directives, the functions the module exposes are declared in
 * module.h (which native.i %includes, so SWIG wraps exactly those
 * prototypes) and defined here by area:
 *
 *   errors.c             error classes, raising a library error, exceptions
 *                        kept across a callback, references dropped from any
 *                        thread
 *   convert.c            handles (SWIG pointer objects), integer arguments
 *                        and sequences, tuples, buffers
 *   runtime.c            the runtime, zstd carriers, await waits
 *   tensors.c            layouts, tensor shapes and views, matmul, random,
 *                        cat/stack
 *   buffers_dlpack.c     host memory in and out: external and copied
 *                        buffers, DLPack capsules
 *   tiled_calls.c        tile values, tiled carriers, expert products
 *   policies_callbacks.c LRU policies, Python residency policies, await
 *                        completion callbacks
 *   files.c              file and remote carriers, model files, the parser test hooks
 *   devices.c            the device bridge
 *
 * Not a public header: nothing outside the extension includes it. Not seen
 * by SWIG either (only module.h is).
 *
 * SWIG pointer objects: SWIG's runtime (SWIG_NewPointerObj, SWIG_ConvertPtr,
 * the SWIGTYPE_p_* descriptors) exists only inside the generated wrapper.
 * native.i's %init hands its two conversion functions and the descriptor of
 * each handle type to sw_py_register_swig / sw_py_register_type when the
 * module is imported; sw_py_handle, sw_py_pointer and sw_py_convert then make
 * and read the same objects the generated wrappers do.
 */
#ifndef STRIDEWEAVE_PY_NATIVE_SW_PY_H
#define STRIDEWEAVE_PY_NATIVE_SW_PY_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

/* ---- errors (errors.c) ---- */

/* Codes 1..13 may have a registered class (set_error_classes). */
#define SW_PY_ERROR_CLASSES 14

/* The registered class for `code`, or the built-in `fallback`: argument
 * checks made here raise the same classes as the library's errors. */
PyObject* sw_py_class(sw_error_code_t code, PyObject* fallback);
#define SW_PY_TYPE_ERROR sw_py_class(SW_ERROR_TYPE, PyExc_TypeError)
#define SW_PY_VALUE_ERROR sw_py_class(SW_ERROR_VALUE, PyExc_ValueError)
#define SW_PY_INDEX_ERROR sw_py_class(SW_ERROR_INDEX, PyExc_IndexError)

/* Raises the Python exception for `error` and frees it (the exception a
 * Python residency policy raised, when `error` is the one its trampoline
 * returned for it). */
void sw_py_raise(sw_error_t* error);

/* Keeps the pending Python exception for sw_py_raise and returns the error
 * a callback gives the library for it. Needs the GIL. */
sw_error_t* sw_py_stash_exception(void);

/* Drops a reference from any thread (a pending call where this thread
 * cannot run Python). */
void sw_py_decref_anywhere(PyObject* object);

/* The release callback of external memory: drops the owner it was lent by. */
void sw_py_release_owner(void* user_data);

/* Returns NULL from the calling function with the error raised. */
#define SW_PY_CHECK(call)        \
  do {                           \
    sw_error_t* sw_e_ = (call);  \
    if (sw_e_) {                 \
      sw_py_raise(sw_e_);        \
      return NULL;               \
    }                            \
  } while (0)

/* The same, with the GIL released around the call. */
#define SW_PY_CHECK_NOGIL(call)  \
  do {                           \
    sw_error_t* sw_e_;           \
    Py_BEGIN_ALLOW_THREADS       \
    sw_e_ = (call);              \
    Py_END_ALLOW_THREADS         \
    if (sw_e_) {                 \
      sw_py_raise(sw_e_);        \
      return NULL;               \
    }                            \
  } while (0)

/* ---- handles (convert.c) ---- */

/* The handle types the C sources convert by hand. */
typedef enum sw_py_kind_t {
  SW_PY_RUNTIME,
  SW_PY_LAYOUT,
  SW_PY_CARRIER,
  SW_PY_TENSOR,
  SW_PY_AWAIT,
  SW_PY_TILE_SET,
  SW_PY_TILE_SELECTION,
  SW_PY_RESIDENCY_PLAN,
  SW_PY_LRU_POLICY,
  SW_PY_DEVICE,
  SW_PY_DEVICE_ALLOCATION,
  SW_PY_KINDS
} sw_py_kind_t;

/* SWIG's runtime, as native.i's %init registers it: SWIG_Python_NewPointerObj,
 * SWIG_Python_ConvertPtrAndOwn and the swig_type_info of each kind. */
struct swig_type_info;
typedef PyObject* (*sw_py_new_pointer_fn)(PyObject* self, void* pointer, struct swig_type_info* type, int flags);
typedef int (*sw_py_convert_pointer_fn)(PyObject* object, void** pointer, struct swig_type_info* type, int flags,
                                        int* own);
void sw_py_register_swig(sw_py_new_pointer_fn new_pointer, sw_py_convert_pointer_fn convert_pointer);
void sw_py_register_type(sw_py_kind_t kind, struct swig_type_info* type);

/* A SWIG pointer object without ownership (None for NULL), as an
 * out-parameter of a generated wrapper gives. */
PyObject* sw_py_handle(void* handle, sw_py_kind_t kind);

/* SWIG_ConvertPtr: a status < 0 when `object` is not a `kind` handle. */
int sw_py_convert(PyObject* object, sw_py_kind_t kind, void** out);

/* A borrowed C pointer out of a `kind` handle; None gives NULL. Raises the
 * TYPE class ("expected a <what> handle") otherwise. */
int sw_py_pointer(PyObject* object, sw_py_kind_t kind, void** out, const char* what);

/* ---- values (convert.c) ---- */

/* Converts a sequence of ints to an int64 array (malloc'd; NULL and 0 for an
 * empty sequence). Sets a Python error and returns -1 on failure. */
int sw_py_int64_array(PyObject* seq, int64_t** out, size_t* out_count);

/* An integer argument in [lo, hi] (TypeError for a non-integer, ValueError
 * naming the range otherwise), for the typemaps of native.i. */
int sw_py_signed_arg(PyObject* o, long long lo, long long hi, long long* out);
int sw_py_unsigned_arg(PyObject* o, unsigned long long hi, unsigned long long* out);

/* A tuple of ints; `count` rows of `rank` ints as a tuple of tuples. */
PyObject* sw_py_tuple_from_int64(const int64_t* values, size_t count);
PyObject* sw_py_rows(const int64_t* values, size_t count, size_t rank);

/* A C-contiguous buffer of exactly `bytes` bytes (writable if asked). */
int sw_py_get_buffer(PyObject* object, Py_buffer* view, int writable, size_t bytes);
/* Bytes of `count` elements of `dtype`: whole blocks of a block-quantized
 * dtype (a partial block counts none; the library refuses such counts). */
size_t sw_py_dtype_bytes(sw_dtype_t dtype, size_t count);

/* ---- callbacks (policies_callbacks.c) ---- */

/* The residency policy vtable for tiled_create's `policy` argument (not
 * None): an LRU policy handle's, or a trampoline over a Python planner
 * callable, which then holds a new reference to it (*owns_python_ref 1). */
int sw_py_policy_vtable(PyObject* policy, sw_residency_policy_t* vtable, int* owns_python_ref);

#endif
