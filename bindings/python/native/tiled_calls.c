/* strideweave._native: tile values and tiled carriers (sw_py.h lists the
 * module's files): TileSets and TileSelections from and to tuples,
 * tiled_create with its policy, shapes and tile states, residency
 * transitions, and the expert products over TiledEvictables.
 *
 * tiled_prefetch, tiled_expert_matmul and tiled_expert_ffn return the
 * library's error: SWIG generates their Python calls, releasing the GIL
 * (native.i lists them as blocking).
 */
#include "module.h"

/* A TileSet from a sequence of `count * rank` ints (rows of `rank`). */
PyObject* tile_set_create(PyObject* flat, size_t rank) {
  int64_t* values = NULL;
  size_t n = 0;
  if (sw_py_int64_array(flat, &values, &n) < 0) return NULL;
  size_t count = rank ? n / rank : 0;
  if (rank && count * rank != n) {
    free(values);
    return PyErr_Format(SW_PY_VALUE_ERROR, "%zu values are not rows of %zu", n, rank);
  }
  sw_tile_set_t* set = NULL;
  sw_error_t* e = sw_tile_set_create(values, count, rank, &set);
  free(values);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(set, SW_PY_TILE_SET);
}

/* The coordinates of a TileSet as a tuple of tuples, in the set's order. */
PyObject* tile_set_coordinates(const sw_tile_set_t* set) {
  size_t count = 0, rank = 0;
  SW_PY_CHECK(sw_tile_set_count(set, &count));
  SW_PY_CHECK(sw_tile_set_rank(set, &rank));
  if (count == 0) return PyTuple_New(0);
  int64_t* values = (int64_t*)malloc(count * rank * sizeof(int64_t));
  if (!values) return PyErr_NoMemory();
  sw_error_t* e = sw_tile_set_coordinates(set, values, count * rank);
  if (e) {
    free(values);
    sw_py_raise(e);
    return NULL;
  }
  PyObject* rows = sw_py_rows(values, count, rank);
  free(values);
  return rows;
}

/* A TileSelection from a sequence of int sequences. */
PyObject* tile_selection_create(PyObject* per_axis) {
  PyObject* fast = PySequence_Fast(per_axis, "expected a sequence of axes");
  if (!fast) return NULL;
  Py_ssize_t rank = PySequence_Fast_GET_SIZE(fast);
  PyObject* result = NULL;
  int64_t** axes = (int64_t**)calloc((size_t)rank + 1, sizeof(int64_t*));
  size_t* counts = (size_t*)calloc((size_t)rank + 1, sizeof(size_t));
  if (!axes || !counts) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < rank; ++i)
    if (sw_py_int64_array(PySequence_Fast_GET_ITEM(fast, i), &axes[i], &counts[i]) < 0) goto done;
  {
    sw_tile_selection_t* selection = NULL;
    sw_error_t* e = sw_tile_selection_create((const int64_t* const*)axes, counts, (size_t)rank, &selection);
    if (e) {
      sw_py_raise(e);
      goto done;
    }
    result = sw_py_handle(selection, SW_PY_TILE_SELECTION);
  }
done:
  if (axes)
    for (Py_ssize_t i = 0; i < rank; ++i) free(axes[i]);
  free(axes);
  free(counts);
  Py_DECREF(fast);
  return result;
}

/* The selection's source coordinates, first mode fastest. */
PyObject* tile_selection_coordinates(const sw_tile_selection_t* selection) {
  size_t count = 0, rank = 0;
  SW_PY_CHECK(sw_tile_selection_count(selection, &count));
  SW_PY_CHECK(sw_tile_selection_rank(selection, &rank));
  int64_t* values = (int64_t*)malloc(count * rank * sizeof(int64_t) + 1);
  if (!values) return PyErr_NoMemory();
  sw_error_t* e = sw_tile_selection_coordinates(selection, values, count * rank);
  if (e) {
    free(values);
    sw_py_raise(e);
    return NULL;
  }
  PyObject* rows = sw_py_rows(values, count, rank);
  free(values);
  return rows;
}

/* sw_tiled_create. `policy` is None, an LRU policy handle, or a Python
 * planner callable (see sw_py_policy_vtable). */
