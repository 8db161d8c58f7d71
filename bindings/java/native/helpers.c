/* The JNI library's shared helpers (sw_jni.h): loading, the thread's JNI
 * environment, exceptions, and the marshalling of arrays, direct buffers,
 * strings and copy events. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw_jni.h"

static JavaVM* sw_jvm;
static pthread_key_t sw_j_detach_key;
jclass sw_j_errors;
jmethodID sw_j_errors_create;
jclass sw_j_policy;
jmethodID sw_j_policy_plan;
jmethodID sw_j_policy_outcome;
jclass sw_j_await;
jmethodID sw_j_await_complete;

/* ------------------------------------------------------------------------ */
/* Loading and threads                                                       */
/* ------------------------------------------------------------------------ */

/* Detaches a thread the library attached, when that thread ends. */
static void sw_j_detach(void* vm) {
  if (vm) (*(JavaVM*)vm)->DetachCurrentThread((JavaVM*)vm);
}

static jclass sw_j_global_class(JNIEnv* env, const char* name) {
  jclass local = (*env)->FindClass(env, name);
  if (!local) return NULL;
  jclass global = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  sw_jvm = vm;
  if (pthread_key_create(&sw_j_detach_key, sw_j_detach) != 0) return JNI_ERR;
  sw_j_errors = sw_j_global_class(env, "org/strideweave/Errors");
  sw_j_policy = sw_j_global_class(env, "org/strideweave/PolicyBridge");
  sw_j_await = sw_j_global_class(env, "org/strideweave/AwaitBridge");
  if (!sw_j_errors || !sw_j_policy || !sw_j_await) return JNI_ERR;
  sw_j_errors_create = (*env)->GetStaticMethodID(env, sw_j_errors, "create",
                                                 "(ILjava/lang/String;)Ljava/lang/Throwable;");
  sw_j_policy_plan = (*env)->GetStaticMethodID(env, sw_j_policy, "plan", "(Ljava/lang/Object;JI[J)J");
  sw_j_policy_outcome = (*env)->GetStaticMethodID(env, sw_j_policy, "outcome", "(Ljava/lang/Object;JZJJ)V");
  sw_j_await_complete = (*env)->GetStaticMethodID(env, sw_j_await, "complete",
                                                  "(Ljava/lang/Object;ILjava/lang/String;J)V");
  if (!sw_j_errors_create || !sw_j_policy_plan || !sw_j_policy_outcome || !sw_j_await_complete) return JNI_ERR;
  return JNI_VERSION_1_8;
}

JNIEnv* sw_j_env(void) {
  JNIEnv* env = NULL;
  if (!sw_jvm) return NULL;
  jint got = (*sw_jvm)->GetEnv(sw_jvm, (void**)&env, JNI_VERSION_1_8);
  if (got == JNI_OK) return env;
  if (got != JNI_EDETACHED) return NULL;
  JavaVMAttachArgs args = {JNI_VERSION_1_8, (char*)"strideweave-native", NULL};
  if ((*sw_jvm)->AttachCurrentThreadAsDaemon(sw_jvm, (void**)&env, &args) != JNI_OK) return NULL;
  pthread_setspecific(sw_j_detach_key, sw_jvm);
  return env;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

void sw_j_throw(JNIEnv* env, sw_error_t* error) {
  jint code = (jint)sw_error_code(error);
  jstring message = (*env)->NewStringUTF(env, sw_error_message(error));
  sw_error_free(error);
  if (!message) return; /* OutOfMemoryError pending */
  jthrowable t = (jthrowable)(*env)->CallStaticObjectMethod(env, sw_j_errors, sw_j_errors_create, code, message);
  (*env)->DeleteLocalRef(env, message);
  if ((*env)->ExceptionCheck(env)) return;
  if (t) (*env)->Throw(env, t);
}

void sw_j_throw_code(JNIEnv* env, sw_error_code_t code, const char* text) {
  sw_j_throw(env, sw_error_create(code, text));
}

int sw_j_failed(JNIEnv* env, sw_error_t* error) {
  if (!error) return 0;
  sw_j_throw(env, error);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------ */

jsize sw_j_longs(JNIEnv* env, jlongArray array, int64_t* out, jsize limit, const char* what) {
  if (!array) return 0;
  jsize n = (*env)->GetArrayLength(env, array);
  if (n > limit) {
    char text[128];
    snprintf(text, sizeof text, "%s has %d entries; at most %d are allowed", what, (int)n, (int)limit);
    sw_j_throw_code(env, SW_ERROR_VALUE, text);
    return -1;
  }
  (*env)->GetLongArrayRegion(env, array, 0, n, (jlong*)out);
  return n;
}

jlongArray sw_j_long_array(JNIEnv* env, const int64_t* values, size_t count) {
  jlongArray a = (*env)->NewLongArray(env, (jsize)count);
  if (a && count) (*env)->SetLongArrayRegion(env, a, 0, (jsize)count, (const jlong*)values);
  return a;
}

jsize sw_j_perm(JNIEnv* env, jlongArray perm, size_t* out) {
  int64_t v[SW_MAX_RANK];
  jsize n = sw_j_longs(env, perm, v, SW_MAX_RANK, "the permutation");
  for (jsize i = 0; i < n; ++i) {
    if (v[i] < 0) {
      char text[96];
      snprintf(text, sizeof text, "permutation entry %lld is negative", (long long)v[i]);
      sw_j_throw_code(env, SW_ERROR_INDEX, text);
      return -1;
    }
    out[i] = (size_t)v[i];
  }
  return n;
}

/* ------------------------------------------------------------------------ */
/* Direct buffers                                                            */
/* ------------------------------------------------------------------------ */

void* sw_j_buffer_range(JNIEnv* env, jobject buffer, jlong byte_offset, jlong bytes) {
  if (!buffer) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "the buffer is null");
    return NULL;
  }
  char* base = (char*)(*env)->GetDirectBufferAddress(env, buffer);
  jlong capacity = (*env)->GetDirectBufferCapacity(env, buffer);
  if (!base || capacity < 0) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "the buffer is not a direct buffer");
    return NULL;
  }
  if (byte_offset < 0 || bytes < 0 || byte_offset > capacity || bytes > capacity - byte_offset) {
    char text[160];
    snprintf(text, sizeof text, "the buffer holds %lld bytes; %lld are needed from byte %lld", (long long)capacity,
             (long long)bytes, (long long)byte_offset);
    sw_j_throw_code(env, SW_ERROR_VALUE, text);
    return NULL;
  }
  return base + byte_offset;
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                   */
/* ------------------------------------------------------------------------ */

