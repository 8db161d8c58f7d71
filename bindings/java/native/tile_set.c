/* The native methods of TileSet. */

#include <stdlib.h>

#include "module.h"

/* A TileSet from count * rank values (rows of `rank`). */
jlong tile_set_create(JNIEnv* env, jlongArray flat, jlong rank) {
  jsize n = flat ? (*env)->GetArrayLength(env, flat) : 0;
  if (rank < 0 || (rank == 0 && n != 0) || (rank > 0 && n % rank != 0)) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "the coordinates are not rows of the rank");
    return 0;
  }
  int64_t* v = (int64_t*)malloc((size_t)n * sizeof(int64_t) + 1);
  if (!v) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return 0;
  }
  if (n) (*env)->GetLongArrayRegion(env, flat, 0, n, (jlong*)v);
  sw_tile_set_t* set = NULL;
  sw_error_t* e = sw_tile_set_create(v, rank ? (size_t)(n / rank) : 0, (size_t)rank, &set);
  free(v);
  if (sw_j_failed(env, e)) return 0;
  return (jlong)(intptr_t)set;
}

/* Every coordinate of a TileSet, row after row, in the set's order. */
jlongArray tile_set_coordinates(JNIEnv* env, jlong set) {
  size_t count = 0, rank = 0;
  const sw_tile_set_t* s = (const sw_tile_set_t*)(intptr_t)set;
  if (sw_j_failed(env, sw_tile_set_count(s, &count)) || sw_j_failed(env, sw_tile_set_rank(s, &rank))) return NULL;
  int64_t* v = (int64_t*)malloc(count * rank * sizeof(int64_t) + 1);
  if (!v) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  jlongArray a = NULL;
  if (!sw_j_failed(env, sw_tile_set_coordinates(s, v, count * rank))) a = sw_j_long_array(env, v, count * rank);
  free(v);
  return a;
}
