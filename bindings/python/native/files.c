/* strideweave._native: files (sw_py.h lists the module's files): file
 * carriers and how they move their bytes, the model-file openers (.npy,
 * .safetensors, GGUF, raw tensors) that return a carrier with the file's info
 * as a dict, the savers, and the header-parser and I/O-statistics test
 * hooks. Paths go through PyUnicode_FSConverter (str, bytes or os.PathLike);
 * the GIL is released around every file operation.
 */
#include "module.h"

/* A file carrier's options; 0 leaves a default. */
static sw_file_carrier_desc_t sw_py_file_desc(bool direct_io, size_t chunk_bytes, size_t requests_in_flight) {
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.direct_io = direct_io;
  desc.chunk_bytes = chunk_bytes;
  desc.requests_in_flight = (uint32_t)requests_in_flight; /* checked <= UINT32_MAX by the facade */
  return desc;
}

/* An info struct as a dict of Python values. */
static PyObject* sw_py_file_info(const sw_file_tensor_info_t* info) {
  size_t rank = info->rank > SW_MAX_RANK ? SW_MAX_RANK : info->rank;
  PyObject* perm = PyTuple_New((Py_ssize_t)rank);
  if (!perm) return NULL;
  for (size_t i = 0; i < rank; ++i) PyTuple_SET_ITEM(perm, (Py_ssize_t)i, PyLong_FromSize_t(info->permutation[i]));
  return Py_BuildValue("{s:i,s:N,s:s,s:K,s:K,s:n,s:N,s:N,s:N,s:N}", "dtype", (int)info->dtype, "shape",
                       sw_py_tuple_from_int64(info->shape, rank), "order",
                       info->order == SW_FILE_ORDER_ROW_MAJOR ? "C" : "F", "data_offset",
                       (unsigned long long)info->data_offset, "data_bytes", (unsigned long long)info->data_bytes,
                       "segments", (Py_ssize_t)info->segments, "logical_shape",
                       sw_py_tuple_from_int64(info->logical_shape, rank), "grid_shape",
                       sw_py_tuple_from_int64(info->grid_shape, rank), "tile_shape",
                       sw_py_tuple_from_int64(info->tile_shape, rank), "permutation", perm);
}

/* The result of an opener: (carrier handle, info dict), or NULL with the
 * error raised (and the carrier released). */
static PyObject* sw_py_opened(sw_error_t* e, sw_carrier_t* carrier, const sw_file_tensor_info_t* info) {
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  PyObject* d = sw_py_file_info(info);
  if (!d) {
    sw_carrier_release(carrier);
    return NULL;
  }
  return Py_BuildValue("(NN)", sw_py_handle(carrier, SW_PY_CARRIER), d);
}

/* A sequence of str as UTF-8 C strings; `keep` holds them. */
static int sw_py_strings(PyObject* seq, const char*** out, size_t* out_count, PyObject** keep, const char* what) {
  *keep = PySequence_Fast(seq, what);
  if (!*keep) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(*keep);
  const char** strings = (const char**)calloc(n ? (size_t)n : 1, sizeof(char*));
  if (!strings) {
    Py_CLEAR(*keep);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(*keep, i);
    if (!PyUnicode_Check(item)) {
      PyErr_Format(SW_PY_TYPE_ERROR, "%s must be str, not %s", what, Py_TYPE(item)->tp_name);
      goto fail;
    }
    strings[i] = PyUnicode_AsUTF8(item);
    if (!strings[i]) goto fail;
  }
  *out = strings;
  *out_count = (size_t)n;
  return 0;
fail:
  free(strings);
  Py_CLEAR(*keep);
  return -1;
}