char* sw_j_utf8(JNIEnv* env, jbyteArray bytes, const char* what) {
  jsize n = bytes ? (*env)->GetArrayLength(env, bytes) : 0;
  char* s = n > 0 ? (char*)malloc((size_t)n) : NULL;
  if (n > 0 && !s) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  if (s) (*env)->GetByteArrayRegion(env, bytes, 0, n, (jbyte*)s);
  if (!s || s[n - 1] != 0 || memchr(s, 0, (size_t)n - 1)) {
    char text[160];
    snprintf(text, sizeof text, "%s is not one NUL-terminated string", what);
    free(s);
    sw_j_throw_code(env, SW_ERROR_VALUE, text);
    return NULL;
  }
  return s;
}

void sw_j_free_utf8s(char** strings, size_t count) {
  if (!strings) return;
  for (size_t i = 0; i < count; ++i) free(strings[i]);
  free(strings);
}

int sw_j_utf8s(JNIEnv* env, jobjectArray array, char*** out, size_t* out_count, const char* what) {
  jsize n = array ? (*env)->GetArrayLength(env, array) : 0;
  char** strings = (char**)calloc((size_t)n + 1, sizeof(char*));
  *out = NULL;
  *out_count = 0;
  if (!strings) {
    sw_j_throw_code(env, SW_ERROR_OUT_OF_MEMORY, "out of memory");
    return -1;
  }
  for (jsize i = 0; i < n; ++i) {
    jbyteArray item = (jbyteArray)(*env)->GetObjectArrayElement(env, array, i);
    char name[96];
    snprintf(name, sizeof name, "%s[%d]", what, (int)i);
    strings[i] = sw_j_utf8(env, item, name);
    if (item) (*env)->DeleteLocalRef(env, item);
    if (!strings[i]) {
      sw_j_free_utf8s(strings, (size_t)i);
      return -1;
    }
  }
  *out = strings;
  *out_count = (size_t)n;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Copy events                                                               */
/* ------------------------------------------------------------------------ */

int sw_j_event(JNIEnv* env, jlongArray event, sw_copy_event_t* out) {
  jlong v[2] = {0, 0};
  if (!event || (*env)->GetArrayLength(env, event) < 2) {
    sw_j_throw_code(env, SW_ERROR_VALUE, "a copy event is {generation, id}");
    return -1;
  }
  (*env)->GetLongArrayRegion(env, event, 0, 2, v);
  sw_copy_event_init(out);
  out->generation = (uint64_t)v[0];
  out->id = (uint64_t)v[1];
  return 0;
}

jlongArray sw_j_event_array(JNIEnv* env, const sw_copy_event_t* e) {
  int64_t v[2] = {(int64_t)e->generation, (int64_t)e->id};
  return sw_j_long_array(env, v, 2);
}
