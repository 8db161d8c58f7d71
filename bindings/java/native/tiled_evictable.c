/* The native methods of TiledEvictable: creation (with no policy, the LRU
 * policy or a Java ResidencyPolicy called through PolicyBridge), geometry,
 * tile states, residency transitions, prefetch and the expert feed-forward. */

#include <string.h>

#include "module.h"

static jlongArray sw_j_tiled_shape(JNIEnv* env, jlong tiled,
                                   sw_error_t* (*get)(const sw_carrier_t*, int64_t*, size_t)) {
  size_t rank = 0;
  int64_t v[SW_MAX_RANK + 1];
  if (sw_j_failed(env, sw_tiled_rank((const sw_carrier_t*)(intptr_t)tiled, &rank))) return NULL;
  if (sw_j_failed(env, get((const sw_carrier_t*)(intptr_t)tiled, v, SW_MAX_RANK + 1))) return NULL;
  return sw_j_long_array(env, v, rank);
}

jlongArray tiled_grid_shape(JNIEnv* env, jlong tiled) { return sw_j_tiled_shape(env, tiled, sw_tiled_grid_shape); }

jlongArray tiled_tile_shape(JNIEnv* env, jlong tiled) { return sw_j_tiled_shape(env, tiled, sw_tiled_tile_shape); }

/* {location, valid, dirty} of one tile as an int[3]. */
jintArray tiled_tile_state(JNIEnv* env, jlong tiled, jlongArray coord) {
  int64_t c[SW_MAX_RANK];
  jsize n = sw_j_longs(env, coord, c, SW_MAX_RANK, "the coordinate");
  if (n < 0) return NULL;
  sw_tile_state_t state;
  memset(&state, 0, sizeof state);
  state.struct_size = sizeof state;
  if (sw_j_failed(env, sw_tiled_tile_state((const sw_carrier_t*)(intptr_t)tiled, c, (size_t)n, &state))) return NULL;
  jint v[3] = {(jint)state.location, state.valid, state.dirty};
  jintArray a = (*env)->NewIntArray(env, 3);
  if (a) (*env)->SetIntArrayRegion(env, a, 0, 3, v);
  return a;
}

/* Residency transitions of a TileSet: an await handle, or 0 when blocking. */
jlong tiled_residency(JNIEnv* env, jlong tiled, jlong tiles, jboolean evict, jboolean blocking) {
  sw_carrier_t* t = (sw_carrier_t*)(intptr_t)tiled;
  const sw_tile_set_t* s = (const sw_tile_set_t*)(intptr_t)tiles;
  if (blocking) {
    sw_j_failed(env, evict ? sw_tiled_evict(t, s) : sw_tiled_promote(t, s));
    return 0;
  }
  sw_await_t* a = NULL;
  if (sw_j_failed(env, evict ? sw_tiled_evict_async(t, s, &a) : sw_tiled_promote_async(t, s, &a))) return 0;
  return (jlong)(intptr_t)a;
}

/* sw_tiled_prefetch_async: an await handle. */
jlong tiled_prefetch(JNIEnv* env, jlong tiled, jlong tiles) {
  sw_await_t* a = NULL;
  if (sw_j_failed(env,
                  sw_tiled_prefetch_async((sw_carrier_t*)(intptr_t)tiled, (const sw_tile_set_t*)(intptr_t)tiles, &a)))
    return 0;
  return (jlong)(intptr_t)a;
}

/* sw_tiled_expert_ffn over the full tensors of the three TiledEvictables
 * (each one's carrier comes from its tensor, as sw_tensor_carrier gives it),
 * with the desc fields as arguments: the activation (a sw_unary_op_t) and
 * the result's dtype (0: the experts'). gates may be 0, and up_experts 0
 * for the fused form (gate_experts then the gate_up experts). An await
 * handle. */
jlong tiled_expert_ffn(JNIEnv* env, jlong gate_experts, jlong up_experts, jlong down_experts, jlong x, jlong ids,
                       jlong gates, jint activation, jint out_dtype) {
  sw_tensor_t* experts[3] = {(sw_tensor_t*)(intptr_t)gate_experts, (sw_tensor_t*)(intptr_t)up_experts,
                             (sw_tensor_t*)(intptr_t)down_experts};
  sw_carrier_t* tiled[3] = {NULL, NULL, NULL};
  sw_error_t* e = NULL;
  for (int i = 0; i < 3 && !e; ++i)
    if (experts[i] || i != 1) e = sw_tensor_carrier(experts[i], &tiled[i]);
  sw_await_t* a = NULL;
  if (!e) {
    sw_expert_ffn_desc_t desc;
    sw_expert_ffn_desc_init(&desc);
    desc.activation = (sw_unary_op_t)activation;
    desc.out_dtype = (sw_dtype_t)out_dtype;
    e = sw_tiled_expert_ffn(tiled[0], experts[0], tiled[1], experts[1], tiled[2], experts[2], (sw_tensor_t*)(intptr_t)x,
                            (sw_tensor_t*)(intptr_t)ids, (sw_tensor_t*)(intptr_t)gates, &desc, &a);
  }
  for (int i = 0; i < 3; ++i) sw_carrier_release(tiled[i]);
  if (sw_j_failed(env, e)) return 0;
  return (jlong)(intptr_t)a;
}

