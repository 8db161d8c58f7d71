/* Await handles through the public ABI: query and wait (timeouts, repeated
 * waits, many waiters), completion callbacks in both modes, the event fd,
 * shutdown with work in flight and release in any order. Moves into empty
 * host carriers are the work being awaited. */
#include <poll.h>

#include "sw_async_test.h"

#define SMALL ((size_t)1000)
#define MEDIUM ((size_t)16 << 20) /* 64 MiB of f32: some milliseconds of copying */
#define BIG ((size_t)64 << 20)    /* 256 MiB of f32 */

/* A move of a fresh `n`-element pattern source into a fresh empty host
 * carrier. The caller owns the three handles. */
typedef struct pending_move_t {
  sw_tensor_t* source;
  sw_carrier_t* source_carrier;
  sw_carrier_t* destination;
  sw_await_t* await;
  size_t n;
  uint32_t seed;
} pending_move_t;

/* With `failing_allocation`, the destination's allocation inside the move
 * is armed to fail (creating the carriers counts as allocations too, so the
 * fault is armed after them). */
static pending_move_t start_move_with(sw_runtime_t* rt, size_t n, uint32_t seed, bool failing_allocation) {
  pending_move_t m = {NULL, NULL, NULL, NULL, n, seed};
  m.source = sw_async_source(rt, n, seed);
  m.source_carrier = sw_async_carrier_of(m.source);
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &m.destination));
  if (failing_allocation) SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  SW_OK_(sw_move_async(m.source, m.destination, &m.await));
  assert_non_null(m.await);
  return m;
}

static pending_move_t start_move(sw_runtime_t* rt, size_t n, uint32_t seed) { return start_move_with(rt, n, seed, false); }

static void end_move(pending_move_t* m) {
  sw_await_release(m->await);
  sw_carrier_release(m->destination);
  sw_carrier_release(m->source_carrier);
  sw_tensor_release(m->source);
}

/* Asserts that a succeeded move left the pattern at slot 0 of the destination
 * and disposed the source. */
static void expect_moved(const pending_move_t* m) {
  assert_int_equal(sw_async_size(m->destination), m->n);
  assert_true(sw_async_carrier_holds(m->destination, m->n, m->seed));
  assert_int_equal(sw_async_version(m->destination), 1);
  assert_true(sw_async_disposed(m->source_carrier));
  assert_false(sw_async_owned(m->source_carrier));
  assert_false(sw_async_owned(m->destination));
}

/* Asserts that a failed move left both carriers as they were: the source
 * holds its pattern at version 0, the destination is still empty. */
static void expect_untouched(const pending_move_t* m) {
  assert_false(sw_async_disposed(m->source_carrier));
  assert_false(sw_async_owned(m->source_carrier));
  assert_int_equal(sw_async_version(m->source_carrier), 0);
  assert_true(sw_async_carrier_holds(m->source_carrier, m->n, m->seed));
  assert_false(sw_async_disposed(m->destination));
  assert_false(sw_async_owned(m->destination));
  assert_int_equal(sw_async_size(m->destination), 0);
  assert_int_equal(sw_async_version(m->destination), 0);
}

/* ---- query and wait ------------------------------------------------------ */

static void wait_on_succeeded_await(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  pending_move_t m = start_move(rt, SMALL, 11);
  sw_await_kind_t kind = SW_AWAIT_KIND_FORCE32;
  SW_OK_(sw_await_kind(m.await, &kind));
  assert_int_equal(kind, SW_AWAIT_MOVE);
  SW_OK_(sw_await_wait(m.await, -1));
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
  /* Every later wait, with any timeout, observes the same success. */
  SW_OK_(sw_await_wait(m.await, -1));
  SW_OK_(sw_await_wait(m.await, 0));
  SW_OK_(sw_await_wait(m.await, 1000000));
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
  expect_moved(&m);

  /* The result is the same tensor every call: same handle, same carrier,
   * and a value written through one is read through the other. */
  sw_tensor_t *r1 = NULL, *r2 = NULL;
  SW_OK_(sw_await_result(m.await, &r1));
  SW_OK_(sw_await_result(m.await, &r2));
  assert_non_null(r1);
  assert_ptr_equal(r1, r2);
  sw_carrier_t* c1 = sw_async_carrier_of(r1);
  assert_ptr_equal(c1, m.destination);
  int64_t offset = -1;
  SW_OK_(sw_tensor_offset(r1, &offset));
  assert_int_equal(offset, 0);
  int64_t shape[1] = {-1};
  SW_OK_(sw_tensor_shape(r1, shape, 1));
  assert_int_equal(shape[0], (int64_t)SMALL);
  assert_true(sw_async_tensor_holds(r2, SMALL, 11));
  const int64_t at[1] = {7};
  SW_OK_(sw_tensor_set(r1, at, 1, 1234.5));
  double v = 0;
  SW_OK_(sw_tensor_get(r2, at, 1, &v));
  assert_true(v == 1234.5);
  sw_carrier_release(c1);
  sw_tensor_release(r2);
  sw_tensor_release(r1);
  end_move(&m);
}

