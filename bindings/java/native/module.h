/* The functions org.strideweave.Native exposes beside the C API itself:
 * their prototypes, by the file that defines them (one file per Java class
 * that calls them; sw_jni.h lists the files).
 *
 * native.i %includes this header, so SWIG wraps each prototype under the
 * typemaps there (a name here is the Java method's name; a leading
 * `JNIEnv* env` is the call's environment, not a Java parameter), and
 * #includes it into the wrapper; the C sources include it too, so the
 * compiler checks every definition against what SWIG wrapped.
 *
 * Each function throws the Java exception of a failure (sw_j_throw) and
 * returns 0, NULL or nothing; handles pass as jlongs. The Java classes of
 * org.strideweave are the only callers; nothing here is public API.
 */
#ifndef STRIDEWEAVE_JAVA_NATIVE_MODULE_H
#define STRIDEWEAVE_JAVA_NATIVE_MODULE_H

#ifndef SWIG
#include "sw_jni.h"
#endif

/* errors.c */
jlong error_create(jint code, const char* message);

/* strideweave_runtime.c */
jlong runtime_create(JNIEnv* env, jlong compute_threads, jlong worker_threads, jlong pool_limit_bytes);

/* strideweave.c */
void save_safetensors(JNIEnv* env, jbyteArray path, jobjectArray names, jlongArray tensors, jobjectArray metadata_keys,
                      jobjectArray metadata_values);
void save_npy(JNIEnv* env, jbyteArray path, jlong tensor);

/* carrier.c */
void carrier_read_buffer(JNIEnv* env, jlong carrier, jlong first_slot, jlong count, jobject buffer, jlong byte_offset,
                         jlong bytes);
void carrier_write_buffer(JNIEnv* env, jlong carrier, jlong first_slot, jlong count, jobject buffer, jlong byte_offset,
                          jlong bytes);
jobject direct_buffer(JNIEnv* env, jlong address, jlong bytes);
jlong carrier_host_pointer(JNIEnv* env, jlong carrier);
jlong carrier_create_cpu_external(JNIEnv* env, jlong runtime, jint dtype, jobject buffer, jboolean read_only);
jlong carrier_create_cpu_from(JNIEnv* env, jlong runtime, jint dtype, jobject buffer, jlong byte_offset, jlong size);
jlong carrier_create_file(JNIEnv* env, jlong runtime, jint dtype, jlong size, const char* directory, jboolean direct_io,
                          jlong chunk_bytes, jlong requests_in_flight);
jlong carrier_open_file(JNIEnv* env, jlong runtime, jint dtype, const char* path, jlong byte_offset, jlong size,
                        jboolean direct_io);
jlongArray file_carrier_io(JNIEnv* env, jlong carrier, double* out_rate);
jlong carrier_create_zstd(JNIEnv* env, jlong runtime, jint dtype, jlong size, jint level, jlong frame_elements,
                          jint shuffle);
jlong carrier_remote(JNIEnv* env, jlong runtime, jint dtype, jlong size, jboolean open, jobjectArray endpoints,
                     jbyteArray key_namespace, jbyteArray user, jbyteArray password_file, jboolean allow_plaintext,
                     jboolean read_only, jlong block_elements, jlong placement_seed, jlong deadline_ms,
                     jlong chunk_bytes, jlong requests_in_flight, jboolean persistent, jobjectArray replica_endpoints,
                     jlongArray replica_of, jlong lease_ms);
jlongArray carrier_open_npy(JNIEnv* env, jlong runtime, jbyteArray path, jboolean direct_io, jlong chunk_bytes,
                            jlong requests_in_flight);
jlongArray carrier_open_safetensors(JNIEnv* env, jlong runtime, jbyteArray path, jbyteArray name, jboolean direct_io,
                                    jlong chunk_bytes, jlong requests_in_flight);
jlongArray carrier_open_gguf(JNIEnv* env, jlong runtime, jbyteArray path, jbyteArray name, jboolean direct_io,
                             jlong chunk_bytes, jlong requests_in_flight);
jlongArray carrier_open_safetensors_stack(JNIEnv* env, jlong runtime, jbyteArray path, jobjectArray names,
                                          jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight);
jlongArray carrier_open_safetensors_stack_files(JNIEnv* env, jlong runtime, jobjectArray paths, jobjectArray names,
                                                jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight);
