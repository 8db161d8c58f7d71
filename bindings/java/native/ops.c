/* The native methods of Ops: the matmul with a result dtype, cat and stack. */

#include <stdlib.h>

#include "module.h"

jlong matmul_ex(JNIEnv* env, jlong a, jlong b, jint out_dtype) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = (sw_dtype_t)out_dtype;
  sw_tensor_t* out = NULL;
  if (sw_j_failed(env, sw_matmul_ex((sw_tensor_t*)(intptr_t)a, (sw_tensor_t*)(intptr_t)b, &desc, &out))) return 0;
  return (jlong)(intptr_t)out;
}

/* sw_cat (stack false) or sw_stack (stack true) of the tensors whose
 * handles `tensors` holds. */
jlong tensor_join(JNIEnv* env, jlongArray tensors, jlong axis, jboolean stack) {
  jsize n = tensors ? (*env)->GetArrayLength(env, tensors) : 0;
  sw_tensor_t** list = (sw_tensor_t**)malloc(((size_t)n + 1) * sizeof *list);
  if (!list) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory for the list of tensors");
    return 0;
  }
  for (jsize i = 0; i < n; ++i) {
    jlong h = 0;
    (*env)->GetLongArrayRegion(env, tensors, i, 1, &h);
    list[i] = (sw_tensor_t*)(intptr_t)h;
  }
  sw_tensor_t* out = NULL;
  sw_error_t* e = stack ? sw_stack(list, (size_t)n, (int64_t)axis, &out) : sw_cat(list, (size_t)n, (int64_t)axis, &out);
  free(list);
  if (sw_j_failed(env, e)) return 0;
  return (jlong)(intptr_t)out;
}
