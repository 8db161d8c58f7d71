/* The native methods of AwaitResult: waiting, and the loop-thread completion
 * callback that completes a Java future through AwaitBridge. */

#include <stdlib.h>

#include "module.h"

/* Loop-thread completion callback: hands (code, message, result tensor) to
 * AwaitBridge.complete, which completes the Java future off the loop
 * thread, and drops the global reference to it. */
static void sw_j_await_fn(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  JNIEnv* env = sw_j_env();
  if (!env) return;
  sw_tensor_t* result = NULL;
  if (code == SW_OK) {
    sw_error_t* e = sw_await_result(await, &result);
    if (e) sw_error_free(e);
  }
  jstring text = (*env)->NewStringUTF(env, message ? message : "");
  if (!text) (*env)->ExceptionClear(env);
  (*env)->CallStaticVoidMethod(env, sw_j_await, sw_j_await_complete, (jobject)user_data, (jint)code, text,
                               (jlong)(intptr_t)result);
  if ((*env)->ExceptionCheck(env)) {
    (*env)->ExceptionClear(env);
    sw_tensor_release(result);
  }
  if (text) (*env)->DeleteLocalRef(env, text);
  (*env)->DeleteGlobalRef(env, (jobject)user_data);
}

/* Installs the loop-thread callback that completes `target` (an object
 * AwaitBridge.complete knows). */
void await_set_callback(JNIEnv* env, jlong await, jobject target) {
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
  info.callback = sw_j_await_fn;
  info.user_data = (*env)->NewGlobalRef(env, target);
  if (!info.user_data) return;
  sw_error_t* e = sw_await_set_callback((sw_await_t*)(intptr_t)await, &info);
  if (e) {
    (*env)->DeleteGlobalRef(env, (jobject)info.user_data);
    sw_j_throw(env, e);
  }
}

/* sw_await_wait: true when terminal (success), false when the time ran out;
 * throws the await's error if it failed. */
jboolean await_wait(JNIEnv* env, jlong await, jlong timeout_ns) {
  sw_error_t* e = sw_await_wait((sw_await_t*)(intptr_t)await, timeout_ns);
  if (e && sw_error_code(e) == SW_ERROR_TIMEOUT) {
    sw_error_free(e);
    return JNI_FALSE;
  }
  return sw_j_failed(env, e) ? JNI_FALSE : JNI_TRUE;
}
