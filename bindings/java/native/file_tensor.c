/* The native methods of FileTensor: the logical view of an opened model-file
 * tensor. */

#include "module.h"

/* sw_file_tensor_view with the permutation of an opener's info (a negative
 * entry is no permutation: VALUE from the library). A tensor handle. */
jlong file_tensor_view(JNIEnv* env, jlong tensor, jlongArray permutation) {
  int64_t perm[SW_MAX_RANK];
  jsize rank = sw_j_longs(env, permutation, perm, SW_MAX_RANK, "the permutation");
  if (rank < 0) return 0;
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  info.rank = (size_t)rank;
  for (jsize i = 0; i < rank; ++i) info.permutation[i] = perm[i] < 0 ? SIZE_MAX : (size_t)perm[i];
  sw_tensor_t* view = NULL;
  if (sw_j_failed(env, sw_file_tensor_view((sw_tensor_t*)(intptr_t)tensor, &info, &view))) return 0;
  return (jlong)(intptr_t)view;
}