jlongArray carrier_open_raw_tensor(JNIEnv* env, jlong runtime, jbyteArray path, jint dtype, jlong byte_offset,
                                   jlongArray shape, jint order, jboolean direct_io, jlong chunk_bytes,
                                   jlong requests_in_flight);
jlong carrier_open_file_segments(JNIEnv* env, jlong runtime, jint dtype, jbyteArray path, jlongArray offsets,
                                 jlongArray counts, jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight);

/* file_tensor.c */
jlong file_tensor_view(JNIEnv* env, jlong tensor, jlongArray permutation);

/* layout.c */
jlong layout_create(JNIEnv* env, jlongArray shape, jlongArray stride);
jlong layout_group(JNIEnv* env, jlongArray modes);
jlong layout_permute(JNIEnv* env, jlong layout, jlongArray perm);
jlongArray layout_extents(JNIEnv* env, jlong layout);
jlongArray layout_decode(JNIEnv* env, jlong layout, jlong ordinal);
jstring layout_to_string(JNIEnv* env, jlong layout);

/* tensor.c */
void tensor_read_buffer(JNIEnv* env, jlong tensor, jobject buffer, jlong byte_offset, jlong bytes);
void tensor_write_buffer(JNIEnv* env, jlong tensor, jobject buffer, jlong byte_offset, jlong bytes);
jlongArray tensor_shape(JNIEnv* env, jlong tensor);
jlong tensor_permute(JNIEnv* env, jlong tensor, jlongArray perm);
jlong tensor_from_buffer(JNIEnv* env, jlong runtime, jint dtype, jlongArray extents, jobject buffer, jlong byte_offset,
                         jlong bytes);
jlong tensor_random(JNIEnv* env, jlong runtime, jint distribution, jint dtype, jlong seed, jdouble p0, jdouble p1,
                    jlongArray extents);

/* ops.c */
jlong matmul_ex(JNIEnv* env, jlong a, jlong b, jint out_dtype);
jlong tensor_join(JNIEnv* env, jlongArray tensors, jlong axis, jboolean stack);

/* tile_set.c */
jlong tile_set_create(JNIEnv* env, jlongArray flat, jlong rank);
jlongArray tile_set_coordinates(JNIEnv* env, jlong set);

/* tile_selection.c */
jlong tile_selection_create(JNIEnv* env, jobjectArray per_axis);

/* tiled_evictable.c */
jlongArray tiled_grid_shape(JNIEnv* env, jlong tiled);
jlongArray tiled_tile_shape(JNIEnv* env, jlong tiled);
jintArray tiled_tile_state(JNIEnv* env, jlong tiled, jlongArray coord);
jlong tiled_residency(JNIEnv* env, jlong tiled, jlong tiles, jboolean evict, jboolean blocking);
jlong tiled_prefetch(JNIEnv* env, jlong tiled, jlong tiles);
jlong tiled_expert_ffn(JNIEnv* env, jlong gate_experts, jlong up_experts, jlong down_experts, jlong x, jlong ids,
                       jlong gates, jint activation, jint out_dtype);
jlong tiled_create(JNIEnv* env, jlong primary, jlong secondary, jlongArray grid_shape, jlongArray tile_shape, jlong lru,
                   jobject policy);

/* lru_policy.c */
jlong lru_policy_plan(JNIEnv* env, jlong policy, jlong required, jint purpose);
jlongArray lru_policy_stats(JNIEnv* env, jlong policy);

/* await_result.c */
void await_set_callback(JNIEnv* env, jlong await, jobject target);
jboolean await_wait(JNIEnv* env, jlong await, jlong timeout_ns);

/* device.c */
jlong device_create_fake(JNIEnv* env, jlong runtime);
jlong device_create_vulkan(JNIEnv* env, jlong runtime);
jlong device_alloc(JNIEnv* env, jlong device, jint dtype, jlongArray shape, jlong max_extent_bytes, jlong alignment,
                   jlong extent_bytes);
jintArray device_event_query(JNIEnv* env, jlong device, jlongArray event);
void device_event_wait(JNIEnv* env, jlong device, jlongArray event, jlong timeout_ns);
jstring fake_device_log_entry(JNIEnv* env, jlong device, jlong index);
void fake_device_complete(JNIEnv* env, jlong device, jlongArray event);

/* device_allocation.c */
jlongArray device_copy(JNIEnv* env, jlong allocation, jboolean to_device, jlong device_offset, jobject buffer,
                       jlong byte_offset, jlong bytes, jboolean async);

/* device_view.c */
jlongArray device_view_describe(JNIEnv* env, jlong view);

#endif
