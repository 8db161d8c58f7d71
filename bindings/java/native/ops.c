/* The native methods of Ops: the matmul with a result dtype. */

#include "module.h"

jlong matmul_ex(JNIEnv* env, jlong a, jlong b, jint out_dtype) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = (sw_dtype_t)out_dtype;
  sw_tensor_t* out = NULL;
  if (sw_j_failed(env, sw_matmul_ex((sw_tensor_t*)(intptr_t)a, (sw_tensor_t*)(intptr_t)b, &desc, &out))) return 0;
  return (jlong)(intptr_t)out;
}