static void wait_times_out_while_pending(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  /* A testing hold keeps the move's write pending until released. */
  SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
  pending_move_t m = start_move(rt, SMALL, 21);
  SW_OK_(sw_testing_wait_held(rt, (int64_t)60 * 1000000000));
  sw_error_t* e = sw_await_wait(m.await, 0);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_TIMEOUT);
  sw_error_free(e);
  /* A timed-out wait changes nothing: still pending, result refused. */
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_PENDING);
  sw_tensor_t* r = (sw_tensor_t*)(uintptr_t)0x1;
  SW_FAILS(sw_await_result(m.await, &r), SW_ERROR_STATE, NULL);
  assert_ptr_equal(r, (sw_tensor_t*)(uintptr_t)0x1);
  /* A short timeout times out too, naming the pending work. */
  SW_FAILS(sw_await_wait(m.await, 1000000), SW_ERROR_TIMEOUT, "pending");
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_PENDING);
  SW_OK_(sw_testing_release_hold(rt));
  SW_OK_(sw_await_wait(m.await, -1));
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
  expect_moved(&m);
  end_move(&m);
}

static void failed_await_reports_same_error(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  /* The destination's allocation fails inside the move: the await fails. */
  pending_move_t m = start_move_with(rt, SMALL, 31, true);
  sw_error_t* first = sw_await_wait(m.await, -1);
  assert_non_null(first);
  assert_int_equal(sw_error_code(first), SW_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(sw_error_message(first), "injected"));
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_FAILED);
  const int64_t timeouts[3] = {-1, 0, 1000000};
  for (int i = 0; i < 3; ++i) {
    sw_error_t* again = sw_await_wait(m.await, timeouts[i]);
    assert_non_null(again);
    assert_ptr_not_equal(again, first); /* a copy the caller frees */
    assert_int_equal(sw_error_code(again), SW_ERROR_OUT_OF_MEMORY);
    assert_string_equal(sw_error_message(again), sw_error_message(first));
    sw_error_free(again);
  }
  sw_tensor_t* r = (sw_tensor_t*)(uintptr_t)0x1;
  sw_error_t* from_result = sw_await_result(m.await, &r);
  assert_int_equal(sw_error_code(from_result), SW_ERROR_OUT_OF_MEMORY);
  assert_string_equal(sw_error_message(from_result), sw_error_message(first));
  sw_error_free(from_result);
  assert_ptr_equal(r, (sw_tensor_t*)(uintptr_t)0x1);

  /* A callback installed afterwards reports the same error. */
  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_WAITING_THREAD, &rec);
  sw_error_t* last = sw_await_wait(m.await, 0);
  assert_int_equal(sw_error_code(last), SW_ERROR_OUT_OF_MEMORY);
  sw_error_free(last);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_int_equal(rec.code, SW_ERROR_OUT_OF_MEMORY);
  assert_string_equal(rec.message, sw_error_message(first));
  sw_error_free(first);
  expect_untouched(&m);
  end_move(&m);
  sw_async_recorder_destroy(&rec);
}

#define WAITERS 16

typedef struct waiter_t {
  sw_await_t* await;
  pthread_barrier_t* start;
  sw_error_code_t code;
  sw_tensor_t* result;
} waiter_t;

static void* wait_in_thread(void* arg) {
  waiter_t* w = (waiter_t*)arg;
  pthread_barrier_wait(w->start);
  sw_error_t* e = sw_await_wait(w->await, -1);
  w->code = sw_error_code(e);
  sw_error_free(e);
  if (!e) {
    e = sw_await_result(w->await, &w->result);
    if (e) w->code = sw_error_code(e);
    sw_error_free(e);
  }
  return NULL;
}

static void sixteen_threads_wait_on_one_await(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  pending_move_t m = start_move(rt, MEDIUM, 41);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, WAITERS);
  waiter_t w[WAITERS];
  pthread_t threads[WAITERS];
  for (int i = 0; i < WAITERS; ++i) {
    w[i] = (waiter_t){m.await, &start, SW_ERROR_CODE_FORCE32, NULL};
    assert_int_equal(pthread_create(&threads[i], NULL, wait_in_thread, &w[i]), 0);
  }
  for (int i = 0; i < WAITERS; ++i) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < WAITERS; ++i) {
    assert_int_equal(w[i].code, SW_OK);
    assert_non_null(w[i].result);
    assert_ptr_equal(w[i].result, w[0].result);
  }
  assert_true(sw_async_tensor_holds(w[0].result, MEDIUM, 41));
  for (int i = 0; i < WAITERS; ++i) sw_tensor_release(w[i].result);
  expect_moved(&m);
  end_move(&m);
}

