/* The native methods of Carrier: slots through direct buffers, CPU carriers
 * over or copied from a direct buffer, file carriers and how they move their
 * bytes, zstd and remote carriers, and the model-file openers (.npy,
 * .safetensors, raw tensors). direct_buffer serves DeviceView too. */

#include <stdio.h>
#include <stdlib.h>

#include "module.h"

/* sw_carrier_read / sw_carrier_write of `count` slots through a direct
 * buffer's range of count * dtype size bytes. */
void carrier_read_buffer(JNIEnv* env, jlong carrier, jlong first_slot, jlong count, jobject buffer, jlong byte_offset,
                         jlong bytes) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (p)
    sw_j_failed(env, sw_carrier_read((const sw_carrier_t*)(intptr_t)carrier, (size_t)first_slot, (size_t)count, p));
}

void carrier_write_buffer(JNIEnv* env, jlong carrier, jlong first_slot, jlong count, jobject buffer, jlong byte_offset,
                          jlong bytes) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (p) sw_j_failed(env, sw_carrier_write((sw_carrier_t*)(intptr_t)carrier, (size_t)first_slot, (size_t)count, p));
}

/* A direct buffer over `bytes` bytes at `address` (no copy). */
jobject direct_buffer(JNIEnv* env, jlong address, jlong bytes) {
  return (*env)->NewDirectByteBuffer(env, (void*)(intptr_t)address, bytes);
}

/* sw_carrier_host_pointer as a long. */
jlong carrier_host_pointer(JNIEnv* env, jlong carrier) {
  void* p = NULL;
  if (sw_j_failed(env, sw_carrier_host_pointer((sw_carrier_t*)(intptr_t)carrier, &p))) return 0;
  return (jlong)(intptr_t)p;
}

/* The external memory's release callback: drops the global reference that
 * kept the Java buffer (the memory's owner) alive. Any thread. */
static void sw_j_release_buffer(void* user_data) {
  JNIEnv* env = sw_j_env();
  if (env && user_data) (*env)->DeleteGlobalRef(env, (jobject)user_data);
}

/* A CPU carrier over a direct buffer's memory, without a copy; the carrier
 * keeps the buffer alive until it releases the memory. */
jlong carrier_create_cpu_external(JNIEnv* env, jlong runtime, jint dtype, jobject buffer, jboolean read_only) {
  jlong capacity = buffer ? (*env)->GetDirectBufferCapacity(env, buffer) : -1;
  void* data = sw_j_buffer_range(env, buffer, 0, capacity < 0 ? 0 : capacity);
  if (!data) return 0;
  jobject owner = (*env)->NewGlobalRef(env, buffer);
  if (!owner) return 0;
  sw_external_memory_desc_t desc;
  sw_external_memory_desc_init(&desc);
  desc.data = capacity ? data : NULL;
  desc.bytes = (size_t)capacity;
  desc.read_only = read_only;
  desc.release = sw_j_release_buffer;
  desc.user_data = owner;
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_create_cpu_external((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, &desc, &carrier);
  if (e) {
    (*env)->DeleteGlobalRef(env, owner); /* on failure the library did not take the memory */
    sw_j_throw(env, e);
    return 0;
  }
  return (jlong)(intptr_t)carrier;
}

/* A CPU carrier holding a copy of `size` elements from a direct buffer. */
jlong carrier_create_cpu_from(JNIEnv* env, jlong runtime, jint dtype, jobject buffer, jlong byte_offset, jlong size) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, size * (jlong)sw_dtype_size((sw_dtype_t)dtype));
  if (!p) return 0;
  sw_carrier_t* carrier = NULL;
  if (sw_j_failed(env, sw_carrier_create_cpu_from((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, p, (size_t)size,
                                                  &carrier)))
    return 0;
  return (jlong)(intptr_t)carrier;
}