/* sw_carrier_create_remote (create) or sw_carrier_open_remote: the carrier. */
PyObject* carrier_remote(sw_runtime_t* runtime, bool create, sw_dtype_t dtype, size_t size, PyObject* endpoints,
                         const char* key_namespace, PyObject* user, PyObject* password_file, bool allow_plaintext,
                         bool read_only, size_t block_elements, unsigned long long placement_seed,
                         unsigned int deadline_ms, size_t chunk_bytes, unsigned int requests_in_flight,
                         bool persistent, PyObject* replica_endpoints, PyObject* replica_of,
                         unsigned int lease_ms) {
  sw_remote_carrier_desc_t desc;
  sw_remote_carrier_desc_init(&desc);
  PyObject* keep = NULL;
  PyObject* keep_replicas = NULL;
  PyObject* password_path = NULL;
  const char** strings = NULL;
  const char** replicas = NULL;
  size_t* replica_index = NULL;
  size_t count = 0, replica_count = 0;
  PyObject* result = NULL;
  if (sw_py_strings(endpoints, &strings, &count, &keep, "endpoints") != 0) return NULL;
  /* The facade passes the replicas as two lists of one length: the servers
   * and the index in `endpoints` of the endpoint each one copies. */
  if (sw_py_strings(replica_endpoints, &replicas, &replica_count, &keep_replicas, "replicas") != 0) goto done;
  if (!PySequence_Check(replica_of) || PySequence_Size(replica_of) != (Py_ssize_t)replica_count) {
    PyErr_SetString(SW_PY_TYPE_ERROR, "replica_of must be a sequence as long as the replicas");
    goto done;
  }
  replica_index = (size_t*)calloc(replica_count ? replica_count : 1, sizeof *replica_index);
  if (!replica_index) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < replica_count; ++i) {
    PyObject* item = PySequence_GetItem(replica_of, (Py_ssize_t)i);
    if (!item) goto done;
    replica_index[i] = PyLong_AsSize_t(item);
    Py_DECREF(item);
    if (PyErr_Occurred()) goto done;
  }
  desc.replica_endpoints = replicas;
  desc.replica_of = replica_index;
  desc.replica_count = replica_count;
  desc.endpoints = strings;
  desc.endpoint_count = count;
  desc.key_namespace = key_namespace;
  if (user != Py_None) {
    if (!PyUnicode_Check(user)) {
      PyErr_Format(SW_PY_TYPE_ERROR, "user must be str or None, not %s", Py_TYPE(user)->tp_name);
      goto done;
    }
    desc.user = PyUnicode_AsUTF8(user);
    if (!desc.user) goto done;
  }
  if (password_file != Py_None) {
    if (!PyUnicode_FSConverter(password_file, &password_path)) goto done;
    desc.password_file = PyBytes_AS_STRING(password_path);
  }
  desc.allow_plaintext = allow_plaintext;
  desc.read_only = read_only;
  desc.block_elements = block_elements;
  desc.placement_seed = placement_seed;
  desc.deadline_ms = deadline_ms;
  desc.chunk_bytes = chunk_bytes;
  desc.requests_in_flight = requests_in_flight;
  desc.persistent = persistent;
  desc.lease_ms = lease_ms;
  sw_carrier_t* carrier = NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = create ? sw_carrier_create_remote(runtime, dtype, size, &desc, &carrier)
             : sw_carrier_open_remote(runtime, dtype, size, &desc, &carrier);
  Py_END_ALLOW_THREADS
  if (e) {
    sw_py_raise(e);
    goto done;
  }
  result = sw_py_handle(carrier, SW_PY_CARRIER);
done:
  free(strings);
  free(replicas);
  free(replica_index);
  Py_XDECREF(keep);
  Py_XDECREF(keep_replicas);
  Py_XDECREF(password_path);
  return result;
}

PyObject* carrier_create_file(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size, PyObject* directory,
                              bool direct_io, size_t chunk_bytes, size_t requests_in_flight) {
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  PyObject* encoded = NULL;
  if (directory != Py_None) {
    if (!PyUnicode_FSConverter(directory, &encoded)) return NULL;
    desc.directory = PyBytes_AS_STRING(encoded);
  }
  sw_carrier_t* carrier = NULL;
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_create_file(runtime, dtype, size, &desc, &carrier);
  Py_END_ALLOW_THREADS
  Py_XDECREF(encoded);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(carrier, SW_PY_CARRIER);
}