/* user_data is a global reference to the Java ResidencyPolicy; the bridge
 * (PolicyBridge.plan) converts the tiles, calls it, and returns an error
 * handle (0 on success) with the plan handle in out[0]. */
static sw_error_t* sw_j_policy_plan_fn(void* user_data, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                                       sw_residency_plan_t** out_plan) {
  JNIEnv* env = sw_j_env();
  *out_plan = NULL;
  if (!env) return sw_error_create(SW_ERROR_INTERNAL, "residency policy: no JNI environment on this thread");
  if ((*env)->PushLocalFrame(env, 8) != 0) {
    (*env)->ExceptionClear(env);
    return sw_error_create(SW_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  sw_error_t* error = NULL;
  jlongArray out = (*env)->NewLongArray(env, 1);
  if (!out) {
    (*env)->ExceptionClear(env);
    error = sw_error_create(SW_ERROR_OUT_OF_MEMORY, "out of memory");
  } else {
    jlong e = (*env)->CallStaticLongMethod(env, sw_j_policy, sw_j_policy_plan, (jobject)user_data,
                                           (jlong)(intptr_t)required, (jint)purpose, out);
    if ((*env)->ExceptionCheck(env)) {
      (*env)->ExceptionClear(env);
      error = sw_error_create(SW_ERROR_INTERNAL, "residency policy: the Java bridge failed");
    } else if (e) {
      error = (sw_error_t*)(intptr_t)e;
    } else {
      jlong plan = 0;
      (*env)->GetLongArrayRegion(env, out, 0, 1, &plan);
      *out_plan = (sw_residency_plan_t*)(intptr_t)plan;
    }
  }
  (*env)->PopLocalFrame(env, NULL);
  return error;
}

static void sw_j_policy_outcome_fn(void* user_data, const sw_residency_plan_t* plan, bool committed,
                                   const sw_tile_set_t* promoted, const sw_tile_set_t* evicted) {
  JNIEnv* env = sw_j_env();
  if (!env) return;
  (*env)->CallStaticVoidMethod(env, sw_j_policy, sw_j_policy_outcome, (jobject)user_data, (jlong)(intptr_t)plan,
                               (jboolean)committed, (jlong)(intptr_t)promoted, (jlong)(intptr_t)evicted);
  if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
}

static void sw_j_policy_destroy_fn(void* user_data) {
  JNIEnv* env = sw_j_env();
  if (env && user_data) (*env)->DeleteGlobalRef(env, (jobject)user_data);
}

/* sw_tiled_create with no policy (lru 0, policy null), the built-in LRU
 * policy (lru != 0) or a Java ResidencyPolicy (policy != null). */
jlong tiled_create(JNIEnv* env, jlong primary, jlong secondary, jlongArray grid_shape, jlongArray tile_shape, jlong lru,
                   jobject policy) {
  int64_t grid[SW_MAX_RANK], tile[SW_MAX_RANK];
  jsize n = sw_j_longs(env, grid_shape, grid, SW_MAX_RANK, "grid_shape");
  if (n < 0) return 0;
  jsize m = sw_j_longs(env, tile_shape, tile, SW_MAX_RANK, "tile_shape");
  if (m < 0) return 0;
  if (n != m) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "grid_shape and tile_shape differ in rank");
    return 0;
  }
  sw_residency_policy_t vtable;
  const sw_residency_policy_t* used = NULL;
  if (lru) {
    if (sw_j_failed(env, sw_lru_policy_as_residency_policy((sw_lru_policy_t*)(intptr_t)lru, &vtable))) return 0;
    used = &vtable;
  } else if (policy) {
    sw_residency_policy_init(&vtable);
    vtable.user_data = (*env)->NewGlobalRef(env, policy);
    if (!vtable.user_data) return 0;
    vtable.plan = sw_j_policy_plan_fn;
    vtable.outcome = sw_j_policy_outcome_fn;
    vtable.destroy = sw_j_policy_destroy_fn;
    used = &vtable;
  }
  sw_carrier_t* tiled = NULL;
  sw_error_t* e = sw_tiled_create((sw_carrier_t*)(intptr_t)primary, (sw_carrier_t*)(intptr_t)secondary, grid, tile,
                                  (size_t)n, used, &tiled);
  if (e) {
    /* On failure the library did not take the policy. */
    if (used && used->destroy) used->destroy(used->user_data);
    sw_j_throw(env, e);
    return 0;
  }
  return (jlong)(intptr_t)tiled;
}
