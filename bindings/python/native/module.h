/* The functions strideweave._native exposes beside the C API itself: their
 * prototypes, by the file that defines them (sw_py.h lists the files).
 *
 * native.i %includes this header, so SWIG wraps each prototype under the
 * typemaps there (a name here is the Python name), and #includes it into
 * the wrapper; the C sources include it too, so the compiler checks every
 * definition against what SWIG wrapped.
 *
 * Two kinds of function:
 *  - `sw_error_t*` with handle out-parameters: a C helper that fills a
 *    descriptor struct; SWIG generates the whole Python call (argument
 *    conversion, the error raised, the handle returned, and the GIL released
 *    where native.i marks the name SW_BLOCKING_FEATURE). These run without
 *    the GIL and never touch Python objects.
 *  - `PyObject*`: the Python call written in C (sequences, buffers,
 *    callbacks, tuples and dicts); NULL with an exception set on failure.
 *    They are called with the GIL held and release it themselves around
 *    blocking calls.
 */
#ifndef STRIDEWEAVE_PY_NATIVE_MODULE_H
#define STRIDEWEAVE_PY_NATIVE_MODULE_H

#ifndef SWIG
#include "sw_py.h"
#endif

/* errors.c */
PyObject* set_error_classes(PyObject* classes);

/* runtime.c */
sw_error_t* runtime_create(unsigned int compute_threads, unsigned int worker_threads, sw_runtime_t** out_runtime);
sw_error_t* carrier_create_zstd(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size, int level,
                                size_t frame_elements, int shuffle, sw_carrier_t** out_carrier);
PyObject* await_wait(sw_await_t* await, int64_t timeout_ns);

/* tensors.c */
PyObject* matmul_rows(sw_tensor_t* a, sw_tensor_t* b, int out_dtype);
PyObject* tensor_random(sw_runtime_t* runtime, int distribution, int dtype, unsigned long long seed, double p0,
                        double p1, PyObject* extents);
PyObject* tensors_join(PyObject* handles, int64_t axis, bool stack);
PyObject* layout_create(PyObject* shape, PyObject* stride);
PyObject* layout_extents(const sw_layout_t* layout);
PyObject* layout_decode(const sw_layout_t* layout, int64_t ordinal);
PyObject* layout_to_string(const sw_layout_t* layout);
PyObject* tensor_shape(const sw_tensor_t* tensor);
PyObject* tensor_permute(sw_tensor_t* tensor, PyObject* perm);

/* buffers_dlpack.c */
PyObject* carrier_create_cpu_external(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* owner, PyObject* address,
                                      size_t bytes, bool read_only);
PyObject* carrier_create_cpu_from(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* data, size_t size);
PyObject* carrier_read_into(sw_carrier_t* carrier, size_t first_slot, size_t count, PyObject* destination);
PyObject* carrier_write_from(sw_carrier_t* carrier, size_t first_slot, size_t count, PyObject* source);
PyObject* tensor_read_into(const sw_tensor_t* tensor, PyObject* destination);
PyObject* tensor_write_from(sw_tensor_t* tensor, PyObject* source);
PyObject* tensor_dlpack(sw_tensor_t* tensor, PyObject* owner);
PyObject* tensor_dlpack_versioned(sw_tensor_t* tensor, uint32_t max_major, uint32_t max_minor, PyObject* owner,
                                  bool copied);
PyObject* dlpack_import(PyObject* capsule);

/* tiled_calls.c */
PyObject* tile_set_create(PyObject* flat, size_t rank);
PyObject* tile_set_coordinates(const sw_tile_set_t* set);
PyObject* tile_selection_create(PyObject* per_axis);
PyObject* tile_selection_coordinates(const sw_tile_selection_t* selection);
PyObject* tiled_create(sw_carrier_t* primary, sw_carrier_t* secondary, PyObject* grid_shape, PyObject* tile_shape,
                       PyObject* policy);
PyObject* tiled_grid_shape(const sw_carrier_t* tiled);
PyObject* tiled_tile_shape(const sw_carrier_t* tiled);
PyObject* tiled_tile_state(const sw_carrier_t* tiled, PyObject* coord);
PyObject* tiled_residency(sw_carrier_t* tiled, const sw_tile_set_t* t, bool evict, bool blocking);
sw_error_t* tiled_prefetch(sw_carrier_t* tiled, const sw_tile_set_t* t, sw_await_t** out_await);
sw_error_t* tiled_expert_matmul(sw_carrier_t* tiled, sw_tensor_t* experts, sw_tensor_t* x, sw_tensor_t* ids,
                                sw_tensor_t* gates, int out_dtype, sw_await_t** out_await);