jlong carrier_create_file(JNIEnv* env, jlong runtime, jint dtype, jlong size, const char* directory, jboolean direct_io,
                          jlong chunk_bytes, jlong requests_in_flight) {
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.directory = directory;
  desc.direct_io = direct_io;
  desc.chunk_bytes = (size_t)chunk_bytes;
  desc.requests_in_flight = (uint32_t)requests_in_flight;
  sw_carrier_t* carrier = NULL;
  if (sw_j_failed(env, sw_carrier_create_file((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, (size_t)size, &desc,
                                              &carrier)))
    return 0;
  return (jlong)(intptr_t)carrier;
}

jlong carrier_open_file(JNIEnv* env, jlong runtime, jint dtype, const char* path, jlong byte_offset, jlong size,
                        jboolean direct_io) {
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.direct_io = direct_io;
  sw_carrier_t* carrier = NULL;
  if (sw_j_failed(env, sw_carrier_open_file((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, path,
                                            (uint64_t)byte_offset, (size_t)size, &desc, &carrier)))
    return 0;
  return (jlong)(intptr_t)carrier;
}

/* sw_file_carrier_io: {chunk bytes, requests in flight, direct I/O, profile
 * source, device}; the profile's read rate in out_rate. */
jlongArray file_carrier_io(JNIEnv* env, jlong carrier, double* out_rate) {
  sw_file_carrier_io_t io;
  sw_file_carrier_io_init(&io);
  if (sw_j_failed(env, sw_file_carrier_io((const sw_carrier_t*)(intptr_t)carrier, &io))) return NULL;
  *out_rate = io.device_read_bytes_per_second;
  int64_t v[5] = {(int64_t)io.chunk_bytes, (int64_t)io.requests_in_flight, io.direct_io, (int64_t)io.source,
                  (int64_t)io.device};
  return sw_j_long_array(env, v, 5);
}

jlong carrier_create_zstd(JNIEnv* env, jlong runtime, jint dtype, jlong size, jint level, jlong frame_elements,
                          jint shuffle) {
  sw_zstd_carrier_desc_t desc;
  sw_zstd_carrier_desc_init(&desc);
  desc.level = level;
  desc.frame_elements = (size_t)frame_elements;
  desc.shuffle = shuffle;
  sw_carrier_t* carrier = NULL;
  if (sw_j_failed(env, sw_carrier_create_zstd((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, (size_t)size, &desc,
                                              &carrier)))
    return 0;
  return (jlong)(intptr_t)carrier;
}

/* sw_carrier_create_remote (open false) or sw_carrier_open_remote (open
 * true) with every field of sw_remote_carrier_desc_t: the strings as
 * NUL-terminated UTF-8 byte[]s (user and password_file may be null), the
 * endpoints as an Object[] of them, the replicas as two arrays of one length
 * (null: none): the servers, an Object[] of such byte[]s, and beside each the
 * index in `endpoints` of the endpoint it copies (the library checks the
 * indices). Everything copied is freed on every path. */
jlong carrier_remote(JNIEnv* env, jlong runtime, jint dtype, jlong size, jboolean open, jobjectArray endpoints,
                     jbyteArray key_namespace, jbyteArray user, jbyteArray password_file, jboolean allow_plaintext,
                     jboolean read_only, jlong block_elements, jlong placement_seed, jlong deadline_ms,
                     jlong chunk_bytes, jlong requests_in_flight, jboolean persistent, jobjectArray replica_endpoints,
                     jlongArray replica_of, jlong lease_ms) {
  jsize replica_indices = replica_of ? (*env)->GetArrayLength(env, replica_of) : 0;
  jsize replica_servers = replica_endpoints ? (*env)->GetArrayLength(env, replica_endpoints) : 0;
  if (replica_indices != replica_servers) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "the replicas and their endpoint indices differ in length");
    return 0;
  }
  char** eps = NULL;
  size_t count = 0;
  if (sw_j_utf8s(env, endpoints, &eps, &count, "endpoints") < 0) return 0;
  char** replicas = NULL;
  size_t replica_count = 0;
  size_t* replica_index = NULL;
  char* ns = NULL;
  char* u = NULL;
  char* pw = NULL;
  jlong result = 0;
  if (sw_j_utf8s(env, replica_endpoints, &replicas, &replica_count, "replicas") < 0) goto done;
  replica_index = (size_t*)calloc(replica_count + 1, sizeof *replica_index);
  if (!replica_index) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory for the replicas");
    goto done;
  }
  for (size_t i = 0; i < replica_count; ++i) {
    jlong index = 0;
    (*env)->GetLongArrayRegion(env, replica_of, (jsize)i, 1, &index);
    if (index < 0) {
      sw_j_throw_code(env, SW_ERROR_VALUE, "a replica's endpoint index is negative");
      goto done;
    }
    replica_index[i] = (size_t)index;
  }
  ns = sw_j_utf8(env, key_namespace, "namespace");
  u = ns && user ? sw_j_utf8(env, user, "user") : NULL;
  pw = ns && (!user || u) && password_file ? sw_j_utf8(env, password_file, "password file") : NULL;
  if (!(*env)->ExceptionCheck(env)) {
    sw_remote_carrier_desc_t desc;
    sw_remote_carrier_desc_init(&desc);
    desc.endpoints = (const char* const*)eps;
    desc.endpoint_count = count;
    desc.key_namespace = ns;
    desc.user = u;
    desc.password_file = pw;
    desc.allow_plaintext = allow_plaintext;
    desc.read_only = read_only;
    desc.block_elements = (size_t)block_elements;
    desc.placement_seed = (uint64_t)placement_seed;
    desc.deadline_ms = (uint32_t)deadline_ms;
    desc.chunk_bytes = (size_t)chunk_bytes;
    desc.requests_in_flight = (uint32_t)requests_in_flight;
    desc.persistent = persistent;
    desc.replica_endpoints = replica_count ? (const char* const*)replicas : NULL;
    desc.replica_of = replica_count ? replica_index : NULL;
    desc.replica_count = replica_count;
    desc.lease_ms = (uint32_t)lease_ms;
    sw_runtime_t* rt = (sw_runtime_t*)(intptr_t)runtime;
    sw_carrier_t* carrier = NULL;
    sw_error_t* e = open ? sw_carrier_open_remote(rt, (sw_dtype_t)dtype, (size_t)size, &desc, &carrier)
                         : sw_carrier_create_remote(rt, (sw_dtype_t)dtype, (size_t)size, &desc, &carrier);
    if (!sw_j_failed(env, e)) result = (jlong)(intptr_t)carrier;
  }
done:
  free(pw);
  free(u);
  free(ns);
  free(replica_index);
  sw_j_free_utf8s(replicas, replica_count);
  sw_j_free_utf8s(eps, count);
  return result;
}

