/* The native methods of StrideWeave: saving tensors as model files
 * (.safetensors, .npy). */

#include <stdlib.h>

#include "module.h"

/* sw_save_safetensors: names[i] holds tensors[i] (handles the caller keeps
 * for the call); metadata keys and values of one length (null: none). */
void save_safetensors(JNIEnv* env, jbyteArray path, jobjectArray names, jlongArray tensors, jobjectArray metadata_keys,
                      jobjectArray metadata_values) {
  char* p = NULL;
  char **list = NULL, **keys = NULL, **values = NULL;
  size_t count = 0, nkeys = 0, nvalues = 0;
  sw_tensor_t** handles = NULL;
  jsize ntensors = tensors ? (*env)->GetArrayLength(env, tensors) : 0;
  if (!(p = sw_j_utf8(env, path, "the path"))) goto done;
  if (sw_j_utf8s(env, names, &list, &count, "names") < 0) goto done;
  if (sw_j_utf8s(env, metadata_keys, &keys, &nkeys, "metadata keys") < 0) goto done;
  if (sw_j_utf8s(env, metadata_values, &values, &nvalues, "metadata values") < 0) goto done;
  if ((size_t)ntensors != count || nkeys != nvalues) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "names and tensors (metadata keys and values) differ in length");
    goto done;
  }
  handles = (sw_tensor_t**)calloc(count + 1, sizeof(sw_tensor_t*));
  if (!handles) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (jsize i = 0; i < ntensors; ++i) {
    jlong h = 0;
    (*env)->GetLongArrayRegion(env, tensors, i, 1, &h);
    handles[i] = (sw_tensor_t*)(intptr_t)h;
  }
  {
    sw_safetensors_save_desc_t desc;
    sw_safetensors_save_desc_init(&desc);
    desc.metadata_keys = (const char* const*)keys;
    desc.metadata_values = (const char* const*)values;
    desc.metadata_count = nkeys;
    sw_j_failed(env, sw_save_safetensors(p, (const char* const*)list, handles, count, &desc));
  }
done:
  free(p);
  free(handles);
  sw_j_free_utf8s(list, count);
  sw_j_free_utf8s(keys, nkeys);
  sw_j_free_utf8s(values, nvalues);
}

/* sw_save_npy. */
void save_npy(JNIEnv* env, jbyteArray path, jlong tensor) {
  char* p = sw_j_utf8(env, path, "the path");
  if (!p) return;
  sw_j_failed(env, sw_save_npy(p, (sw_tensor_t*)(intptr_t)tensor));
  free(p);
}