sw_error_t* tiled_expert_ffn(sw_carrier_t* gate, sw_tensor_t* gate_experts, sw_carrier_t* up,
                             sw_tensor_t* up_experts, sw_carrier_t* down, sw_tensor_t* down_experts, sw_tensor_t* x,
                             sw_tensor_t* ids, sw_tensor_t* gates, int activation, int out_dtype,
                             sw_await_t** out_await);

/* policies_callbacks.c */
PyObject* lru_policy_plan(sw_lru_policy_t* policy, const sw_tile_set_t* required, int purpose);
PyObject* lru_policy_stats(const sw_lru_policy_t* policy);
sw_error_t* lru_policy_create(unsigned long long budget_tiles, unsigned long long budget_bytes,
                              sw_lru_policy_t** out_policy);
PyObject* await_set_callback(sw_await_t* await, PyObject* callback);

/* files.c */
PyObject* carrier_create_file(sw_runtime_t* runtime, sw_dtype_t dtype, size_t size, PyObject* directory,
                              bool direct_io, size_t chunk_bytes, size_t requests_in_flight);
PyObject* carrier_open_file(sw_runtime_t* runtime, sw_dtype_t dtype, PyObject* path, uint64_t byte_offset,
                            size_t size, bool direct_io, size_t chunk_bytes, size_t requests_in_flight);
PyObject* file_carrier_io(const sw_carrier_t* carrier);
PyObject* carrier_open_npy(sw_runtime_t* runtime, PyObject* path, bool direct_io, size_t chunk_bytes,
                           size_t requests_in_flight);
PyObject* carrier_remote(sw_runtime_t* runtime, bool create, sw_dtype_t dtype, size_t size, PyObject* endpoints,
                         const char* key_namespace, PyObject* user, PyObject* password_file, bool allow_plaintext,
                         bool read_only, size_t block_elements, unsigned long long placement_seed,
                         unsigned int deadline_ms, size_t chunk_bytes, unsigned int requests_in_flight,
                         bool persistent, PyObject* replica_endpoints, PyObject* replica_of,
                         unsigned int lease_ms);
PyObject* carrier_open_safetensors(sw_runtime_t* runtime, PyObject* path, const char* name, bool direct_io,
                                   size_t chunk_bytes, size_t requests_in_flight);
PyObject* carrier_open_safetensors_stack(sw_runtime_t* runtime, PyObject* path, PyObject* names, bool direct_io,
                                         size_t chunk_bytes, size_t requests_in_flight);
PyObject* carrier_open_safetensors_stack_files(sw_runtime_t* runtime, PyObject* paths, PyObject* names,
                                               bool direct_io, size_t chunk_bytes, size_t requests_in_flight);
PyObject* carrier_open_raw_tensor(sw_runtime_t* runtime, PyObject* path, sw_dtype_t dtype, uint64_t byte_offset,
                                  PyObject* shape, int order, bool direct_io, size_t chunk_bytes,
                                  size_t requests_in_flight);
PyObject* carrier_open_gguf(sw_runtime_t* runtime, PyObject* path, const char* name, bool direct_io,
                            size_t chunk_bytes, size_t requests_in_flight);
PyObject* file_tensor_view(sw_tensor_t* tensor, PyObject* permutation);
PyObject* save_safetensors(PyObject* path, PyObject* names, PyObject* tensors, PyObject* metadata_keys,
                           PyObject* metadata_values);
PyObject* save_npy(PyObject* path, sw_tensor_t* tensor);
PyObject* save_gguf(PyObject* path, PyObject* names, PyObject* tensors, PyObject* metadata_keys,
                    PyObject* metadata_types, PyObject* metadata_values, unsigned int alignment);
PyObject* testing_parse_npy_header(PyObject* data, uint64_t file_size);
PyObject* testing_parse_safetensors_header(PyObject* data, uint64_t file_size, const char* name);
PyObject* testing_parse_gguf_header(PyObject* data, uint64_t file_size, const char* name);
PyObject* testing_file_io_stats(const sw_carrier_t* carrier);

/* devices.c */
sw_error_t* device_create_fake(sw_runtime_t* runtime, bool host_visible, sw_device_t** out_device);
PyObject* device_alloc(sw_device_t* device, sw_dtype_t dtype, PyObject* shape, uint64_t extent_bytes,
                       uint64_t max_extent_bytes, uint64_t alignment);
PyObject* device_view_describe(const sw_device_view_t* view);
PyObject* device_copy(sw_device_allocation_t* allocation, uint64_t offset, PyObject* buffer, bool host_to_device);

#endif