/* The options of a read-only File carrier (sw_file_carrier_desc_t). */
static sw_file_carrier_desc_t sw_j_file_desc(jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight) {
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.direct_io = direct_io;
  desc.chunk_bytes = (size_t)chunk_bytes;
  desc.requests_in_flight = (uint32_t)requests_in_flight;
  return desc;
}

/* sw_carrier_open_file_segments: segment i is counts[i] slots at byte
 * offsets[i] (the two arrays of one length, which Carrier checks). */
jlong carrier_open_file_segments(JNIEnv* env, jlong runtime, jint dtype, jbyteArray path, jlongArray offsets,
                                 jlongArray counts, jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight) {
  jsize n = (*env)->GetArrayLength(env, offsets);
  if ((*env)->GetArrayLength(env, counts) != n) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "segment offsets and counts differ in length");
    return 0;
  }
  sw_file_segment_t* segments = (sw_file_segment_t*)malloc(((size_t)n + 1) * sizeof *segments);
  if (!segments) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory for the segments");
    return 0;
  }
  for (jsize i = 0; i < n; ++i) {
    jlong offset = 0, count = 0;
    (*env)->GetLongArrayRegion(env, offsets, i, 1, &offset);
    (*env)->GetLongArrayRegion(env, counts, i, 1, &count);
    segments[i].byte_offset = (uint64_t)offset;
    segments[i].count = (size_t)count;
  }
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) {
    free(segments);
    return 0;
  }
  sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_open_file_segments((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, p, segments,
                                                (size_t)n, &desc, &carrier);
  free(p);
  free(segments);
  if (sw_j_failed(env, e)) return 0;
  return (jlong)(intptr_t)carrier;
}

