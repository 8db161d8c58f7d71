/* strideweave._native: the runtime, zstd carriers and await waits (sw_py.h
 * lists the module's files).
 *
 * runtime_create and carrier_create_zstd fill a descriptor struct and return
 * the library's error: SWIG generates their Python calls, releasing the GIL
 * (native.i lists them as blocking). await_wait is written in Python's C
 * API: it waits in slices so that a signal handler can interrupt it.
 */
#include "module.h"

/* sw_runtime_create with the desc fields Python exposes. */
sw_error_t* runtime_create(unsigned int compute_threads, unsigned int worker_threads, sw_runtime_t** out_runtime) {
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.compute_threads = compute_threads;
  desc.worker_threads = worker_threads;
  return sw_runtime_create(&desc, out_runtime);
}

/* sw_carrier_create_zstd with the desc fields Python exposes. */
sw_error_t* carrier_create_zstd(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size, int level,
                                size_t frame_elements, int shuffle, sw_carrier_t** out_carrier) {
  sw_zstd_carrier_desc_t desc;
  sw_zstd_carrier_desc_init(&desc);
  desc.level = level;
  desc.frame_elements = frame_elements;
  desc.shuffle = shuffle;
  return sw_carrier_create_zstd(runtime, dtype, size, &desc, out_carrier);
}

/* sw_await_wait with the GIL released, in slices so that Ctrl-C (a pending
 * signal handler raising) interrupts it. timeout_ns < 0: no limit. */
PyObject* await_wait(sw_await_t* await, int64_t timeout_ns) {
  const int64_t slice = 50 * 1000 * 1000;
  int64_t left = timeout_ns;
  for (;;) {
    int64_t step = (left < 0 || left > slice) ? slice : left;
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = sw_await_wait(await, step);
    Py_END_ALLOW_THREADS
    if (!e) Py_RETURN_NONE;
    if (sw_error_code(e) != SW_ERROR_TIMEOUT || (left >= 0 && left <= step)) {
      if (sw_error_code(e) == SW_ERROR_TIMEOUT && timeout_ns >= 0) {
        /* Report the caller's whole timeout, not the last slice. */
        sw_error_free(e);
        e = NULL;
        PyObject* cls = sw_py_class(SW_ERROR_TIMEOUT, PyExc_TimeoutError);
        PyObject* seconds = PyFloat_FromDouble((double)timeout_ns / 1e9);
        PyObject* text = seconds ? PyUnicode_FromFormat("wait timed out after %S s; the work is still pending",
                                                        seconds)
                                 : NULL;
        Py_XDECREF(seconds);
        if (text) {
          PyErr_SetObject(cls, text);
          Py_DECREF(text);
        }
        return NULL;
      }
      sw_py_raise(e);
      return NULL;
    }
    sw_error_free(e);
    if (left >= 0) left -= step;
    if (PyErr_CheckSignals() < 0) return NULL;
  }
}