PyObject* carrier_open_file(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* path, uint64_t byte_offset,
                            size_t size, bool direct_io, size_t chunk_bytes, size_t requests_in_flight) {
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) return NULL;
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e;
  const char* p = PyBytes_AS_STRING(encoded);
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_file(runtime, dtype, p, byte_offset, size, &desc, &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_handle(carrier, SW_PY_CARRIER);
}

/* sw_file_carrier_io: (chunk bytes, requests in flight, direct I/O, profile
 * source, device, device read bytes per second). */
PyObject* file_carrier_io(const sw_carrier_t* carrier) {
  sw_file_carrier_io_t io;
  sw_file_carrier_io_init(&io);
  SW_PY_CHECK(sw_file_carrier_io(carrier, &io));
  return Py_BuildValue("(nIOiKd)", (Py_ssize_t)io.chunk_bytes, (unsigned int)io.requests_in_flight,
                       io.direct_io ? Py_True : Py_False, (int)io.source, (unsigned long long)io.device,
                       io.device_read_bytes_per_second);
}

/* sw_carrier_open_npy: (carrier, info dict). */
PyObject* carrier_open_npy(sw_runtime_t* runtime, PyObject* path, bool direct_io, size_t chunk_bytes,
                           size_t requests_in_flight) {
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) return NULL;
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_npy(runtime, p, &desc, &info, &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  return sw_py_opened(e, carrier, &info);
}

/* sw_carrier_open_safetensors: (carrier, info dict). */
PyObject* carrier_open_safetensors(sw_runtime_t* runtime, PyObject* path, const char* name, bool direct_io,
                                   size_t chunk_bytes, size_t requests_in_flight) {
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) return NULL;
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_safetensors(runtime, p, name, &desc, &info, &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  return sw_py_opened(e, carrier, &info);
}

/* sw_carrier_open_gguf: (carrier, info dict). */
PyObject* carrier_open_gguf(sw_runtime_t* runtime, PyObject* path, const char* name, bool direct_io,
                            size_t chunk_bytes, size_t requests_in_flight) {
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) return NULL;
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_gguf(runtime, p, name, &desc, &info, &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  return sw_py_opened(e, carrier, &info);
}

/* sw_carrier_open_safetensors_stack over a sequence of names. */
PyObject* carrier_open_safetensors_stack(sw_runtime_t* runtime, PyObject* path, PyObject* names, bool direct_io,
                                         size_t chunk_bytes, size_t requests_in_flight) {
  const char** list = NULL;
  size_t count = 0;
  PyObject* keep = NULL;
  if (sw_py_strings(names, &list, &count, &keep, "tensor names") < 0) return NULL;
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) {
    free(list);
    Py_DECREF(keep);
    return NULL;
  }
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_safetensors_stack(runtime, p, list, count, &desc, &info, &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  free(list);
  Py_DECREF(keep);
  return sw_py_opened(e, carrier, &info);
}

/* sw_carrier_open_safetensors_stack_files over two sequences of one
 * length: the file paths (str, bytes or os.PathLike) and the tensor names. */
PyObject* carrier_open_safetensors_stack_files(sw_runtime_t* runtime, PyObject* paths, PyObject* names,
                                               bool direct_io, size_t chunk_bytes, size_t requests_in_flight) {
  const char** list = NULL;
  size_t count = 0;
  PyObject* keep = NULL;
  if (sw_py_strings(names, &list, &count, &keep, "tensor names") < 0) return NULL;
  PyObject* seq = PySequence_Fast(paths, "paths must be a sequence");
  if (!seq) {
    free(list);
    Py_DECREF(keep);
    return NULL;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** encoded = (PyObject**)calloc(n ? (size_t)n : 1, sizeof(PyObject*));
  const char** files = (const char**)calloc(n ? (size_t)n : 1, sizeof(char*));
  PyObject* result = NULL;
  Py_ssize_t made = 0;
  if (!encoded || !files) {
    PyErr_NoMemory();
    goto done;
  }
  if ((size_t)n != count) {
    PyErr_Format(SW_PY_VALUE_ERROR, "%zd paths for %zu tensor names: give one path per name", n, count);
    goto done;
  }
  for (; made < n; ++made) {
    if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, made), &encoded[made])) goto done;
    files[made] = PyBytes_AS_STRING(encoded[made]);
  }
  {
    sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* carrier = NULL;
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = sw_carrier_open_safetensors_stack_files(runtime, files, list, count, &desc, &info, &carrier);
    Py_END_ALLOW_THREADS
    result = sw_py_opened(e, carrier, &info);
  }
