/*
 * bench_await: the round-trip latency of an await, measured on a move too
 * small to cost anything (one f32 from a CPU carrier into an empty host
 * carrier), so what is timed is submission, the hop to the loop thread and a
 * worker, and the completion's way back to the caller:
 *
 *   wait          sw_move_async, then sw_await_wait(-1).
 *   loop_cb       sw_move_async, sw_await_set_callback(LOOP_THREAD) whose
 *                 callback signals a condition variable the caller waits on.
 *   event_fd      sw_move_async, sw_await_set_callback(WAITING_THREAD), then
 *                 poll() on sw_runtime_event_fd and sw_runtime_process_events,
 *                 which fires the callback on the caller.
 *   peer          a request handed to a helper thread and its reply, both
 *                 through a mutex and condition variables: the cost of one
 *                 cross-thread round trip, the floor for any of the above
 *                 (a move crosses threads twice each way: caller -> loop ->
 *                 worker -> loop -> caller).
 *
 * Each is timed from just before submission to the moment the caller learns
 * of the completion; creating the carriers and releasing the handles lie
 * outside the timed region. The four paths alternate within each iteration so
 * that noise from other processes hits them alike. Reports the median and the
 * 99th percentile over the iterations, after a warm-up.
 *
 * Usage:
 *   build/tools/bench/bench_await [--iters 10000] [--warmup 500]
 *
 * The last line is "BENCH_JSON {...}" for scripts.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_await"
#include "bench_util.h"

static int compare_i64(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* ---- the move being awaited ----------------------------------------------- */

typedef struct tiny_move_t {
  sw_tensor_t* source;
  sw_carrier_t* destination;
  sw_await_t* await;
} tiny_move_t;

static tiny_move_t prepare(sw_runtime_t* rt) {
  tiny_move_t m = {NULL, NULL, NULL};
  const int64_t one = 1;
  const float value = 42.0f;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, &one, 1, &value, &m.source));
  CHECK(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &m.destination));
  return m;
}

static void finish(tiny_move_t* m) {
  float got = 0;
  CHECK(sw_carrier_read(m->destination, 0, 1, &got));
  if (got != 42.0f) {
    fprintf(stderr, "bench_await: the move delivered %g, not 42\n", (double)got);
    exit(2);
  }
  sw_await_release(m->await);
  sw_carrier_release(m->destination);
  sw_tensor_release(m->source);
}

/* ---- completion signals ----------------------------------------------------- */

typedef struct signal_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int fired;
} signal_t;

static void on_loop_thread(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  (void)await;
  if (code != SW_OK) {
    fprintf(stderr, "bench_await: the move failed: %s\n", message);
    exit(2);
  }
  signal_t* s = (signal_t*)user_data;
  pthread_mutex_lock(&s->mutex);
  s->fired = 1;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->mutex);
}

static void on_waiting_thread(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  (void)await;
  if (code != SW_OK) {
    fprintf(stderr, "bench_await: the move failed: %s\n", message);
    exit(2);
  }
  *(int*)user_data = 1;
}

/* ---- the three paths -------------------------------------------------------- */

static int64_t time_wait(sw_runtime_t* rt) {
  tiny_move_t m = prepare(rt);
  const int64_t t0 = now_ns();
  CHECK(sw_move_async(m.source, m.destination, &m.await));
  CHECK(sw_await_wait(m.await, -1));
  const int64_t t1 = now_ns();
  finish(&m);
  return t1 - t0;
}

static int64_t time_loop_callback(sw_runtime_t* rt, signal_t* s) {
  tiny_move_t m = prepare(rt);
  s->fired = 0;
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
  info.callback = on_loop_thread;
  info.user_data = s;
  const int64_t t0 = now_ns();
  CHECK(sw_move_async(m.source, m.destination, &m.await));
  CHECK(sw_await_set_callback(m.await, &info));
  pthread_mutex_lock(&s->mutex);
  while (!s->fired) pthread_cond_wait(&s->cond, &s->mutex);
  pthread_mutex_unlock(&s->mutex);
  const int64_t t1 = now_ns();
  finish(&m);
  return t1 - t0;
}

static int64_t time_event_fd(sw_runtime_t* rt, int fd) {
  tiny_move_t m = prepare(rt);
  int fired = 0;
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.callback = on_waiting_thread;
  info.user_data = &fired;
  /* Every completion signals the fd, the other paths' too: start drained. */
  CHECK(sw_runtime_process_events(rt, NULL));
  const int64_t t0 = now_ns();
  CHECK(sw_move_async(m.source, m.destination, &m.await));
  CHECK(sw_await_set_callback(m.await, &info));
  while (!fired) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) {
      fprintf(stderr, "bench_await: the event fd stayed quiet for 10 s\n");
      exit(2);
    }
    CHECK(sw_runtime_process_events(rt, NULL));
  }
  const int64_t t1 = now_ns();
  finish(&m);
  return t1 - t0;
}

/* ---- the peer: one cross-thread round trip ------------------------------------ */

typedef struct ping_t {
  pthread_mutex_t mutex;
  pthread_cond_t request_cond, reply_cond;
  uint64_t requests, replies;
  int stop;
} ping_t;

