/*
 * bench_await: the round-trip latency of an await, measured on a move too
 * small to cost anything (one f32 from a CPU carrier into an empty host
 * carrier), so what is timed is submission, the hand-off to the loop thread,
 * the move there, and the completion's way back to the caller:
 *
 *   wait          sw_move_async, then sw_await_wait(-1).
 *   loop_cb       sw_move_async, sw_await_set_callback(LOOP_THREAD) whose
 *                 callback signals a condition variable the caller waits on.
 *   event_fd      sw_move_async, sw_await_set_callback(WAITING_THREAD), then
 *                 poll() on sw_runtime_event_fd and sw_runtime_process_events,
 *                 which fires the callback on the caller.
 *
 * Each path makes two thread hand-offs: the submission wakes the loop thread,
 * blocked in epoll_wait on its wake-up eventfd (a write to that eventfd), and
 * the completion wakes the caller, through a futex (the await's condition
 * variable, or the benchmark's for loop_cb) or through the event fd. The peer
 * of each path makes the same two hand-offs with the bare primitives and
 * nothing else: a helper thread blocked in epoll_wait on an eventfd is woken
 * by a write, reads it, and replies
 *
 *   peer_cond     through a mutex and condition variable the caller waits
 *                 on (the peer of wait);
 *   peer_cb       the same after loop_cb's protocol (the peer of loop_cb):
 *                 the caller registers its callback with the helper after
 *                 the request; when the helper completed the request first,
 *                 the caller posts the callback to it with a second write,
 *                 as set_callback on a terminal await posts the callback to
 *                 the loop thread. Then both make four hand-offs: the woken
 *                 thread often preempts the caller on its CPU and completes
 *                 before the callback is set;
 *   peer_fd       by writing an eventfd the caller poll()s and reads (the
 *                 peer of event_fd).
 *
 * Each is timed from just before submission to the moment the caller learns
 * of the completion; creating the carriers and releasing the handles lie
 * outside the timed region. The six alternate within each iteration so that
 * noise from other processes hits them alike. Reports the median, the 99th
 * percentile, the minimum and the maximum over the iterations, after a
 * warm-up, and each path's median and p99 over its peer's. Targets: median
 * <= 1.5x the peer's, p99 <= 3x the peer's.
 *
 * Usage:
 *   build/tools/bench/bench_await [--iters 10000] [--warmup 500]
 *
 * The last line is "BENCH_JSON {...}" for scripts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

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
  int cpu; /* where the callback ran: the loop thread's CPU */
} signal_t;

/* Iterations in which the thread that woke the caller ran on the caller's
 * CPU: the loop thread (loop_cb) and the peer's helper (peer_cond). On a
 * two-core virtual machine a wake-up of an idle vCPU costs far more than a
 * switch on the same one, so a path and its peer compare fairly only when the
 * scheduler placed their threads alike; both are printed. */
static int same_cpu_loop, same_cpu_helper;

