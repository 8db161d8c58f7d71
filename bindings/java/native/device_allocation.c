/* The native methods of DeviceAllocation: copies between a direct buffer and
 * the allocation. */

#include "module.h"

/* A copy between a direct buffer's range and the allocation; returns the
 * event {generation, id}. */
jlongArray device_copy(JNIEnv* env, jlong allocation, jboolean to_device, jlong device_offset, jobject buffer,
                       jlong byte_offset, jlong bytes, jboolean async) {
  void* p = sw_j_buffer_range(env, buffer, byte_offset, bytes);
  if (!p) return NULL;
  sw_copy_event_t e;
  sw_copy_event_init(&e);
  sw_device_allocation_t* a = (sw_device_allocation_t*)(intptr_t)allocation;
  sw_error_t* error = to_device ? sw_device_host_to_device(a, (uint64_t)device_offset, p, (uint64_t)bytes, async, &e)
                                : sw_device_device_to_host(a, (uint64_t)device_offset, p, (uint64_t)bytes, async, &e);
  if (sw_j_failed(env, error)) return NULL;
  return sw_j_event_array(env, &e);
}