/* ---- callbacks ----------------------------------------------------------- */

typedef struct waiting_thread_t {
  sw_await_t* await;
  pthread_t self;
  sw_error_code_t code;
} waiting_thread_t;

static void* wait_and_note_thread(void* arg) {
  waiting_thread_t* w = (waiting_thread_t*)arg;
  w->self = pthread_self();
  sw_error_t* e = sw_await_wait(w->await, -1);
  w->code = sw_error_code(e);
  sw_error_free(e);
  return NULL;
}

static void waiting_thread_callback_fires_on_the_waiter(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  pending_move_t m = start_move(rt, MEDIUM, 51);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_WAITING_THREAD, &rec);
  /* Completion alone never fires it. */
  assert_int_equal(sw_async_poll_terminal(m.await), SW_AWAIT_SUCCEEDED);
  sw_async_sleep_ms(50);
  assert_int_equal(sw_async_fired(&rec), 0);

  waiting_thread_t w = {m.await, 0, SW_ERROR_CODE_FORCE32};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, wait_and_note_thread, &w), 0);
  pthread_join(thread, NULL);
  assert_int_equal(w.code, SW_OK);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_true(pthread_equal(rec.thread, w.self));
  assert_ptr_equal(rec.await, m.await);
  assert_int_equal(rec.code, SW_OK);
  assert_string_equal(rec.message, "");

  /* Exactly once: neither another wait nor process_events fires it again. */
  SW_OK_(sw_await_wait(m.await, -1));
  size_t fired = 99;
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 0);
  assert_int_equal(sw_async_fired(&rec), 1);
  expect_moved(&m);
  end_move(&m);
  sw_async_recorder_destroy(&rec);
}

static void waiting_thread_callback_fires_from_process_events(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  pending_move_t m = start_move(rt, MEDIUM, 61);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_WAITING_THREAD, &rec);
  assert_int_equal(sw_async_poll_terminal(m.await), SW_AWAIT_SUCCEEDED);
  assert_int_equal(sw_async_fired(&rec), 0);
  size_t fired = 99;
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 1);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_true(pthread_equal(rec.thread, pthread_self()));
  assert_int_equal(rec.code, SW_OK);
  SW_OK_(sw_await_wait(m.await, 0));
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 0);
  SW_OK_(sw_runtime_process_events(rt, NULL));
  assert_int_equal(sw_async_fired(&rec), 1);
  expect_moved(&m);
  end_move(&m);
  sw_runtime_release(rt);
  sw_async_recorder_destroy(&rec);
}

static void loop_thread_callback_fires_without_a_waiter(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  pending_move_t m = start_move(rt, MEDIUM, 71);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_LOOP_THREAD, &rec);
  sw_async_await_fired(&rec);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_false(pthread_equal(rec.thread, pthread_self()));
  assert_ptr_equal(rec.await, m.await);
  assert_int_equal(rec.code, SW_OK);
  assert_string_equal(rec.message, "");
  /* It fires once the await is terminal. */
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
  SW_OK_(sw_await_wait(m.await, -1));
  SW_OK_(sw_runtime_process_events(rt, NULL));
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_fired(&rec), 1);
  expect_moved(&m);
  end_move(&m);
  sw_async_recorder_destroy(&rec);
}