done:
  for (Py_ssize_t i = 0; i < made; ++i) Py_DECREF(encoded[i]);
  free(encoded);
  free(files);
  Py_DECREF(seq);
  free(list);
  Py_DECREF(keep);
  return result;
}

/* sw_carrier_open_raw_tensor; `order` is SW_FILE_ORDER_*. */
PyObject* carrier_open_raw_tensor(sw_runtime_t* runtime, PyObject* path, sw_dtype_t dtype, uint64_t byte_offset,
                                  PyObject* shape, int order, bool direct_io, size_t chunk_bytes,
                                  size_t requests_in_flight) {
  int64_t* extents = NULL;
  size_t rank = 0;
  if (sw_py_int64_array(shape, &extents, &rank) < 0) return NULL;
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) {
    free(extents);
    return NULL;
  }
  sw_file_carrier_desc_t desc = sw_py_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_carrier_open_raw_tensor(runtime, p, dtype, byte_offset, extents, rank, (sw_file_order_t)order, &desc, &info,
                                 &carrier);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  free(extents);
  return sw_py_opened(e, carrier, &info);
}

/* sw_file_tensor_view with the permutation of an opener's info. */
PyObject* file_tensor_view(sw_tensor_t* tensor, PyObject* permutation) {
  int64_t* perm = NULL;
  size_t rank = 0;
  if (sw_py_int64_array(permutation, &perm, &rank) < 0) return NULL;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  info.rank = rank;
  for (size_t i = 0; i < rank && i < SW_MAX_RANK; ++i) info.permutation[i] = perm[i] < 0 ? SIZE_MAX : (size_t)perm[i];
  free(perm);
  if (rank > SW_MAX_RANK) return PyErr_Format(SW_PY_VALUE_ERROR, "permutation of %zu modes exceeds %d", rank, SW_MAX_RANK);
  sw_tensor_t* view = NULL;
  SW_PY_CHECK(sw_file_tensor_view(tensor, &info, &view));
  return sw_py_handle(view, SW_PY_TENSOR);
}

/* sw_save_safetensors: `names` and `tensors` (tensor handles) of one length,
 * `metadata` a sequence of (key, value) str pairs. */
PyObject* save_safetensors(PyObject* path, PyObject* names, PyObject* tensors, PyObject* metadata_keys,
                           PyObject* metadata_values) {
  PyObject* result = NULL;
  const char** list = NULL;
  const char** keys = NULL;
  const char** values = NULL;
  size_t count = 0, nkeys = 0, nvalues = 0;
  PyObject *keep = NULL, *keep_keys = NULL, *keep_values = NULL, *fast = NULL, *encoded = NULL;
  sw_tensor_t** handles = NULL;
  if (sw_py_strings(names, &list, &count, &keep, "tensor names") < 0) goto done;
  if (sw_py_strings(metadata_keys, &keys, &nkeys, &keep_keys, "metadata keys") < 0) goto done;
  if (sw_py_strings(metadata_values, &values, &nvalues, &keep_values, "metadata values") < 0) goto done;
  fast = PySequence_Fast(tensors, "tensors must be a sequence");
  if (!fast) goto done;
  if ((size_t)PySequence_Fast_GET_SIZE(fast) != count || nkeys != nvalues) {
    PyErr_SetString(SW_PY_VALUE_ERROR, "names and tensors (metadata keys and values) differ in length");
    goto done;
  }
  handles = (sw_tensor_t**)calloc(count ? count : 1, sizeof(sw_tensor_t*));
  if (!handles) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < count; ++i) {
    void* h = NULL;
    if (sw_py_pointer(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i), SW_PY_TENSOR, &h, "tensor") < 0)
      goto done;
    handles[i] = (sw_tensor_t*)h;
  }
  if (!PyUnicode_FSConverter(path, &encoded)) goto done;
  {
    sw_safetensors_save_desc_t desc;
    sw_safetensors_save_desc_init(&desc);
    desc.metadata_keys = keys;
    desc.metadata_values = values;
    desc.metadata_count = nkeys;
    const char* p = PyBytes_AS_STRING(encoded);
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = sw_save_safetensors(p, list, handles, count, &desc);
    Py_END_ALLOW_THREADS
    if (e) {
      sw_py_raise(e);
      goto done;
    }
  }
  Py_INCREF(Py_None);
  result = Py_None;