static void on_loop_thread(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  (void)await;
  if (code != SW_OK) {
    fprintf(stderr, "bench_await: the move failed: %s\n", message);
    exit(2);
  }
  signal_t* s = (signal_t*)user_data;
  pthread_mutex_lock(&s->mutex);
  s->fired = 1;
  s->cpu = sched_getcpu();
  pthread_mutex_unlock(&s->mutex);
  pthread_cond_signal(&s->cond); /* as peer_cond: the woken caller finds the mutex free */
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
  const int loop_cpu = s->cpu;
  pthread_mutex_unlock(&s->mutex);
  const int64_t t1 = now_ns();
  same_cpu_loop += loop_cpu == sched_getcpu();
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

/* ---- the peers: the same two hand-offs, bare ------------------------------------ */

enum { REPLY_COND, REPLY_CB, REPLY_FD };

typedef struct peer_t {
  int request_fd; /* eventfd: caller -> helper, which waits in epoll_wait as the loop thread does */
  int reply_fd;   /* eventfd: helper -> caller (peer_fd) */
  int epoll_fd;
  atomic_int reply; /* REPLY_COND, REPLY_CB or REPLY_FD, set before each request */
  atomic_int stop;
  pthread_mutex_t mutex; /* peer_cond's reply */
  pthread_cond_t cond;
  uint64_t replies;
  int cpu;                                     /* where the helper replied */
  int cb_done, cb_registered, cb_posted, late; /* peer_cb's callback protocol */
} peer_t;

static void write_one(int fd) {
  const uint64_t one = 1;
  if (write(fd, &one, sizeof one) != (ssize_t)sizeof one) {
    fprintf(stderr, "bench_await: eventfd write failed: %s\n", strerror(errno));
    exit(2);
  }
}

static void drain(int fd) {
  uint64_t value;
  if (read(fd, &value, sizeof value) < 0 && errno != EAGAIN) {
    fprintf(stderr, "bench_await: eventfd read failed: %s\n", strerror(errno));
    exit(2);
  }
}

static void* helper(void* arg) {
  peer_t* p = (peer_t*)arg;
  for (;;) {
    struct epoll_event ev;
    const int n = epoll_wait(p->epoll_fd, &ev, 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) {
      fprintf(stderr, "bench_await: the peer's epoll_wait failed: %s\n", strerror(errno));
      exit(2);
    }
    drain(p->request_fd);
    if (atomic_load(&p->stop)) break;
    if (atomic_load(&p->reply) == REPLY_FD) {
      write_one(p->reply_fd);
    } else if (atomic_load(&p->reply) == REPLY_CB) {
      /* A completion runs the callback if it was registered in time; a
       * callback registered later is posted here and runs now. */
      pthread_mutex_lock(&p->mutex);
      int reply;
      if (p->cb_posted) {
        p->cb_posted = 0;
        reply = 1;
      } else {
        p->cb_done = 1;
        reply = p->cb_registered;
      }
      if (reply) ++p->replies;
      pthread_mutex_unlock(&p->mutex);
      if (reply) pthread_cond_signal(&p->cond);
    } else {
      /* Signalled after the unlock, as the await does: the woken caller finds the mutex free. */
      pthread_mutex_lock(&p->mutex);
      ++p->replies;
      p->cpu = sched_getcpu();
      pthread_mutex_unlock(&p->mutex);
      pthread_cond_signal(&p->cond);
    }
  }
  return NULL;
}

static void peer_init(peer_t* p) {
  memset(p, 0, sizeof *p);
  p->request_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  p->reply_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  p->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data = {.fd = p->request_fd}};
  if (p->request_fd < 0 || p->reply_fd < 0 || p->epoll_fd < 0 ||
      epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, p->request_fd, &ev) != 0) {
    fprintf(stderr, "bench_await: cannot set up the peer's eventfds: %s\n", strerror(errno));
    exit(2);
  }
  atomic_init(&p->reply, REPLY_COND);
  atomic_init(&p->stop, 0);
  pthread_mutex_init(&p->mutex, NULL);
  pthread_cond_init(&p->cond, NULL);
}

static void peer_destroy(peer_t* p) {
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->mutex);
  close(p->epoll_fd);
  close(p->reply_fd);
  close(p->request_fd);
}

static int64_t time_peer_cond(peer_t* p) {
  atomic_store(&p->reply, REPLY_COND);
  pthread_mutex_lock(&p->mutex);
  const uint64_t want = p->replies + 1;
  pthread_mutex_unlock(&p->mutex);
  const int64_t t0 = now_ns();
  write_one(p->request_fd);
  pthread_mutex_lock(&p->mutex);
  while (p->replies != want) pthread_cond_wait(&p->cond, &p->mutex);
  const int helper_cpu = p->cpu;
  pthread_mutex_unlock(&p->mutex);
  const int64_t t1 = now_ns();
  same_cpu_helper += helper_cpu == sched_getcpu();
  return t1 - t0;
}

/* loop_cb's protocol with the bare primitives: the request, then a callback
 * registered with the helper, which runs it on completion, or, when the
 * completion came first, a second request that runs it (the await's
 * set_callback on a terminal await posts the callback to the loop thread). */
