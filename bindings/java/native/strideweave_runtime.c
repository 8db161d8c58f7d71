/* The native methods of StrideWeaveRuntime. */

#include "module.h"

jlong runtime_create(JNIEnv* env, jlong compute_threads, jlong worker_threads, jlong pool_limit_bytes) {
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.compute_threads = (uint32_t)compute_threads;
  desc.worker_threads = (uint32_t)worker_threads;
  if (pool_limit_bytes >= 0) desc.pool_limit_bytes = (size_t)pool_limit_bytes;
  sw_runtime_t* runtime = NULL;
  if (sw_j_failed(env, sw_runtime_create(&desc, &runtime))) return 0;
  return (jlong)(intptr_t)runtime;
}