done:
  free(list);
  free(keys);
  free(values);
  free(handles);
  Py_XDECREF(keep);
  Py_XDECREF(keep_keys);
  Py_XDECREF(keep_values);
  Py_XDECREF(fast);
  Py_XDECREF(encoded);
  return result;
}

/* sw_save_gguf: metadata value i is metadata_values[i], a bytes object
 * holding the value in its C type's little-endian bytes (a string's UTF-8
 * bytes and a NUL), of type metadata_types[i]; the facade packs them. */
PyObject* save_gguf(PyObject* path, PyObject* names, PyObject* tensors, PyObject* metadata_keys,
                    PyObject* metadata_types, PyObject* metadata_values, unsigned int alignment) {
  PyObject* result = NULL;
  const char** list = NULL;
  const char** keys = NULL;
  const void** values = NULL;
  sw_gguf_value_type_t* types = NULL;
  size_t count = 0, nkeys = 0;
  PyObject *keep = NULL, *keep_keys = NULL, *fast = NULL, *fast_types = NULL, *fast_values = NULL, *encoded = NULL;
  sw_tensor_t** handles = NULL;
  if (sw_py_strings(names, &list, &count, &keep, "tensor names") < 0) goto done;
  if (sw_py_strings(metadata_keys, &keys, &nkeys, &keep_keys, "metadata keys") < 0) goto done;
  fast = PySequence_Fast(tensors, "tensors must be a sequence");
  fast_types = PySequence_Fast(metadata_types, "metadata types must be a sequence");
  fast_values = PySequence_Fast(metadata_values, "metadata values must be a sequence");
  if (!fast || !fast_types || !fast_values) goto done;
  if ((size_t)PySequence_Fast_GET_SIZE(fast) != count || (size_t)PySequence_Fast_GET_SIZE(fast_types) != nkeys ||
      (size_t)PySequence_Fast_GET_SIZE(fast_values) != nkeys) {
    PyErr_SetString(SW_PY_VALUE_ERROR, "names and tensors (metadata keys, types and values) differ in length");
    goto done;
  }
  handles = (sw_tensor_t**)calloc(count ? count : 1, sizeof(sw_tensor_t*));
  types = (sw_gguf_value_type_t*)calloc(nkeys ? nkeys : 1, sizeof(sw_gguf_value_type_t));
  values = (const void**)calloc(nkeys ? nkeys : 1, sizeof(void*));
  if (!handles || !types || !values) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < count; ++i) {
    void* h = NULL;
    if (sw_py_pointer(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i), SW_PY_TENSOR, &h, "tensor") < 0)
      goto done;
    handles[i] = (sw_tensor_t*)h;
  }
  for (size_t i = 0; i < nkeys; ++i) {
    const long type = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast_types, (Py_ssize_t)i));
    if (type == -1 && PyErr_Occurred()) goto done;
    types[i] = (sw_gguf_value_type_t)type;
    PyObject* v = PySequence_Fast_GET_ITEM(fast_values, (Py_ssize_t)i);
    if (!PyBytes_Check(v)) {
      PyErr_Format(SW_PY_TYPE_ERROR, "metadata value %zu must be bytes, not %s", i, Py_TYPE(v)->tp_name);
      goto done;
    }
    values[i] = PyBytes_AS_STRING(v);
  }
  if (!PyUnicode_FSConverter(path, &encoded)) goto done;
  {
    sw_gguf_save_desc_t desc;
    sw_gguf_save_desc_init(&desc);
    desc.metadata_keys = keys;
    desc.metadata_types = types;
    desc.metadata_values = values;
    desc.metadata_count = nkeys;
    desc.alignment = alignment;
    const char* p = PyBytes_AS_STRING(encoded);
    sw_error_t* e;
    Py_BEGIN_ALLOW_THREADS
    e = sw_save_gguf(p, list, handles, count, &desc);
    Py_END_ALLOW_THREADS
    if (e) {
      sw_py_raise(e);
      goto done;
    }
  }
  Py_INCREF(Py_None);
  result = Py_None;