static int64_t time_peer_cb(peer_t* p) {
  atomic_store(&p->reply, REPLY_CB);
  pthread_mutex_lock(&p->mutex);
  const uint64_t want = p->replies + 1;
  p->cb_done = p->cb_registered = p->cb_posted = 0;
  pthread_mutex_unlock(&p->mutex);
  const int64_t t0 = now_ns();
  write_one(p->request_fd);
  pthread_mutex_lock(&p->mutex);
  const int late = p->cb_done;
  if (late)
    p->cb_posted = 1;
  else
    p->cb_registered = 1;
  pthread_mutex_unlock(&p->mutex);
  if (late) write_one(p->request_fd);
  pthread_mutex_lock(&p->mutex);
  while (p->replies != want) pthread_cond_wait(&p->cond, &p->mutex);
  pthread_mutex_unlock(&p->mutex);
  const int64_t t1 = now_ns();
  p->late += late;
  return t1 - t0;
}

static int64_t time_peer_fd(peer_t* p) {
  atomic_store(&p->reply, REPLY_FD);
  const int64_t t0 = now_ns();
  write_one(p->request_fd);
  struct pollfd q = {p->reply_fd, POLLIN, 0};
  if (poll(&q, 1, 10000) != 1) {
    fprintf(stderr, "bench_await: the peer's reply fd stayed quiet for 10 s\n");
    exit(2);
  }
  drain(p->reply_fd);
  return now_ns() - t0;
}

/* ---- main ------------------------------------------------------------------- */

