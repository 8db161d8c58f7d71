/* Helpers shared by the asynchronous suites (await, move): value patterns,
 * carrier probes, clocks and a thread-safe completion-callback recorder. */
#ifndef SW_ASYNC_TEST_H_
#define SW_ASYNC_TEST_H_

#include <pthread.h>
#include <time.h>

#include "sw_test.h"

/* The value pattern of element i of source `seed`: an f32-exact integer. */
static inline float sw_async_pattern(uint32_t seed, size_t i) {
  return (float)(((uint64_t)i * 2654435761u + seed) % 16777216u) - 8388608.0f;
}

/* A dense 1-D f32 CPU tensor of `n` elements filled with the pattern. The
 * values are written through the host pointer, so the carrier stays at
 * version 0. */
static inline sw_tensor_t* sw_async_source(sw_runtime_t* rt, size_t n, uint32_t seed) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, n, &c));
  if (n) {
    void* p = NULL;
    SW_OK_(sw_carrier_host_pointer(c, &p));
    float* f = (float*)p;
    for (size_t i = 0; i < n; ++i) f[i] = sw_async_pattern(seed, i);
  }
  const int64_t extent = (int64_t)n;
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

/* Whether the first `n` slots of `c` hold the pattern of `seed`. */
static inline bool sw_async_carrier_holds(const sw_carrier_t* c, size_t n, uint32_t seed) {
  float* f = (float*)malloc(sizeof(float) * (n ? n : 1));
  SW_OK_(sw_carrier_read(c, 0, n, f));
  bool same = true;
  for (size_t i = 0; i < n && same; ++i) same = f[i] == sw_async_pattern(seed, i);
  free(f);
  return same;
}

/* Whether the dense f32 tensor `t` holds the pattern of `seed`. */
static inline bool sw_async_tensor_holds(const sw_tensor_t* t, size_t n, uint32_t seed) {
  int64_t numel = -1;
  SW_OK_(sw_tensor_numel(t, &numel));
  if ((size_t)numel != n) return false;
  float* f = (float*)malloc(sizeof(float) * (n ? n : 1));
  SW_OK_(sw_tensor_read(t, f, sizeof(float) * n));
  bool same = true;
  for (size_t i = 0; i < n && same; ++i) same = f[i] == sw_async_pattern(seed, i);
  free(f);
  return same;
}

static inline sw_carrier_t* sw_async_carrier_of(const sw_tensor_t* t) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(t, &c));
  return c;
}

static inline size_t sw_async_size(const sw_carrier_t* c) {
  size_t s = (size_t)-1;
  SW_OK_(sw_carrier_size(c, &s));
  return s;
}

static inline uint64_t sw_async_version(const sw_carrier_t* c) {
  uint64_t v = UINT64_MAX;
  SW_OK_(sw_carrier_version(c, &v));
  return v;
}

static inline bool sw_async_owned(const sw_carrier_t* c) {
  bool o = false;
  SW_OK_(sw_carrier_is_owned(c, &o));
  return o;
}

static inline bool sw_async_disposed(const sw_carrier_t* c) {
  bool d = false;
  SW_OK_(sw_carrier_is_disposed(c, &d));
  return d;
}

static inline sw_await_status_t sw_async_status(const sw_await_t* a) {
  sw_await_status_t s = SW_AWAIT_STATUS_FORCE32;
  SW_OK_(sw_await_query(a, &s));
  return s;
}

static inline sw_runtime_t* sw_async_runtime(void) {
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  return rt;
}

static inline int64_t sw_async_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sw_async_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Polls until the await is terminal (without waiting on it, so no
 * waiting-thread callback fires); fails the test after 60 s. */
static inline sw_await_status_t sw_async_poll_terminal(const sw_await_t* a) {
  const int64_t give_up = sw_async_now_ns() + 60 * (int64_t)1000000000;
  sw_await_status_t s;
  while ((s = sw_async_status(a)) == SW_AWAIT_PENDING) {
    if (sw_async_now_ns() > give_up) fail_msg("the await stayed pending for 60 s");
    sw_async_sleep_ms(1);
  }
  return s;
}

/* Records completion callbacks: how many fired, on which thread, with what. */
typedef struct sw_async_recorder_t {
  pthread_mutex_t mutex;
  pthread_cond_t fired_cond;
  int fired;
  pthread_t thread;
  sw_await_t* await;
  sw_error_code_t code;
  char message[512];
} sw_async_recorder_t;

static inline void sw_async_recorder_init(sw_async_recorder_t* r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mutex, NULL);
  pthread_cond_init(&r->fired_cond, NULL);
  r->code = SW_ERROR_CODE_FORCE32;
}

static inline void sw_async_recorder_destroy(sw_async_recorder_t* r) {
  pthread_cond_destroy(&r->fired_cond);
  pthread_mutex_destroy(&r->mutex);
}

static inline void sw_async_record(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  sw_async_recorder_t* r = (sw_async_recorder_t*)user_data;
  pthread_mutex_lock(&r->mutex);
  r->fired += 1;
  r->thread = pthread_self();
  r->await = await;
  r->code = code;
  snprintf(r->message, sizeof r->message, "%s", message ? message : "(null)");
  pthread_cond_broadcast(&r->fired_cond);
  pthread_mutex_unlock(&r->mutex);
}

static inline int sw_async_fired(sw_async_recorder_t* r) {
  pthread_mutex_lock(&r->mutex);
  const int n = r->fired;
  pthread_mutex_unlock(&r->mutex);
  return n;
}

/* Blocks until the recorder saw a callback; fails the test after 60 s. */
static inline void sw_async_await_fired(sw_async_recorder_t* r) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  pthread_mutex_lock(&r->mutex);
  int rc = 0;
  while (r->fired == 0 && rc == 0) rc = pthread_cond_timedwait(&r->fired_cond, &r->mutex, &deadline);
  const int fired = r->fired;
  pthread_mutex_unlock(&r->mutex);
  if (fired == 0) fail_msg("the completion callback did not fire within 60 s");
}

static inline void sw_async_set_callback(sw_await_t* a, sw_callback_mode_t mode, sw_async_recorder_t* r) {
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.mode = mode;
  info.callback = sw_async_record;
  info.user_data = r;
  SW_OK_(sw_await_set_callback(a, &info));
}

#endif /* SW_ASYNC_TEST_H_ */