done:
  free(list);
  free(keys);
  free(values);
  free(types);
  free(handles);
  Py_XDECREF(keep);
  Py_XDECREF(keep_keys);
  Py_XDECREF(fast);
  Py_XDECREF(fast_types);
  Py_XDECREF(fast_values);
  Py_XDECREF(encoded);
  return result;
}

/* sw_save_npy. */
PyObject* save_npy(PyObject* path, sw_tensor_t* tensor) {
  PyObject* encoded = NULL;
  if (!PyUnicode_FSConverter(path, &encoded)) return NULL;
  const char* p = PyBytes_AS_STRING(encoded);
  sw_error_t* e;
  Py_BEGIN_ALLOW_THREADS
  e = sw_save_npy(p, tensor);
  Py_END_ALLOW_THREADS
  Py_DECREF(encoded);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* sw_testing_parse_npy_header over a bytes-like object: the info dict. */
PyObject* testing_parse_npy_header(PyObject* data, uint64_t file_size) {
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_error_t* e = sw_testing_parse_npy_header(view.buf, (size_t)view.len, file_size, &info);
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  return sw_py_file_info(&info);
}

/* sw_testing_parse_safetensors_header: (tensor count, info dict of `name`
 * or None). */
PyObject* testing_parse_safetensors_header(PyObject* data, uint64_t file_size, const char* name) {
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  size_t count = 0;
  sw_error_t* e = sw_testing_parse_safetensors_header(view.buf, (size_t)view.len, file_size, name, &count,
                                                      name ? &info : NULL);
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  if (!name) return Py_BuildValue("(nO)", (Py_ssize_t)count, Py_None);
  return Py_BuildValue("(nN)", (Py_ssize_t)count, sw_py_file_info(&info));
}

/* sw_testing_parse_gguf_header over a bytes-like object: (tensor count,
 * metadata count, info dict of `name` or None). */
PyObject* testing_parse_gguf_header(PyObject* data, uint64_t file_size, const char* name) {
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  size_t tensors = 0, keys = 0;
  sw_error_t* e = sw_testing_parse_gguf_header(view.buf, (size_t)view.len, file_size, name, &tensors, &keys,
                                               name ? &info : NULL);
  PyBuffer_Release(&view);
  if (e) {
    sw_py_raise(e);
    return NULL;
  }
  if (!name) return Py_BuildValue("(nnO)", (Py_ssize_t)tensors, (Py_ssize_t)keys, Py_None);
  return Py_BuildValue("(nnN)", (Py_ssize_t)tensors, (Py_ssize_t)keys, sw_py_file_info(&info));
}

/* sw_testing_file_io_stats as a dict. */
PyObject* testing_file_io_stats(const sw_carrier_t* carrier) {
  sw_file_io_stats_t stats;
  sw_file_io_stats_init(&stats);
  SW_PY_CHECK(sw_testing_file_io_stats(carrier, &stats));
  return Py_BuildValue("{s:K,s:K,s:K,s:O}", "direct_bytes", (unsigned long long)stats.direct_bytes, "bounce_bytes",
                       (unsigned long long)stats.bounce_bytes, "buffered_bytes",
                       (unsigned long long)stats.buffered_bytes, "direct_open", stats.direct_open ? Py_True : Py_False);
}