static void callbacks_set_after_completion_fire(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_async_recorder_t loop_rec, wait_rec, events_rec;
  sw_async_recorder_init(&loop_rec);
  sw_async_recorder_init(&wait_rec);
  sw_async_recorder_init(&events_rec);
  pending_move_t a = start_move(rt, SMALL, 81), b = start_move(rt, SMALL, 82), c = start_move(rt, SMALL, 83);
  SW_OK_(sw_await_wait(a.await, -1));
  SW_OK_(sw_await_wait(b.await, -1));
  SW_OK_(sw_await_wait(c.await, -1));
  SW_OK_(sw_runtime_process_events(rt, NULL));

  /* Loop thread: fires there soon, with nobody waiting. */
  sw_async_set_callback(a.await, SW_CALLBACK_MODE_LOOP_THREAD, &loop_rec);
  sw_async_await_fired(&loop_rec);
  assert_false(pthread_equal(loop_rec.thread, pthread_self()));
  assert_int_equal(loop_rec.code, SW_OK);
  assert_ptr_equal(loop_rec.await, a.await);

  /* Waiting thread: owed until the next wait on this thread. */
  sw_async_set_callback(b.await, SW_CALLBACK_MODE_WAITING_THREAD, &wait_rec);
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_fired(&wait_rec), 0);
  SW_OK_(sw_await_wait(b.await, 0));
  assert_int_equal(sw_async_fired(&wait_rec), 1);
  assert_true(pthread_equal(wait_rec.thread, pthread_self()));
  assert_ptr_equal(wait_rec.await, b.await);

  /* ... or until process_events. */
  sw_async_set_callback(c.await, SW_CALLBACK_MODE_WAITING_THREAD, &events_rec);
  assert_int_equal(sw_async_fired(&events_rec), 0);
  size_t fired = 99;
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 1);
  assert_int_equal(sw_async_fired(&events_rec), 1);
  assert_true(pthread_equal(events_rec.thread, pthread_self()));

  SW_OK_(sw_await_wait(a.await, 0));
  SW_OK_(sw_await_wait(b.await, 0));
  SW_OK_(sw_await_wait(c.await, 0));
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 0);
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_fired(&loop_rec), 1);
  assert_int_equal(sw_async_fired(&wait_rec), 1);
  assert_int_equal(sw_async_fired(&events_rec), 1);
  end_move(&a);
  end_move(&b);
  end_move(&c);
  sw_runtime_release(rt);
  sw_async_recorder_destroy(&loop_rec);
  sw_async_recorder_destroy(&wait_rec);
  sw_async_recorder_destroy(&events_rec);
}

static void second_set_callback_fails_state(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_async_recorder_t rec, other;
  sw_async_recorder_init(&rec);
  sw_async_recorder_init(&other);
  pending_move_t m = start_move(rt, MEDIUM, 91);

  /* Rejected infos are not "the" callback: a valid one is accepted after. */
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  assert_int_equal(info.struct_size, sizeof info);
  assert_int_equal(info.mode, SW_CALLBACK_MODE_WAITING_THREAD);
  assert_null(info.callback);
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_VALUE, "callback");
  info.callback = sw_async_record;
  info.user_data = &other;
  info.mode = (sw_callback_mode_t)3;
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_VALUE, "mode");
  info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
  info.struct_size = 4;
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_VALUE, "struct_size");
  SW_FAILS(sw_await_set_callback(m.await, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_await_set_callback(NULL, &info), SW_ERROR_TYPE, NULL);

  sw_async_set_callback(m.await, SW_CALLBACK_MODE_LOOP_THREAD, &rec);
  sw_await_callback_info_init(&info);
  info.callback = sw_async_record;
  info.user_data = &other;
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_STATE, NULL);
  info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_STATE, NULL);
  SW_OK_(sw_await_wait(m.await, -1));
  sw_async_await_fired(&rec);
  SW_FAILS(sw_await_set_callback(m.await, &info), SW_ERROR_STATE, NULL);
  SW_OK_(sw_await_wait(m.await, 0));
  SW_OK_(sw_runtime_process_events(rt, NULL));
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_int_equal(sw_async_fired(&other), 0);
  end_move(&m);
  sw_async_recorder_destroy(&rec);
  sw_async_recorder_destroy(&other);
}

/* ---- the event fd ---------------------------------------------------------- */

static int readable(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  assert_true(n >= 0);
  return n == 1 && (p.revents & POLLIN) != 0;
}

static void event_fd_signals_completions(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  int fd = -1, again = -2;
  SW_OK_(sw_runtime_event_fd(rt, &fd));
  SW_OK_(sw_runtime_event_fd(rt, &again));
  assert_true(fd >= 0);
  assert_int_equal(fd, again);
  assert_false(readable(fd, 0));

  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  pending_move_t m = start_move(rt, BIG, 101);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_WAITING_THREAD, &rec);
  /* Not readable before the completion: if the await is still pending after
   * the poll, the fd cannot have been signalled yet. */
  const int early = readable(fd, 0);
  if (sw_async_status(m.await) == SW_AWAIT_PENDING) assert_false(early);
  assert_true(readable(fd, 60000));
  assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
  assert_int_equal(sw_async_fired(&rec), 0);
  size_t fired = 99;
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 1);
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_true(pthread_equal(rec.thread, pthread_self()));
  assert_int_equal(rec.code, SW_OK);
  assert_false(readable(fd, 0)); /* drained */
  SW_OK_(sw_await_wait(m.await, 0));
  assert_int_equal(sw_async_fired(&rec), 1);
  expect_moved(&m);
  end_move(&m);

  /* A completion without a callback signals too; processing it fires none. */
  pending_move_t plain = start_move(rt, SMALL, 102);
  assert_true(readable(fd, 60000));
  assert_int_equal(sw_async_status(plain.await), SW_AWAIT_SUCCEEDED);
  SW_OK_(sw_runtime_process_events(rt, &fired));
  assert_int_equal(fired, 0);
  assert_false(readable(fd, 0));
  expect_moved(&plain);
  end_move(&plain);
  sw_runtime_release(rt);
  sw_async_recorder_destroy(&rec);
}

