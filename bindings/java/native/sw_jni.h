/* What the C sources of the JNI library (bindings/java/native/) share:
 * the JNI environment of a thread, the Java exception of an error, and the
 * marshalling of strings, long[]s, direct buffers and copy events.
 *
 * The sources, one per Java class of org.strideweave whose methods call
 * them (module.h lists their functions):
 *   helpers.c              JNI_OnLoad, this header's functions
 *   errors.c               Errors, PolicyBridge
 *   strideweave_runtime.c  StrideWeaveRuntime
 *   strideweave.c          StrideWeave (saving model files)
 *   carrier.c              Carrier (buffers, external memory, file and
 *                          zstd carriers, the model-file openers)
 *   file_tensor.c          FileTensor
 *   layout.c               Layout
 *   tensor.c               Tensor
 *   ops.c                  Ops
 *   tile_set.c             TileSet
 *   tile_selection.c       TileSelection
 *   tiled_evictable.c      TiledEvictable (with the upcalls of a Java
 *                          ResidencyPolicy through PolicyBridge)
 *   lru_policy.c           LruPolicy
 *   await_result.c         AwaitResult (with the completion upcall through
 *                          AwaitBridge)
 *   device.c               Device (and the fake device's test controls)
 *   device_allocation.c    DeviceAllocation
 *   device_view.c          DeviceView
 *
 * Conventions: handles pass as jlongs holding the address; a function that
 * fails throws with JNI's Throw and returns (0, NULL or -1), so no C frame
 * is unwound; every upcall clears what Java threw before it returns to C.
 */
#ifndef STRIDEWEAVE_JAVA_NATIVE_SW_JNI_H
#define STRIDEWEAVE_JAVA_NATIVE_SW_JNI_H

#include <jni.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

/* The classes and methods the C side calls, resolved by JNI_OnLoad. */
extern jclass sw_j_errors; /* org.strideweave.Errors */
extern jmethodID sw_j_errors_create;
extern jclass sw_j_policy; /* org.strideweave.PolicyBridge */
extern jmethodID sw_j_policy_plan;
extern jmethodID sw_j_policy_outcome;
extern jclass sw_j_await; /* org.strideweave.AwaitBridge */
extern jmethodID sw_j_await_complete;

/* The calling thread's JNI environment (NULL if there is none). A thread of
 * the library (the loop thread, a worker) that calls into Java is attached
 * as a daemon thread, so it never keeps the JVM alive, and detached when it
 * ends. */
JNIEnv* sw_j_env(void);

/* ---- errors ---- */

/* Throws the Java exception for `error` (Errors.create picks the class, or
 * hands back the exception a Java residency policy threw) and frees it. */
void sw_j_throw(JNIEnv* env, sw_error_t* error);
/* Throws a facade-side error of `code` (an argument check made here). */
void sw_j_throw_code(JNIEnv* env, sw_error_code_t code, const char* text);
/* True (and an exception pending) when `error` is set. */
int sw_j_failed(JNIEnv* env, sw_error_t* error);

/* ---- arrays ---- */

/* Copies a long[] of at most `limit` values (null: none); -1 with VALUE
 * pending if longer. */
jsize sw_j_longs(JNIEnv* env, jlongArray array, int64_t* out, jsize limit, const char* what);
/* A new long[] of `count` values (NULL with OutOfMemoryError pending). */
jlongArray sw_j_long_array(JNIEnv* env, const int64_t* values, size_t count);
/* A permutation out of a long[]: -1 with INDEX pending for a negative
 * entry (VALUE for more than SW_MAX_RANK). */
jsize sw_j_perm(JNIEnv* env, jlongArray perm, size_t* out);

/* ---- direct buffers ---- */

/* The address of [byte_offset, byte_offset + bytes) of a direct buffer,
 * or NULL with VALUE pending. */
void* sw_j_buffer_range(JNIEnv* env, jobject buffer, jlong byte_offset, jlong bytes);

/* ---- strings ---- */

/* Strings pass as byte[]s of exact UTF-8 ending in their NUL (CStrings
 * makes them): a malloc'd copy (free it), or NULL with VALUE or
 * OUT_OF_MEMORY pending. */
char* sw_j_utf8(JNIEnv* env, jbyteArray bytes, const char* what);
/* An Object[] of such byte[]s (null: none) as `count` C strings; free with
 * sw_j_free_utf8s. -1 with an exception pending. */
int sw_j_utf8s(JNIEnv* env, jobjectArray array, char*** out, size_t* out_count, const char* what);
void sw_j_free_utf8s(char** strings, size_t count);

/* ---- copy events ---- */

/* A copy event out of a long[] {generation, id}: -1 with VALUE pending if
 * it is not one. */
int sw_j_event(JNIEnv* env, jlongArray event, sw_copy_event_t* out);
/* {generation, id} as a new long[]. */
jlongArray sw_j_event_array(JNIEnv* env, const sw_copy_event_t* e);

#endif
