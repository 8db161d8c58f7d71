/* The native methods of DeviceView: what a view describes. */

#include "module.h"

/* {pointer, dtype, rank, shape..., strides_bytes...} of a view. */
jlongArray device_view_describe(JNIEnv* env, jlong view) {
  sw_view_info_t info;
  sw_view_info_init(&info);
  if (sw_j_failed(env, sw_device_view_describe((const sw_device_view_t*)(intptr_t)view, &info))) return NULL;
  int64_t v[3 + 2 * SW_MAX_RANK];
  v[0] = (int64_t)(intptr_t)info.pointer;
  v[1] = (int64_t)info.dtype;
  v[2] = (int64_t)info.rank;
  for (size_t i = 0; i < info.rank; ++i) {
    v[3 + i] = info.shape[i];
    v[3 + info.rank + i] = info.strides_bytes[i];
  }
  return sw_j_long_array(env, v, 3 + 2 * info.rank);
}