/* ---- handle kinds ---------------------------------------------------------- */

static void await_is_not_a_tensor(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  pending_move_t m = start_move(rt, SMALL, 111);
  SW_OK_(sw_await_wait(m.await, -1));
  sw_tensor_t* t = sw_async_source(rt, 4, 112);
  sw_tensor_t* as_tensor = (sw_tensor_t*)(void*)m.await;
  sw_tensor_t* out = (sw_tensor_t*)(uintptr_t)0x1;
  SW_FAILS(sw_add(as_tensor, t, &out), SW_ERROR_TYPE, "await");
  SW_FAILS(sw_add(t, as_tensor, &out), SW_ERROR_TYPE, "await");
  assert_ptr_equal(out, (sw_tensor_t*)(uintptr_t)0x1);
  int64_t numel = -7;
  SW_FAILS(sw_tensor_numel(as_tensor, &numel), SW_ERROR_TYPE, NULL);
  assert_int_equal(numel, -7);
  sw_carrier_t* dst = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &dst));
  sw_await_t* a2 = (sw_await_t*)(uintptr_t)0x1;
  SW_FAILS(sw_move_async(as_tensor, dst, &a2), SW_ERROR_TYPE, NULL);
  assert_ptr_equal(a2, (sw_await_t*)(uintptr_t)0x1);
  assert_int_equal(sw_async_size(dst), 0);
  assert_false(sw_async_owned(dst));
  /* And the other way round: a tensor is not an await. */
  sw_await_status_t st = SW_AWAIT_STATUS_FORCE32;
  SW_FAILS(sw_await_query((sw_await_t*)(void*)t, &st), SW_ERROR_TYPE, NULL);
  assert_int_equal(st, SW_AWAIT_STATUS_FORCE32);
  SW_FAILS(sw_await_wait((sw_await_t*)(void*)t, 0), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_await_wait(NULL, 0), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_await_query(m.await, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_await_result(m.await, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_await_kind(m.await, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_runtime_process_events(NULL, NULL), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_runtime_event_fd(rt, NULL), SW_ERROR_VALUE, NULL);
  sw_carrier_release(dst);
  sw_tensor_release(t);
  end_move(&m);
}

/* ---- shutdown and release -------------------------------------------------- */

#define SHUTDOWN_MOVES 6

static void shutdown_completes_pending_moves(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  /* Sources first, then every move in a burst, then shutdown: the later
   * moves are still queued or copying when it starts. Two more moves get no
   * callback until after shutdown. */
  pending_move_t m[SHUTDOWN_MOVES + 2];
  sw_async_recorder_t rec[SHUTDOWN_MOVES];
  for (int i = 0; i < SHUTDOWN_MOVES + 2; ++i) {
    m[i] = (pending_move_t){NULL, NULL, NULL, NULL, MEDIUM, 121 + (uint32_t)i};
    m[i].source = sw_async_source(rt, MEDIUM, m[i].seed);
    m[i].source_carrier = sw_async_carrier_of(m[i].source);
    SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &m[i].destination));
  }
  for (int i = 0; i < SHUTDOWN_MOVES + 2; ++i) {
    SW_OK_(sw_move_async(m[i].source, m[i].destination, &m[i].await));
    if (i >= SHUTDOWN_MOVES) continue;
    sw_async_recorder_init(&rec[i]);
    sw_async_set_callback(m[i].await, i % 2 ? SW_CALLBACK_MODE_LOOP_THREAD : SW_CALLBACK_MODE_WAITING_THREAD,
                          &rec[i]);
  }
  SW_OK_(sw_runtime_shutdown(rt));

  int cancelled = 0;
  for (int i = 0; i < SHUTDOWN_MOVES; ++i) {
    const sw_await_status_t st = sw_async_status(m[i].await);
    assert_int_not_equal(st, SW_AWAIT_PENDING);
    /* Every callback fired exactly once, before shutdown returned: the
     * loop-thread ones on the loop, the owed waiting-thread ones here. */
    assert_int_equal(sw_async_fired(&rec[i]), 1);
    if (i % 2)
      assert_false(pthread_equal(rec[i].thread, pthread_self()));
    else
      assert_true(pthread_equal(rec[i].thread, pthread_self()));
    sw_error_t* e = sw_await_wait(m[i].await, -1);
    if (e) {
      assert_int_equal(sw_error_code(e), SW_ERROR_CANCELLED);
      assert_int_equal(st, SW_AWAIT_FAILED);
      assert_int_equal(rec[i].code, SW_ERROR_CANCELLED);
      assert_string_equal(rec[i].message, sw_error_message(e));
      sw_error_free(e);
      ++cancelled;
      /* Both carriers are usable and unchanged. */
      expect_untouched(&m[i]);
      const float one = 1.0f;
      SW_OK_(sw_carrier_write(m[i].source_carrier, 0, 1, &one));
      assert_int_equal(sw_async_version(m[i].source_carrier), 1);
    } else {
      assert_int_equal(st, SW_AWAIT_SUCCEEDED);
      assert_int_equal(rec[i].code, SW_OK);
      expect_moved(&m[i]);
    }
    assert_int_equal(sw_async_fired(&rec[i]), 1);
  }
  /* The last moves queue behind the first ones on two workers: some are
   * still in flight when shutdown starts. */
  assert_true(cancelled >= 1);

  /* Later asynchronous calls fail CANCELLED and change nothing. */
  sw_tensor_t* t = sw_async_source(rt, 8, 131);
  sw_carrier_t* tc = sw_async_carrier_of(t);
  sw_carrier_t* dst = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &dst));
  sw_await_t* a = (sw_await_t*)(uintptr_t)0x1;
  SW_FAILS(sw_move_async(t, dst, &a), SW_ERROR_CANCELLED, NULL);
  assert_ptr_equal(a, (sw_await_t*)(uintptr_t)0x1);
  assert_false(sw_async_owned(tc));
  assert_false(sw_async_owned(dst));
  assert_int_equal(sw_async_size(dst), 0);

  /* Synchronous calls keep working. */
  sw_tensor_t* sum = NULL;
  SW_OK_(sw_add(t, t, &sum));
  float got[8];
  SW_OK_(sw_tensor_read(sum, got, sizeof got));
  for (size_t i = 0; i < 8; ++i) assert_true(got[i] == 2.0f * sw_async_pattern(131, i));
  SW_OK_(sw_runtime_shutdown(rt)); /* idempotent */

  /* Callbacks installed after shutdown still fire once: a loop-thread one
   * without a loop thread left, a waiting-thread one on the next wait. */
  sw_async_recorder_t late_loop, late_wait;
  sw_async_recorder_init(&late_loop);
  sw_async_recorder_init(&late_wait);
  for (int i = SHUTDOWN_MOVES; i < SHUTDOWN_MOVES + 2; ++i)
    assert_int_not_equal(sw_async_status(m[i].await), SW_AWAIT_PENDING);
  sw_async_set_callback(m[SHUTDOWN_MOVES].await, SW_CALLBACK_MODE_LOOP_THREAD, &late_loop);
  sw_async_await_fired(&late_loop);
  sw_async_set_callback(m[SHUTDOWN_MOVES + 1].await, SW_CALLBACK_MODE_WAITING_THREAD, &late_wait);
  assert_int_equal(sw_async_fired(&late_wait), 0);
  sw_error_t* late = sw_await_wait(m[SHUTDOWN_MOVES + 1].await, -1);
  assert_int_equal(sw_error_code(late), late_wait.code);
  sw_error_free(late);
  SW_OK_(sw_runtime_process_events(rt, NULL));
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_fired(&late_loop), 1);
  assert_int_equal(sw_async_fired(&late_wait), 1);
  assert_true(pthread_equal(late_wait.thread, pthread_self()));
  sw_async_recorder_destroy(&late_loop);
  sw_async_recorder_destroy(&late_wait);

  sw_tensor_release(sum);
  sw_carrier_release(dst);
  sw_carrier_release(tc);
  sw_tensor_release(t);
  for (int i = 0; i < SHUTDOWN_MOVES + 2; ++i) end_move(&m[i]);
  for (int i = 0; i < SHUTDOWN_MOVES; ++i) sw_async_recorder_destroy(&rec[i]);
  sw_runtime_release(rt);
}