static void* pong(void* arg) {
  ping_t* p = (ping_t*)arg;
  pthread_mutex_lock(&p->mutex);
  for (;;) {
    while (p->replies == p->requests && !p->stop) pthread_cond_wait(&p->request_cond, &p->mutex);
    if (p->stop) break;
    p->replies = p->requests;
    pthread_cond_signal(&p->reply_cond);
  }
  pthread_mutex_unlock(&p->mutex);
  return NULL;
}

static int64_t time_peer(ping_t* p) {
  const int64_t t0 = now_ns();
  pthread_mutex_lock(&p->mutex);
  const uint64_t want = ++p->requests;
  pthread_cond_signal(&p->request_cond);
  while (p->replies != want) pthread_cond_wait(&p->reply_cond, &p->mutex);
  pthread_mutex_unlock(&p->mutex);
  return now_ns() - t0;
}

/* ---- main ------------------------------------------------------------------- */

enum { PATH_WAIT, PATH_LOOP_CB, PATH_EVENT_FD, PATH_PEER, PATH_COUNT };
static const char* const kPathNames[PATH_COUNT] = {"wait", "loop_cb", "event_fd", "peer"};

typedef struct stats_t {
  double median_us, p99_us, min_us, max_us;
} stats_t;

static stats_t summarize(int64_t* ns, int n) {
  qsort(ns, (size_t)n, sizeof ns[0], compare_i64);
  int p99 = (int)((double)n * 0.99);
  if (p99 >= n) p99 = n - 1;
  const double median = n % 2 ? (double)ns[n / 2] : 0.5 * ((double)ns[n / 2 - 1] + (double)ns[n / 2]);
  stats_t s = {median / 1e3, (double)ns[p99] / 1e3, (double)ns[0] / 1e3, (double)ns[n - 1] / 1e3};
  return s;
}

int main(int argc, char** argv) {
  int iters = 10000, warmup = 500;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
      warmup = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--iters N] [--warmup W]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 1 || warmup < 0) {
    fprintf(stderr, "bench_await: need --iters >= 1 and --warmup >= 0\n");
    return 2;
  }

  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  int fd = -1;
  CHECK(sw_runtime_event_fd(rt, &fd));
  signal_t sig;
  pthread_mutex_init(&sig.mutex, NULL);
  pthread_cond_init(&sig.cond, NULL);
  sig.fired = 0;
  ping_t ping;
  memset(&ping, 0, sizeof ping);
  pthread_mutex_init(&ping.mutex, NULL);
  pthread_cond_init(&ping.request_cond, NULL);
  pthread_cond_init(&ping.reply_cond, NULL);
  pthread_t pong_thread;
  if (pthread_create(&pong_thread, NULL, pong, &ping) != 0) {
    fprintf(stderr, "bench_await: cannot start the peer thread\n");
    return 2;
  }

  int64_t* samples[PATH_COUNT];
  for (int p = 0; p < PATH_COUNT; ++p) samples[p] = (int64_t*)malloc(sizeof(int64_t) * (size_t)iters);
  const double load_before = load_average();
  for (int i = -warmup; i < iters; ++i) {
    int64_t t[PATH_COUNT];
    t[PATH_WAIT] = time_wait(rt);
    t[PATH_LOOP_CB] = time_loop_callback(rt, &sig);
    t[PATH_EVENT_FD] = time_event_fd(rt, fd);
    t[PATH_PEER] = time_peer(&ping);
    if (i >= 0)
      for (int p = 0; p < PATH_COUNT; ++p) samples[p][i] = t[p];
  }
  const double load_after = load_average();

  pthread_mutex_lock(&ping.mutex);
  ping.stop = 1;
  pthread_cond_signal(&ping.request_cond);
  pthread_mutex_unlock(&ping.mutex);
  pthread_join(pong_thread, NULL);

  stats_t st[PATH_COUNT];
  for (int p = 0; p < PATH_COUNT; ++p) st[p] = summarize(samples[p], iters);

  printf("bench_await: %d iterations after %d warm-up, load average %.2f -> %.2f\n", iters, warmup, load_before,
         load_after);
  printf("%-10s %12s %12s %12s %12s %14s\n", "path", "median_us", "p99_us", "min_us", "max_us", "median/peer");
  for (int p = 0; p < PATH_COUNT; ++p)
    printf("%-10s %12.2f %12.2f %12.2f %12.2f %14.2f\n", kPathNames[p], st[p].median_us, st[p].p99_us, st[p].min_us,
           st[p].max_us, st[p].median_us / st[PATH_PEER].median_us);
  printf("\nBENCH_JSON {\"iters\": %d, \"warmup\": %d, \"load\": [%.2f, %.2f], \"paths\": [", iters, warmup,
         load_before, load_after);
  for (int p = 0; p < PATH_COUNT; ++p)
    printf("%s{\"path\": \"%s\", \"median_us\": %.3f, \"p99_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, "
           "\"ratio_peer\": %.3f}",
           p ? ", " : "", kPathNames[p], st[p].median_us, st[p].p99_us, st[p].min_us, st[p].max_us,
           st[p].median_us / st[PATH_PEER].median_us);
  printf("]}\n");

  for (int p = 0; p < PATH_COUNT; ++p) free(samples[p]);
  pthread_cond_destroy(&ping.reply_cond);
  pthread_cond_destroy(&ping.request_cond);
  pthread_mutex_destroy(&ping.mutex);
  pthread_cond_destroy(&sig.cond);
  pthread_mutex_destroy(&sig.mutex);
  sw_runtime_release(rt);
  return 0;
}
