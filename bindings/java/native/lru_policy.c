/* The native methods of LruPolicy: a dry-run plan and the statistics. */

#include <string.h>

#include "module.h"

/* What the LRU policy would plan for `required` (a new plan handle),
 * reported back at once as not committed: its view and statistics stay. */
jlong lru_policy_plan(JNIEnv* env, jlong policy, jlong required, jint purpose) {
  sw_residency_policy_t vtable;
  if (sw_j_failed(env, sw_lru_policy_as_residency_policy((sw_lru_policy_t*)(intptr_t)policy, &vtable))) return 0;
  sw_residency_plan_t* plan = NULL;
  sw_error_t* e = vtable.plan(vtable.user_data, (const sw_tile_set_t*)(intptr_t)required,
                              (sw_residency_purpose_t)purpose, &plan);
  if (!e && plan && vtable.outcome) {
    sw_tile_set_t* none = NULL;
    e = sw_tile_set_create(NULL, 0, 0, &none);
    if (!e) vtable.outcome(vtable.user_data, plan, false, none, none);
    sw_tile_set_release(none);
  }
  if (vtable.destroy) vtable.destroy(vtable.user_data);
  if (e) {
    sw_residency_plan_release(plan);
    sw_j_throw(env, e);
    return 0;
  }
  return (jlong)(intptr_t)plan;
}

/* {requests, hits, misses, promoted, evicted}. */
jlongArray lru_policy_stats(JNIEnv* env, jlong policy) {
  sw_lru_stats_t s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  if (sw_j_failed(env, sw_lru_policy_stats((const sw_lru_policy_t*)(intptr_t)policy, &s))) return NULL;
  int64_t v[5] = {(int64_t)s.requests, (int64_t)s.hits, (int64_t)s.misses, (int64_t)s.promoted, (int64_t)s.evicted};
  return sw_j_long_array(env, v, 5);
}
