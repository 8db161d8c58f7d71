/* The native methods of Layout. */

#include <stdlib.h>

#include "module.h"

jlong layout_create(JNIEnv* env, jlongArray shape, jlongArray stride) {
  int64_t sh[SW_MAX_RANK], st[SW_MAX_RANK];
  jsize n = sw_j_longs(env, shape, sh, SW_MAX_RANK, "shape");
  if (n < 0) return 0;
  jsize m = sw_j_longs(env, stride, st, SW_MAX_RANK, "stride");
  if (m < 0) return 0;
  if (n != m) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "shape and stride differ in rank");
    return 0;
  }
  sw_layout_t* layout = NULL;
  if (sw_j_failed(env, sw_layout_create(sh, st, (size_t)n, &layout))) return 0;
  return (jlong)(intptr_t)layout;
}

jlong layout_group(JNIEnv* env, jlongArray modes) {
  int64_t h[SW_MAX_RANK];
  jsize n = sw_j_longs(env, modes, h, SW_MAX_RANK, "modes");
  if (n < 0) return 0;
  const sw_layout_t* m[SW_MAX_RANK];
  for (jsize i = 0; i < n; ++i) m[i] = (const sw_layout_t*)(intptr_t)h[i];
  sw_layout_t* layout = NULL;
  if (sw_j_failed(env, sw_layout_group(m, (size_t)n, &layout))) return 0;
  return (jlong)(intptr_t)layout;
}

jlong layout_permute(JNIEnv* env, jlong layout, jlongArray perm) {
  size_t p[SW_MAX_RANK];
  jsize n = sw_j_perm(env, perm, p);
  if (n < 0) return 0;
  sw_layout_t* out = NULL;
  if (sw_j_failed(env, sw_layout_permute((const sw_layout_t*)(intptr_t)layout, p, (size_t)n, &out))) return 0;
  return (jlong)(intptr_t)out;
}

jlongArray layout_extents(JNIEnv* env, jlong layout) {
  size_t rank = 0;
  int64_t v[SW_MAX_RANK + 1];
  if (sw_j_failed(env, sw_layout_rank((const sw_layout_t*)(intptr_t)layout, &rank))) return NULL;
  if (sw_j_failed(env, sw_layout_extents((const sw_layout_t*)(intptr_t)layout, v, SW_MAX_RANK + 1))) return NULL;
  return sw_j_long_array(env, v, rank);
}

jlongArray layout_decode(JNIEnv* env, jlong layout, jlong ordinal) {
  size_t rank = 0;
  int64_t v[SW_MAX_RANK + 1];
  if (sw_j_failed(env, sw_layout_rank((const sw_layout_t*)(intptr_t)layout, &rank))) return NULL;
  if (sw_j_failed(env, sw_layout_decode((const sw_layout_t*)(intptr_t)layout, ordinal, v, SW_MAX_RANK + 1)))
    return NULL;
  return sw_j_long_array(env, v, rank);
}

jstring layout_to_string(JNIEnv* env, jlong layout) {
  size_t length = 0;
  const sw_layout_t* l = (const sw_layout_t*)(intptr_t)layout;
  if (sw_j_failed(env, sw_layout_to_string(l, NULL, 0, &length))) return NULL;
  char* text = (char*)malloc(length + 1);
  if (!text) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  jstring s = NULL;
  if (!sw_j_failed(env, sw_layout_to_string(l, text, length + 1, &length))) s = (*env)->NewStringUTF(env, text);
  free(text);
  return s;
}