static void release_everything_before_completion(void** state) {
  (void)state;
  /* Dropping the await, the tensors, the carriers and finally the runtime
   * while moves are in flight: the moves keep what they touch, the last
   * runtime reference shuts down, and the callbacks still fire once. */
  sw_async_recorder_t loop_rec, wait_rec;
  sw_async_recorder_init(&loop_rec);
  sw_async_recorder_init(&wait_rec);
  sw_runtime_t* rt = sw_async_runtime();
  pending_move_t a = start_move(rt, BIG, 141), b = start_move(rt, MEDIUM, 142);
  sw_async_set_callback(a.await, SW_CALLBACK_MODE_LOOP_THREAD, &loop_rec);
  sw_async_set_callback(b.await, SW_CALLBACK_MODE_WAITING_THREAD, &wait_rec);
  end_move(&a);
  end_move(&b);
  sw_runtime_release(rt);
  assert_int_equal(sw_async_fired(&loop_rec), 1);
  assert_int_equal(sw_async_fired(&wait_rec), 1);
  assert_true(loop_rec.code == SW_OK || loop_rec.code == SW_ERROR_CANCELLED);
  assert_true(wait_rec.code == SW_OK || wait_rec.code == SW_ERROR_CANCELLED);
  assert_true(pthread_equal(wait_rec.thread, pthread_self()));

  /* Without the runtime released, the orphaned move still completes. */
  sw_async_recorder_t orphan;
  sw_async_recorder_init(&orphan);
  rt = sw_async_runtime();
  pending_move_t c = start_move(rt, MEDIUM, 143);
  sw_async_set_callback(c.await, SW_CALLBACK_MODE_LOOP_THREAD, &orphan);
  end_move(&c);
  sw_async_await_fired(&orphan);
  assert_int_equal(orphan.code, SW_OK);
  sw_runtime_release(rt);
  assert_int_equal(sw_async_fired(&orphan), 1);
  sw_async_recorder_destroy(&orphan);
  sw_async_recorder_destroy(&loop_rec);
  sw_async_recorder_destroy(&wait_rec);
}