/* What an opener made, as {carrier, dtype, rank, order, data_offset,
 * data_bytes, segments, shape[rank], logical_shape[rank], grid_shape[rank],
 * tile_shape[rank], permutation[rank]} (FileTensor reads it); or NULL with
 * the error thrown. The caller owns the carrier's reference; it is released
 * here when the array cannot be made. */
static jlongArray sw_j_opened(JNIEnv* env, sw_error_t* e, sw_carrier_t* carrier, const sw_file_tensor_info_t* info) {
  if (sw_j_failed(env, e)) return NULL;
  size_t rank = info->rank > SW_MAX_RANK ? SW_MAX_RANK : info->rank;
  int64_t v[7 + 5 * SW_MAX_RANK];
  v[0] = (int64_t)(intptr_t)carrier;
  v[1] = (int64_t)info->dtype;
  v[2] = (int64_t)rank;
  v[3] = (int64_t)info->order;
  v[4] = (int64_t)info->data_offset;
  v[5] = (int64_t)info->data_bytes;
  v[6] = (int64_t)info->segments;
  for (size_t i = 0; i < rank; ++i) {
    v[7 + i] = info->shape[i];
    v[7 + rank + i] = info->logical_shape[i];
    v[7 + 2 * rank + i] = info->grid_shape[i];
    v[7 + 3 * rank + i] = info->tile_shape[i];
    v[7 + 4 * rank + i] = (int64_t)info->permutation[i];
  }
  jlongArray a = sw_j_long_array(env, v, 7 + 5 * rank);
  if (!a) sw_carrier_release(carrier); /* OutOfMemoryError pending */
  return a;
}

/* sw_carrier_open_npy: the opened array (sw_j_opened). */
jlongArray carrier_open_npy(JNIEnv* env, jlong runtime, jbyteArray path, jboolean direct_io, jlong chunk_bytes,
                            jlong requests_in_flight) {
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) return NULL;
  sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_open_npy((sw_runtime_t*)(intptr_t)runtime, p, &desc, &info, &carrier);
  free(p);
  return sw_j_opened(env, e, carrier, &info);
}

/* An opener of tensor `name` of one file (safetensors, GGUF). */
typedef sw_error_t* (*sw_j_named_opener)(sw_runtime_t*, const char*, const char*, const sw_file_carrier_desc_t*,
                                         sw_file_tensor_info_t*, sw_carrier_t**);

static jlongArray sw_j_open_named(JNIEnv* env, sw_j_named_opener open, jlong runtime, jbyteArray path, jbyteArray name,
                                  jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight) {
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) return NULL;
  char* n = sw_j_utf8(env, name, "the tensor name");
  if (!n) {
    free(p);
    return NULL;
  }
  sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = open((sw_runtime_t*)(intptr_t)runtime, p, n, &desc, &info, &carrier);
  free(p);
  free(n);
  return sw_j_opened(env, e, carrier, &info);
}

/* sw_carrier_open_safetensors: tensor `name` of one file. */
jlongArray carrier_open_safetensors(JNIEnv* env, jlong runtime, jbyteArray path, jbyteArray name, jboolean direct_io,
                                    jlong chunk_bytes, jlong requests_in_flight) {
  return sw_j_open_named(env, sw_carrier_open_safetensors, runtime, path, name, direct_io, chunk_bytes,
                         requests_in_flight);
}

