/* strideweave._native: residency policies and host callbacks (sw_py.h lists
 * the module's files).
 *
 * The built-in LRU policy (create, stats, a dry-run plan), the trampoline
 * that makes a Python planner callable a residency policy (its exceptions
 * kept and re-raised in the frame that made the request, errors.c), and the
 * await completion callback that calls a Python callable. The trampolines
 * run on library threads: they take the GIL themselves.
 */
#include "module.h"

/* What the built-in LRU policy would plan for `required` (a new plan
 * handle). No request carries the plan out, so it is reported back as not
 * committed at once: the policy's view and statistics stay as they were. */
PyObject* lru_policy_plan(sw_lru_policy_t* policy, const sw_tile_set_t* required, int purpose) {
  sw_residency_policy_t vtable;
  SW_PY_CHECK(sw_lru_policy_as_residency_policy(policy, &vtable));
  sw_residency_plan_t* plan = NULL;
  sw_error_t* e = vtable.plan(vtable.user_data, required, (sw_residency_purpose_t)purpose, &plan);
  if (!e && plan && vtable.outcome) {
    sw_tile_set_t* none = NULL;
    e = sw_tile_set_create(NULL, 0, 0, &none);
    if (!e) vtable.outcome(vtable.user_data, plan, false, none, none);
    sw_tile_set_release(none);
  }
  if (vtable.destroy) vtable.destroy(vtable.user_data);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(plan, SW_PY_RESIDENCY_PLAN);
}

PyObject* lru_policy_stats(const sw_lru_policy_t* policy) {
  sw_lru_stats_t stats;
  sw_lru_stats_init(&stats);
  SW_PY_CHECK(sw_lru_policy_stats(policy, &stats));
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "requests", (unsigned long long)stats.requests, "hits",
                       (unsigned long long)stats.hits, "misses", (unsigned long long)stats.misses, "promoted",
                       (unsigned long long)stats.promoted, "evicted", (unsigned long long)stats.evicted,
                       "transient", (unsigned long long)stats.transient);
}

/* An LRU policy of `budget_tiles` tiles or `budget_bytes` bytes (exactly one nonzero). */
sw_error_t* lru_policy_create(unsigned long long budget_tiles, unsigned long long budget_bytes,
                              sw_lru_policy_t** out_policy) {
  sw_lru_policy_desc_t desc;
  sw_lru_policy_desc_init(&desc);
  desc.budget_tiles = (size_t)budget_tiles;
  desc.budget_bytes = (uint64_t)budget_bytes;
  return sw_lru_policy_create_ex(&desc, out_policy);
}

/* The policy vtable for a Python callable `planner(required, purpose)`:
 * `required` is a borrowed sw_tile_set_t handle valid for the call only,
 * `purpose` the purpose's name. It returns a new sw_residency_plan_t
 * reference, which the library takes over (the Python object that made it
 * may be gone by then), or None for "no plan",
 * which the library reports as TYPE. A Python exception is stashed and
 * re-raised unchanged in the frame that made the request. */
static sw_error_t* sw_py_policy_plan(void* user_data, const sw_tile_set_t* required,
                                     sw_residency_purpose_t purpose, sw_residency_plan_t** out_plan) {
  PyGILState_STATE gil = PyGILState_Ensure();
  sw_error_t* error = NULL;
  *out_plan = NULL;
  PyObject* handle = sw_py_handle((void*)required, SW_PY_TILE_SET);
  PyObject* result = NULL;
  if (handle) {
    result = PyObject_CallFunction((PyObject*)user_data, "Os", handle, sw_residency_purpose_name(purpose));
    Py_DECREF(handle);
  }
  if (!result) {
    error = sw_py_stash_exception();
  } else if (result != Py_None) {
    void* plan = NULL;
    if (sw_py_convert(result, SW_PY_RESIDENCY_PLAN, &plan) < 0 || !plan) {
      PyErr_SetString(SW_PY_TYPE_ERROR, "the policy adapter returned something other than a plan handle");
      error = sw_py_stash_exception();
    } else {
      *out_plan = (sw_residency_plan_t*)plan;
    }
  }
  Py_XDECREF(result);
  PyGILState_Release(gil);
  return error;
}

static void sw_py_policy_destroy(void* user_data) { sw_py_decref_anywhere((PyObject*)user_data); }

int sw_py_policy_vtable(PyObject* policy, sw_residency_policy_t* vtable, int* owns_python_ref) {
  void* lru = NULL;
  *owns_python_ref = 0;
  if (sw_py_convert(policy, SW_PY_LRU_POLICY, &lru) >= 0 && lru) {
    sw_error_t* e = sw_lru_policy_as_residency_policy((sw_lru_policy_t*)lru, vtable);
    if (e) {
      sw_py_raise(e);
      return -1;
    }
    return 0;
  }
  PyErr_Clear();
  if (!PyCallable_Check(policy)) {
    PyErr_SetString(SW_PY_TYPE_ERROR, "policy must be None, an LRU policy handle or a callable");
    return -1;
  }
  sw_residency_policy_init(vtable);
  Py_INCREF(policy);
  *owns_python_ref = 1;
  vtable->user_data = policy;
  vtable->plan = sw_py_policy_plan;
  vtable->destroy = sw_py_policy_destroy;
  return 0;
}

/* Waiting-thread completion callback: calls the Python callable in
 * user_data with (code, message) and drops it. */
static void sw_py_await_callback(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  (void)await;
  if (!Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* fn = (PyObject*)user_data;
  PyObject* r = PyObject_CallFunction(fn, "is", (int)code, message);
  if (!r) PyErr_WriteUnraisable(fn);
  Py_XDECREF(r);
  Py_DECREF(fn);
  PyGILState_Release(gil);
}

/* Installs `callback(code, message)` to fire once on a waiting thread (one
 * that waits on the await or calls sw_runtime_process_events). */
PyObject* await_set_callback(sw_await_t* await, PyObject* callback) {
  if (!PyCallable_Check(callback)) return PyErr_Format(SW_PY_TYPE_ERROR, "callback must be callable");
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.mode = SW_CALLBACK_MODE_WAITING_THREAD;
  info.callback = sw_py_await_callback;
  info.user_data = callback;
  Py_INCREF(callback);
  sw_error_t* e = sw_await_set_callback(await, &info);
  if (e) {
    Py_DECREF(callback);
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}