enum { PATH_WAIT, PATH_LOOP_CB, PATH_EVENT_FD, PATH_PEER_COND, PATH_PEER_CB, PATH_PEER_FD, PATH_COUNT };
static const char* const kPathNames[PATH_COUNT] = {"wait", "loop_cb", "event_fd", "peer_cond", "peer_cb", "peer_fd"};
/* Each path's peer: the same hand-offs with the bare primitives (-1: a peer itself). */
static const int kPeerOf[PATH_COUNT] = {PATH_PEER_COND, PATH_PEER_CB, PATH_PEER_FD, -1, -1, -1};
static const int kHandOffs = 2;
static const double kTargetMedian = 1.5, kTargetP99 = 3.0;

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
  peer_t peer;
  peer_init(&peer);
  pthread_t helper_thread;
  if (pthread_create(&helper_thread, NULL, helper, &peer) != 0) {
    fprintf(stderr, "bench_await: cannot start the peer thread\n");
    return 2;
  }

  int64_t* samples[PATH_COUNT];
  for (int p = 0; p < PATH_COUNT; ++p) samples[p] = (int64_t*)malloc(sizeof(int64_t) * (size_t)iters);
  const double load_before = load_average();
  for (int i = -warmup; i < iters; ++i) {
    int64_t t[PATH_COUNT];
    if (i == 0) same_cpu_loop = same_cpu_helper = peer.late = 0; /* counted after the warm-up */
    t[PATH_WAIT] = time_wait(rt);
    t[PATH_PEER_COND] = time_peer_cond(&peer);
    t[PATH_LOOP_CB] = time_loop_callback(rt, &sig);
    t[PATH_PEER_CB] = time_peer_cb(&peer);
    t[PATH_EVENT_FD] = time_event_fd(rt, fd);
    t[PATH_PEER_FD] = time_peer_fd(&peer);
    if (i >= 0)
      for (int p = 0; p < PATH_COUNT; ++p) samples[p][i] = t[p];
  }
  const double load_after = load_average();

  atomic_store(&peer.stop, 1);
  write_one(peer.request_fd);
  pthread_join(helper_thread, NULL);

  stats_t st[PATH_COUNT];
  for (int p = 0; p < PATH_COUNT; ++p) st[p] = summarize(samples[p], iters);
  double ratio[PATH_COUNT], ratio_p99[PATH_COUNT], ratio_min[PATH_COUNT];
  for (int p = 0; p < PATH_COUNT; ++p) {
    const int q = kPeerOf[p] < 0 ? p : kPeerOf[p];
    ratio[p] = st[p].median_us / st[q].median_us;
    ratio_p99[p] = st[p].p99_us / st[q].p99_us;
    ratio_min[p] = st[p].min_us / st[q].min_us;
  }

  printf("bench_await: %d iterations after %d warm-up, load average %.2f -> %.2f\n", iters, warmup, load_before,
         load_after);
  printf("%-10s %12s %12s %12s %12s %10s %14s %12s\n", "path", "median_us", "p99_us", "min_us", "max_us", "peer",
         "median/peer", "p99/peer");
  for (int p = 0; p < PATH_COUNT; ++p)
    printf("%-10s %12.2f %12.2f %12.2f %12.2f %10s %14.2f %12.2f\n", kPathNames[p], st[p].median_us, st[p].p99_us,
           st[p].min_us, st[p].max_us, kPeerOf[p] < 0 ? "-" : kPathNames[kPeerOf[p]], ratio[p], ratio_p99[p]);
  const double late = 100.0 * peer.late / iters;
  printf(
      "\n%d thread hand-offs on every path (loop_cb and peer_cb: %d when the completion comes before the callback "
      "is set, in %.0f%% of peer_cb's iterations)\ntargets median/peer <= %.1f, p99/peer <= %.1f:",
      kHandOffs, 2 * kHandOffs, late, kTargetMedian, kTargetP99);
  for (int p = 0; p < PATH_COUNT; ++p)
    if (kPeerOf[p] >= 0)
      printf(" %s %s", kPathNames[p], ratio[p] <= kTargetMedian && ratio_p99[p] <= kTargetP99 ? "ok" : "MISS");
  printf("\n");
  const double loop_same = 100.0 * same_cpu_loop / iters, helper_same = 100.0 * same_cpu_helper / iters;
  printf("woken on the waker's CPU: loop_cb %.0f%% of iterations, peer_cond %.0f%%%s\n", loop_same, helper_same,
         loop_same < 50 && helper_same >= 50   ? " (the loop thread runs on another CPU: its wake-ups cost more)"
         : loop_same >= 50 && helper_same < 50 ? " (the peer's helper runs on another CPU: its wake-ups cost more)"
                                               : "");
  printf(
      "\nBENCH_JSON {\"iters\": %d, \"warmup\": %d, \"load\": [%.2f, %.2f], \"hand_offs\": %d, "
      "\"target_ratio_peer\": %.2f, \"target_ratio_p99_peer\": %.2f, \"same_cpu_pct\": {\"loop_cb\": %.1f, "
      "\"peer_cond\": %.1f}, \"peer_cb_late_pct\": %.1f, \"paths\": [",
      iters, warmup, load_before, load_after, kHandOffs, kTargetMedian, kTargetP99, loop_same, helper_same, late);
  for (int p = 0; p < PATH_COUNT; ++p)
    printf(
        "%s{\"path\": \"%s\", \"peer\": %s%s%s, \"median_us\": %.3f, \"p99_us\": %.3f, \"min_us\": %.3f, "
        "\"max_us\": %.3f, \"ratio_peer\": %.3f, \"ratio_p99_peer\": %.3f, \"ratio_min_peer\": %.3f}",
        p ? ", " : "", kPathNames[p], kPeerOf[p] < 0 ? "" : "\"", kPeerOf[p] < 0 ? "null" : kPathNames[kPeerOf[p]],
        kPeerOf[p] < 0 ? "" : "\"", st[p].median_us, st[p].p99_us, st[p].min_us, st[p].max_us, ratio[p], ratio_p99[p],
        ratio_min[p]);
  printf("]}\n");

  for (int p = 0; p < PATH_COUNT; ++p) free(samples[p]);
  peer_destroy(&peer);
  pthread_cond_destroy(&sig.cond);
  pthread_mutex_destroy(&sig.mutex);
  sw_runtime_release(rt);
  return 0;
}