/* sw_carrier_open_gguf: tensor `name` of one GGUF file. */
jlongArray carrier_open_gguf(JNIEnv* env, jlong runtime, jbyteArray path, jbyteArray name, jboolean direct_io,
                             jlong chunk_bytes, jlong requests_in_flight) {
  return sw_j_open_named(env, sw_carrier_open_gguf, runtime, path, name, direct_io, chunk_bytes, requests_in_flight);
}

/* sw_carrier_open_safetensors_stack: the tensors `names` of one file. */
jlongArray carrier_open_safetensors_stack(JNIEnv* env, jlong runtime, jbyteArray path, jobjectArray names,
                                          jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight) {
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) return NULL;
  char** list = NULL;
  size_t count = 0;
  if (sw_j_utf8s(env, names, &list, &count, "names") < 0) {
    free(p);
    return NULL;
  }
  sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_open_safetensors_stack((sw_runtime_t*)(intptr_t)runtime, p, (const char* const*)list,
                                                    count, &desc, &info, &carrier);
  free(p);
  sw_j_free_utf8s(list, count);
  return sw_j_opened(env, e, carrier, &info);
}

/* sw_carrier_open_safetensors_stack_files: tensor names[i] of file
 * paths[i]; the two arrays have one length. */
jlongArray carrier_open_safetensors_stack_files(JNIEnv* env, jlong runtime, jobjectArray paths, jobjectArray names,
                                                jboolean direct_io, jlong chunk_bytes, jlong requests_in_flight) {
  char** files = NULL;
  char** list = NULL;
  size_t nfiles = 0, count = 0;
  if (sw_j_utf8s(env, paths, &files, &nfiles, "paths") < 0) return NULL;
  if (sw_j_utf8s(env, names, &list, &count, "names") < 0) {
    sw_j_free_utf8s(files, nfiles);
    return NULL;
  }
  jlongArray result = NULL;
  if (nfiles != count) {
    char text[128];
    snprintf(text, sizeof text, "%zu paths for %zu tensor names: give one path per name", nfiles, count);
    sw_j_throw_code(env, SW_ERROR_VALUE, text);
  } else {
    sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
    sw_file_tensor_info_t info;
    sw_file_tensor_info_init(&info);
    sw_carrier_t* carrier = NULL;
    sw_error_t* e = sw_carrier_open_safetensors_stack_files((sw_runtime_t*)(intptr_t)runtime, (const char* const*)files,
                                                            (const char* const*)list, count, &desc, &info, &carrier);
    result = sw_j_opened(env, e, carrier, &info);
  }
  sw_j_free_utf8s(files, nfiles);
  sw_j_free_utf8s(list, count);
  return result;
}

/* sw_carrier_open_raw_tensor; `order` is a sw_file_order_t. */
jlongArray carrier_open_raw_tensor(JNIEnv* env, jlong runtime, jbyteArray path, jint dtype, jlong byte_offset,
                                   jlongArray shape, jint order, jboolean direct_io, jlong chunk_bytes,
                                   jlong requests_in_flight) {
  int64_t extents[SW_MAX_RANK];
  jsize rank = sw_j_longs(env, shape, extents, SW_MAX_RANK, "the shape");
  if (rank < 0) return NULL;
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) return NULL;
  sw_file_carrier_desc_t desc = sw_j_file_desc(direct_io, chunk_bytes, requests_in_flight);
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* carrier = NULL;
  sw_error_t* e = sw_carrier_open_raw_tensor((sw_runtime_t*)(intptr_t)runtime, p, (sw_dtype_t)dtype,
                                             (uint64_t)byte_offset, extents, (size_t)rank, (sw_file_order_t)order,
                                             &desc, &info, &carrier);
  free(p);
  return sw_j_opened(env, e, carrier, &info);
}