typedef struct shutdown_thread_t {
  sw_runtime_t* rt;
  sw_error_code_t code;
  char message[256];
} shutdown_thread_t;

static void* shutdown_in_thread(void* arg) {
  shutdown_thread_t* s = (shutdown_thread_t*)arg;
  sw_error_t* e = sw_runtime_shutdown(s->rt);
  s->code = sw_error_code(e);
  snprintf(s->message, sizeof s->message, "%s", sw_error_message(e));
  sw_error_free(e);
  return NULL;
}

static void shutdown_is_idempotent_from_any_thread(void** state) {
  (void)state;
  /* Threads started after shutdown may reuse the joined loop thread's id;
   * none of them is the loop thread. */
  sw_runtime_t* rt = sw_async_runtime();
  pending_move_t m = start_move(rt, SMALL, 151);
  SW_OK_(sw_await_wait(m.await, -1));
  SW_OK_(sw_runtime_shutdown(rt));
  for (int i = 0; i < 8; ++i) {
    shutdown_thread_t s = {rt, SW_ERROR_CODE_FORCE32, ""};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, shutdown_in_thread, &s), 0);
    pthread_join(thread, NULL);
    if (s.code != SW_OK) fail_msg("shutdown from thread %d failed: %s: %s", i, sw_error_code_name(s.code), s.message);
  }
  end_move(&m);
  sw_runtime_release(rt);
}

typedef struct releasing_callback_t {
  sw_async_recorder_t recorder;
  sw_runtime_t* runtime;
} releasing_callback_t;

static void record_and_release_runtime(void* user_data, sw_await_t* await, sw_error_code_t code, const char* message) {
  releasing_callback_t* r = (releasing_callback_t*)user_data;
  sw_async_record(&r->recorder, await, code, message);
  sw_runtime_release(r->runtime);
}

static void loop_callback_may_release_the_last_runtime_reference(void** state) {
  (void)state;
  /* Releasing the last runtime reference inside a loop-thread callback shuts
   * the runtime down from the loop thread; the move that just succeeded must
   * stay succeeded with its destination intact. */
  for (int attempt = 0; attempt < 3; ++attempt) {
    releasing_callback_t cb;
    sw_async_recorder_init(&cb.recorder);
    cb.runtime = sw_async_runtime();
    pending_move_t m = start_move(cb.runtime, MEDIUM, 161 + (uint32_t)attempt);
    sw_await_callback_info_t info;
    sw_await_callback_info_init(&info);
    info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
    info.callback = record_and_release_runtime;
    info.user_data = &cb;
    SW_OK_(sw_await_set_callback(m.await, &info));
    SW_OK_(sw_await_wait(m.await, -1));
    sw_async_await_fired(&cb.recorder);
    assert_int_equal(cb.recorder.code, SW_OK);
    assert_int_equal(sw_async_status(m.await), SW_AWAIT_SUCCEEDED);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_await_result(m.await, &r));
    assert_true(sw_async_tensor_holds(r, MEDIUM, 161 + (uint32_t)attempt));
    sw_tensor_release(r);
    expect_moved(&m);
    /* The runtime is shut down: new moves are refused. */
    sw_tensor_t* t = sw_async_source(cb.runtime, 4, 169);
    sw_carrier_t* dst = NULL;
    SW_OK_(sw_carrier_create_host(cb.runtime, SW_DTYPE_F32, 0, &dst));
    sw_await_t* a = NULL;
    SW_FAILS(sw_move_async(t, dst, &a), SW_ERROR_CANCELLED, NULL);
    sw_carrier_release(dst);
    sw_tensor_release(t);
    end_move(&m);
    assert_int_equal(sw_async_fired(&cb.recorder), 1);
    sw_async_recorder_destroy(&cb.recorder);
  }
}