PyObject* tiled_create(sw_carrier_t* primary, sw_carrier_t* secondary, PyObject* grid_shape, PyObject* tile_shape,
                       PyObject* policy) {
  int64_t *grid = NULL, *tile = NULL;
  size_t n = 0, m = 0;
  PyObject* result = NULL;
  sw_residency_policy_t vtable;
  const sw_residency_policy_t* used = NULL;
  int owns_python_ref = 0;
  if (sw_py_int64_array(grid_shape, &grid, &n) < 0) goto done;
  if (sw_py_int64_array(tile_shape, &tile, &m) < 0) goto done;
  if (n != m) {
    PyErr_SetString(SW_PY_VALUE_ERROR, "grid_shape and tile_shape differ in rank");
    goto done;
  }
  if (policy != Py_None) {
    if (sw_py_policy_vtable(policy, &vtable, &owns_python_ref) < 0) goto done;
    used = &vtable;
  }
  {
    sw_carrier_t* tiled = NULL;
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = sw_tiled_create(primary, secondary, grid, tile, n, used, &tiled);
    Py_END_ALLOW_THREADS
    if (e) {
      /* On failure the library did not take the policy: undo its reference. */
      if (used) {
        if (owns_python_ref) Py_DECREF(policy);
        else if (vtable.destroy) vtable.destroy(vtable.user_data);
      }
      sw_py_raise(e);
      goto done;
    }
    result = sw_py_handle(tiled, SW_PY_CARRIER);
  }
done:
  free(grid);
  free(tile);
  return result;
}

static PyObject* sw_py_tiled_shape(const sw_carrier_t* tiled,
                                   sw_error_t* (*get)(const sw_carrier_t*, int64_t*, size_t)) {
  size_t rank = 0;
  int64_t shape[SW_MAX_RANK + 1];
  SW_PY_CHECK(sw_tiled_rank(tiled, &rank));
  if (rank > SW_MAX_RANK) return PyErr_Format(SW_PY_VALUE_ERROR, "rank %zu exceeds %d", rank, SW_MAX_RANK);
  SW_PY_CHECK(get(tiled, shape, SW_MAX_RANK));
  return sw_py_tuple_from_int64(shape, rank);
}

PyObject* tiled_grid_shape(const sw_carrier_t* tiled) { return sw_py_tiled_shape(tiled, sw_tiled_grid_shape); }

PyObject* tiled_tile_shape(const sw_carrier_t* tiled) { return sw_py_tiled_shape(tiled, sw_tiled_tile_shape); }

/* (location, valid, dirty) of one tile. */
PyObject* tiled_tile_state(const sw_carrier_t* tiled, PyObject* coord) {
  int64_t* values = NULL;
  size_t n = 0;
  if (sw_py_int64_array(coord, &values, &n) < 0) return NULL;
  sw_tile_state_t state;
  memset(&state, 0, sizeof state);
  state.struct_size = sizeof state;
  sw_error_t* e = sw_tiled_tile_state(tiled, values, n, &state);
  free(values);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return Py_BuildValue("(iOO)", (int)state.location, state.valid ? Py_True : Py_False,
                       state.dirty ? Py_True : Py_False);
}

/* Residency transitions of a TileSet handle. The blocking forms release the
 * GIL for their whole wait. */
PyObject* tiled_residency(sw_carrier_t* tiled, const sw_tile_set_t* t, bool evict, bool blocking) {
  if (blocking) {
    SW_PY_CHECK_NOGIL(evict ? sw_tiled_evict(tiled, t) : sw_tiled_promote(tiled, t));
    Py_RETURN_NONE;
  }
  sw_await_t* await = NULL;
  SW_PY_CHECK_NOGIL(evict ? sw_tiled_evict_async(tiled, t, &await) : sw_tiled_promote_async(tiled, t, &await));
  return sw_py_handle(await, SW_PY_AWAIT);
}

/* sw_tiled_prefetch_async: an await handle. */
sw_error_t* tiled_prefetch(sw_carrier_t* tiled, const sw_tile_set_t* t, sw_await_t** out_await) {
  return sw_tiled_prefetch_async(tiled, t, out_await);
}

/* sw_tiled_expert_matmul with the desc field Python exposes (as matmul_rows);
 * gates may be None. */
sw_error_t* tiled_expert_matmul(sw_carrier_t* tiled, sw_tensor_t* experts, sw_tensor_t* x, sw_tensor_t* ids,
                                sw_tensor_t* gates, int out_dtype, sw_await_t** out_await) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = (sw_dtype_t)out_dtype;
  return sw_tiled_expert_matmul(tiled, experts, x, ids, gates, &desc, out_await);
}

/* sw_tiled_expert_ffn with the desc fields Python exposes: the activation
 * (a sw_unary_op_t code) and the result's dtype code (0: the experts');
 * gates may be None. */
sw_error_t* tiled_expert_ffn(sw_carrier_t* gate, sw_tensor_t* gate_experts, sw_carrier_t* up,
                             sw_tensor_t* up_experts, sw_carrier_t* down, sw_tensor_t* down_experts, sw_tensor_t* x,
                             sw_tensor_t* ids, sw_tensor_t* gates, int activation, int out_dtype,
                             sw_await_t** out_await) {
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = (sw_unary_op_t)activation;
  desc.out_dtype = (sw_dtype_t)out_dtype;
  return sw_tiled_expert_ffn(gate, gate_experts, up, up_experts, down, down_experts, x, ids, gates, &desc,
                             out_await);
}
