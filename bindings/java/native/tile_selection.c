/* The native methods of TileSelection. */

#include <stdlib.h>

#include "module.h"

/* A TileSelection from a long[][] (one array per axis). */
jlong tile_selection_create(JNIEnv* env, jobjectArray per_axis) {
  jsize rank = per_axis ? (*env)->GetArrayLength(env, per_axis) : 0;
  int64_t** axes = (int64_t**)calloc((size_t)rank + 1, sizeof(int64_t*));
  size_t* counts = (size_t*)calloc((size_t)rank + 1, sizeof(size_t));
  sw_tile_selection_t* selection = NULL;
  int ok = axes && counts;
  if (!ok) sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
  for (jsize i = 0; ok && i < rank; ++i) {
    jlongArray axis = (jlongArray)(*env)->GetObjectArrayElement(env, per_axis, i);
    jsize n = axis ? (*env)->GetArrayLength(env, axis) : 0;
    axes[i] = (int64_t*)malloc((size_t)n * sizeof(int64_t) + 1);
    if (!axes[i]) {
      sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
      ok = 0;
    } else if (n) {
      (*env)->GetLongArrayRegion(env, axis, 0, n, (jlong*)axes[i]);
    }
    counts[i] = (size_t)n;
    if (axis) (*env)->DeleteLocalRef(env, axis);
  }
  if (ok)
    ok = !sw_j_failed(env, sw_tile_selection_create((const int64_t* const*)axes, counts, (size_t)rank, &selection));
  if (axes)
    for (jsize i = 0; i < rank; ++i) free(axes[i]);
  free(axes);
  free(counts);
  return ok ? (jlong)(intptr_t)selection : 0;
}
