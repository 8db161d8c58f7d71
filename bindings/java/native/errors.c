/* The native methods of Errors and PolicyBridge: a new library error for a
 * Java upcall to hand back. */

#include "module.h"

/* A new sw_error_t* (as a long) for a Java upcall to hand the library. */
jlong error_create(jint code, const char* message) {
  return (jlong)(intptr_t)sw_error_create((sw_error_code_t)code, message ? message : "");
}
