/* The native methods of Tensor: shape, permutation, data through direct
 * buffers, and random tensors. */

#include "module.h"

/* sw_tensor_read into / sw_tensor_write from a direct buffer's range. */
void tensor_read_buffer(JNIEnv* env, jlong tensor, jobject buffer, jlong byte_offset, jlong bytes) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (p) sw_j_failed(env, sw_tensor_read((const sw_tensor_t*)(intptr_t)tensor, p, (size_t)bytes));
}

void tensor_write_buffer(JNIEnv* env, jlong tensor, jobject buffer, jlong byte_offset, jlong bytes) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (p) sw_j_failed(env, sw_tensor_write((sw_tensor_t*)(intptr_t)tensor, p, (size_t)bytes));
}

jlongArray tensor_shape(JNIEnv* env, jlong tensor) {
  size_t rank = 0;
  int64_t v[SW_MAX_RANK + 1];
  if (sw_j_failed(env, sw_tensor_rank((const sw_tensor_t*)(intptr_t)tensor, &rank))) return NULL;
  if (sw_j_failed(env, sw_tensor_shape((const sw_tensor_t*)(intptr_t)tensor, v, SW_MAX_RANK + 1))) return NULL;
  return sw_j_long_array(env, v, rank);
}

jlong tensor_permute(JNIEnv* env, jlong tensor, jlongArray perm) {
  size_t p[SW_MAX_RANK];
  jsize n = sw_j_perm(env, perm, p);
  if (n < 0) return 0;
  sw_tensor_t* out = NULL;
  if (sw_j_failed(env, sw_tensor_permute((sw_tensor_t*)(intptr_t)tensor, p, (size_t)n, &out))) return 0;
  return (jlong)(intptr_t)out;
}

jlong tensor_from_buffer(JNIEnv* env, jlong runtime, jint dtype, jlongArray extents, jobject buffer, jlong byte_offset,
                         jlong bytes) {
  int64_t ext[SW_MAX_RANK];
  jsize n = sw_j_longs(env, extents, ext, SW_MAX_RANK, "the shape");
  if (n < 0) return 0;
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (!p) return 0;
  sw_tensor_t* t = NULL;
  if (sw_j_failed(env, sw_tensor_from_data((sw_runtime_t*)(intptr_t)runtime, (sw_dtype_t)dtype, ext, (size_t)n, p, &t)))
    return 0;
  return (jlong)(intptr_t)t;
}

/* sw_tensor_random with the options of sw_random_desc_t: (p0, p1) are (low,
 * high) for SW_RANDOM_UNIFORM and (mean, stddev) for SW_RANDOM_NORMAL. */
jlong tensor_random(JNIEnv* env, jlong runtime, jint distribution, jint dtype, jlong seed, jdouble p0, jdouble p1,
                    jlongArray extents) {
  int64_t ext[SW_MAX_RANK];
  jsize n = sw_j_longs(env, extents, ext, SW_MAX_RANK, "the shape");
  if (n < 0) return 0;
  sw_random_desc_t desc;
  sw_random_desc_init(&desc);
  desc.distribution = (sw_random_distribution_t)distribution;
  desc.dtype = (sw_dtype_t)dtype;
  desc.seed = (uint64_t)seed;
  if (distribution == SW_RANDOM_NORMAL) {
    desc.mean = p0;
    desc.stddev = p1;
  } else {
    desc.low = p0;
    desc.high = p1;
  }
  sw_tensor_t* t = NULL;
  if (sw_j_failed(env, sw_tensor_random((sw_runtime_t*)(intptr_t)runtime, &desc, ext, (size_t)n, &t))) return 0;
  return (jlong)(intptr_t)t;
}