/* A host allocator that counts the bytes it has handed out and not got back. */
static void* counting_alloc(void* user_data, size_t size, size_t alignment) {
  void* p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  __atomic_add_fetch((int64_t*)user_data, (int64_t)size, __ATOMIC_SEQ_CST);
  return p;
}

static void counting_free(void* user_data, void* pointer, size_t size, size_t alignment) {
  (void)alignment;
  __atomic_sub_fetch((int64_t*)user_data, (int64_t)size, __ATOMIC_SEQ_CST);
  free(pointer);
}

/* The loop thread drops its own references just after completing an await,
 * so the count reaches zero shortly after the last handle goes. */
static int64_t settled_live_bytes(const int64_t* live) {
  int64_t now = __atomic_load_n(live, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 2000 && now != 0; ++i) {
    sw_async_sleep_ms(1);
    now = __atomic_load_n(live, __ATOMIC_SEQ_CST);
  }
  return now;
}

static void fired_callbacks_hold_no_memory(void** state) {
  (void)state;
  /* Once a waiting-thread callback fired on a wait and every handle is gone,
   * the move's storage is returned, even if process_events is never called. */
  int64_t live = 0;
  sw_allocator_t allocator = {counting_alloc, counting_free, &live};
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.pool_limit_bytes = 0;
  desc.allocator = &allocator;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&desc, &rt));
  sw_async_recorder_t rec;
  sw_async_recorder_init(&rec);
  pending_move_t m = start_move(rt, (size_t)1 << 20, 171);
  sw_async_set_callback(m.await, SW_CALLBACK_MODE_WAITING_THREAD, &rec);
  SW_OK_(sw_await_wait(m.await, -1));
  assert_int_equal(sw_async_fired(&rec), 1);
  assert_true(__atomic_load_n(&live, __ATOMIC_SEQ_CST) >= (int64_t)(4 << 20));
  end_move(&m);
  assert_int_equal(settled_live_bytes(&live), 0);

  /* After shutdown too: the callback fires on the wait and nothing keeps the
   * await (and through it the runtime) alive afterwards. */
  sw_async_recorder_t late;
  sw_async_recorder_init(&late);
  pending_move_t n = start_move(rt, (size_t)1 << 20, 172);
  SW_OK_(sw_await_wait(n.await, -1));
  SW_OK_(sw_runtime_shutdown(rt));
  sw_async_set_callback(n.await, SW_CALLBACK_MODE_WAITING_THREAD, &late);
  SW_OK_(sw_await_wait(n.await, -1));
  assert_int_equal(sw_async_fired(&late), 1);
  end_move(&n);
  assert_int_equal(settled_live_bytes(&live), 0);
  sw_runtime_release(rt);
  sw_async_recorder_destroy(&late);
  sw_async_recorder_destroy(&rec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(wait_on_succeeded_await),
      cmocka_unit_test(wait_times_out_while_pending),
      cmocka_unit_test(failed_await_reports_same_error),
      cmocka_unit_test(sixteen_threads_wait_on_one_await),
      cmocka_unit_test(waiting_thread_callback_fires_on_the_waiter),
      cmocka_unit_test(waiting_thread_callback_fires_from_process_events),
      cmocka_unit_test(loop_thread_callback_fires_without_a_waiter),
      cmocka_unit_test(callbacks_set_after_completion_fire),
      cmocka_unit_test(second_set_callback_fails_state),
      cmocka_unit_test(event_fd_signals_completions),
      cmocka_unit_test(await_is_not_a_tensor),
      cmocka_unit_test(shutdown_completes_pending_moves),
      cmocka_unit_test(release_everything_before_completion),
      cmocka_unit_test(shutdown_is_idempotent_from_any_thread),
      cmocka_unit_test(loop_callback_may_release_the_last_runtime_reference),
      cmocka_unit_test(fired_callbacks_hold_no_memory),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
