/* strideweave._native: errors (sw_py.h lists the module's files).
 *
 * The exception class registered for each error code (set_error_classes),
 * the exception raised for a library error (sw_py_raise; native.i's
 * sw_error_t* typemap calls it too), a Python exception kept across a
 * residency policy callback until the library hands back the error made for
 * it, and references dropped from threads that may not hold the GIL.
 */
#include "module.h"

#include <stdio.h>

static PyObject* sw_py_error_classes[SW_PY_ERROR_CLASSES];

/* The registered class for `code`, or the built-in `fallback`: argument
 * checks made here raise the same classes as the library's errors. */
PyObject* sw_py_class(sw_error_code_t code, PyObject* fallback) {
  PyObject* cls = ((int)code > 0 && (int)code < SW_PY_ERROR_CLASSES) ? sw_py_error_classes[code] : NULL;
  return cls ? cls : fallback;
}

/* A Python exception raised inside a residency policy callback, kept until
 * the library hands back the error the trampoline returned for it: then the
 * original exception object is raised in the calling frame. Per thread: the
 * library calls a policy on the thread that made the request. */
typedef struct sw_py_stash_t {
  PyObject* type;
  PyObject* value;
  PyObject* traceback;
  sw_error_code_t code;
  char* message;
} sw_py_stash_t;
static _Thread_local sw_py_stash_t sw_py_stash;

static void sw_py_stash_clear(void) {
  Py_CLEAR(sw_py_stash.type);
  Py_CLEAR(sw_py_stash.value);
  Py_CLEAR(sw_py_stash.traceback);
  free(sw_py_stash.message);
  sw_py_stash.message = NULL;
}

/* Raises the Python exception for `error` and frees it. */
void sw_py_raise(sw_error_t* error) {
  sw_error_code_t code = sw_error_code(error);
  const char* message = sw_error_message(error);
  if (sw_py_stash.type) {
    if (sw_py_stash.code == code && sw_py_stash.message && strcmp(sw_py_stash.message, message) == 0) {
      PyErr_Restore(sw_py_stash.type, sw_py_stash.value, sw_py_stash.traceback);
      sw_py_stash.type = sw_py_stash.value = sw_py_stash.traceback = NULL;
      sw_py_stash_clear();
      sw_error_free(error);
      return;
    }
    sw_py_stash_clear();
  }
  PyObject* cls = NULL;
  if ((int)code > 0 && (int)code < SW_PY_ERROR_CLASSES) cls = sw_py_error_classes[code];
  if (!cls) cls = PyExc_RuntimeError;
  PyObject* text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
  sw_error_free(error);
  if (!text) return;
  PyObject* exc = PyObject_CallOneArg(cls, text);
  Py_DECREF(text);
  if (!exc) return;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

/* The error code a Python exception stands for: the code of a
 * strideweave.Error, else that of its built-in kind (INTERNAL otherwise). */
static sw_error_code_t sw_py_exception_code(PyObject* value) {
  for (int code = SW_PY_ERROR_CLASSES - 1; code > 0; --code)
    if (sw_py_error_classes[code] && value && PyErr_GivenExceptionMatches(value, sw_py_error_classes[code]))
      return (sw_error_code_t)code;
  static const struct { sw_error_code_t code; PyObject** kind; } builtins[] = {
      {SW_ERROR_TIMEOUT, &PyExc_TimeoutError}, {SW_ERROR_INDEX, &PyExc_IndexError},
      {SW_ERROR_TYPE, &PyExc_TypeError}, {SW_ERROR_VALUE, &PyExc_ValueError},
      {SW_ERROR_UNSUPPORTED, &PyExc_NotImplementedError}, {SW_ERROR_OUT_OF_MEMORY, &PyExc_MemoryError},
      {SW_ERROR_IO, &PyExc_OSError}, {SW_ERROR_STATE, &PyExc_RuntimeError}};
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; ++i)
    if (value && PyErr_GivenExceptionMatches(value, *builtins[i].kind)) return builtins[i].code;
  return SW_ERROR_INTERNAL;
}

/* Keeps the pending Python exception for sw_py_raise and returns the error
 * the callback gives the library: the exception's code and text, so C code
 * between the callback and Python sees what happened. Needs the GIL. */
sw_error_t* sw_py_stash_exception(void) {
  sw_py_stash_clear();
  PyErr_Fetch(&sw_py_stash.type, &sw_py_stash.value, &sw_py_stash.traceback);
  PyErr_NormalizeException(&sw_py_stash.type, &sw_py_stash.value, &sw_py_stash.traceback);
  if (sw_py_stash.traceback && sw_py_stash.value)
    PyException_SetTraceback(sw_py_stash.value, sw_py_stash.traceback);
  const char* text = "";
  PyObject* str = sw_py_stash.value ? PyObject_Str(sw_py_stash.value) : NULL;
  if (str) text = PyUnicode_AsUTF8(str);
  if (!str || !text) {
    PyErr_Clear();
    text = "";
  }
  char message[512];
  snprintf(message, sizeof message, "residency policy raised %s: %s",
           sw_py_stash.type ? ((PyTypeObject*)sw_py_stash.type)->tp_name : "an exception", text);
  Py_XDECREF(str);
  sw_error_t* e = sw_error_create(sw_py_exception_code(sw_py_stash.value), message);
  sw_py_stash.code = sw_error_code(e);
  sw_py_stash.message = strdup(sw_error_message(e));
  return e;
}

/* Drops a reference from any thread: directly where this thread may run
 * Python, else through the interpreter's pending calls. */
static int sw_py_decref_pending(void* object) {
  Py_DECREF((PyObject*)object);
  return 0;
}

void sw_py_decref_anywhere(PyObject* object) {
  if (!object) return;
  if (!Py_IsInitialized()) return;
  if (PyGILState_Check()) {
    Py_DECREF(object);
  } else if (PyGILState_GetThisThreadState() != NULL) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(object);
    PyGILState_Release(g);
  } else {
    (void)Py_AddPendingCall(sw_py_decref_pending, object);
  }
}

/* The release callback of external memory: drops the owner it was lent by. */
void sw_py_release_owner(void* user_data) { sw_py_decref_anywhere((PyObject*)user_data); }

/* Registers the exception class raised for each error code (a sequence
 * indexed by code; entry 0 unused). */
PyObject* set_error_classes(PyObject* classes) {
  PyObject* fast = PySequence_Fast(classes, "expected a sequence of exception classes");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < SW_PY_ERROR_CLASSES; ++i) {
    PyObject* cls = i < n ? PySequence_Fast_GET_ITEM(fast, i) : Py_None;
    Py_XDECREF(sw_py_error_classes[i]);
    sw_py_error_classes[i] = NULL;
    if (cls != Py_None) {
      Py_INCREF(cls);
      sw_py_error_classes[i] = cls;
    }
  }
  Py_DECREF(fast);
  Py_RETURN_NONE;
}
