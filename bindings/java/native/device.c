/* The native methods of Device: creation, allocation, copy events, and the
 * fake device's controls (tests). */

#include <stdlib.h>

#include "module.h"

jlong device_create_fake(JNIEnv* env, jlong runtime) {
  sw_device_t* d = NULL;
  if (sw_j_failed(env, sw_device_create_fake((sw_runtime_t*)(intptr_t)runtime, NULL, &d))) return 0;
  return (jlong)(intptr_t)d;
}

jlong device_create_vulkan(JNIEnv* env, jlong runtime) {
  sw_device_t* d = NULL;
  if (sw_j_failed(env, sw_device_create_vulkan((sw_runtime_t*)(intptr_t)runtime, NULL, &d))) return 0;
  return (jlong)(intptr_t)d;
}

jlong device_alloc(JNIEnv* env, jlong device, jint dtype, jlongArray shape, jlong max_extent_bytes, jlong alignment,
                   jlong extent_bytes) {
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  jsize n = sw_j_longs(env, shape, spec.shape, SW_MAX_RANK, "the shape");
  if (n < 0) return 0;
  spec.dtype = (sw_dtype_t)dtype;
  spec.rank = (size_t)n;
  spec.max_extent_bytes = (uint64_t)max_extent_bytes;
  spec.alignment = (uint64_t)alignment;
  sw_device_allocation_t* a = NULL;
  if (sw_j_failed(env, sw_device_alloc((sw_device_t*)(intptr_t)device, &spec, (uint64_t)extent_bytes, &a))) return 0;
  return (jlong)(intptr_t)a;
}

/* {host_released, complete} as 0/1. */
jintArray device_event_query(JNIEnv* env, jlong device, jlongArray event) {
  sw_copy_event_t e;
  if (sw_j_event(env, event, &e) < 0) return NULL;
  bool released = false, complete = false;
  if (sw_j_failed(env, sw_device_event_query((sw_device_t*)(intptr_t)device, &e, &released, &complete))) return NULL;
  jint v[2] = {released, complete};
  jintArray a = (*env)->NewIntArray(env, 2);
  if (a) (*env)->SetIntArrayRegion(env, a, 0, 2, v);
  return a;
}

void device_event_wait(JNIEnv* env, jlong device, jlongArray event, jlong timeout_ns) {
  sw_copy_event_t e;
  if (sw_j_event(env, event, &e) < 0) return;
  sw_j_failed(env, sw_device_event_wait((sw_device_t*)(intptr_t)device, &e, timeout_ns));
}

jstring fake_device_log_entry(JNIEnv* env, jlong device, jlong index) {
  size_t length = 0;
  const sw_device_t* d = (const sw_device_t*)(intptr_t)device;
  sw_error_t* e = sw_fake_device_log_entry(d, (size_t)index, NULL, 0, &length);
  if (e && sw_error_code(e) != SW_ERROR_VALUE) {
    sw_j_throw(env, e);
    return NULL;
  }
  sw_error_free(e);
  char* text = (char*)malloc(length + 1);
  if (!text) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  jstring s = NULL;
  if (!sw_j_failed(env, sw_fake_device_log_entry(d, (size_t)index, text, length + 1, &length)))
    s = (*env)->NewStringUTF(env, text);
  free(text);
  return s;
}

void fake_device_complete(JNIEnv* env, jlong device, jlongArray event) {
  sw_copy_event_t e;
  if (sw_j_event(env, event, &e) < 0) return;
  sw_j_failed(env, sw_fake_device_complete((sw_device_t*)(intptr_t)device, &e));
}
