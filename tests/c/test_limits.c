/* Limits and versioned structs: parser nesting, the one size/stride rule for
 * layouts, selection and tile-count limits, and the struct_size rule, each
 * failing VALUE with a message that names the problem, never crashing and
 * never overflowing. */
#include <pthread.h>
#include <stddef.h>

#include "sw_test.h"

/* "(((...(1)...)))" with `depth` parentheses, then ":" and the same for the
 * stride tree. */
static char* nested_layout(int depth) {
  const size_t n = (size_t)depth * 4 + 16;
  char* s = (char*)malloc(n);
  size_t p = 0;
  for (int side = 0; side < 2; ++side) {
    for (int i = 0; i < depth; ++i) s[p++] = '(';
    s[p++] = '1';
    for (int i = 0; i < depth; ++i) s[p++] = ')';
    if (side == 0) s[p++] = ':';
  }
  s[p] = '\0';
  return s;
}

typedef struct parse_job_t {
  int depth;
  sw_error_code_t code;
  char message[256];
} parse_job_t;

static void* parse_on_thread(void* arg) {
  parse_job_t* job = (parse_job_t*)arg;
  char* text = nested_layout(job->depth);
  sw_layout_t* l = NULL;
  sw_error_t* e = sw_layout_parse(text, &l);
  job->code = sw_error_code(e);
  snprintf(job->message, sizeof job->message, "%s", sw_error_message(e));
  sw_error_free(e);
  sw_layout_release(l);
  free(text);
  return NULL;
}

/* Deep nesting is refused before it costs stack, even on the 1 MiB stack an
 * embedder's thread may have. */
static void parse_nesting_is_limited(void** state) {
  (void)state;
  const int depths[3] = {6000, 50000, 1000000};
  for (int i = 0; i < 3; ++i) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    parse_job_t job;
    memset(&job, 0, sizeof job);
    job.depth = depths[i];
    pthread_t t;
    assert_int_equal(pthread_create(&t, &attr, parse_on_thread, &job), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    assert_int_equal(job.code, SW_ERROR_VALUE);
    if (!strstr(job.message, "limit of 32 levels")) fail_msg("depth %d: %s", job.depth, job.message);
  }
}

/* The limit is SW_MAX_LAYOUT_DEPTH levels of modes inside the outermost
 * parentheses; such a layout prints and parses back. */
static void parse_nesting_at_the_limit(void** state) {
  (void)state;
  char* at = nested_layout(SW_MAX_LAYOUT_DEPTH + 1);
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(at, &l));
  size_t len = 0;
  SW_OK_(sw_layout_to_string(l, NULL, 0, &len));
  char* text = (char*)malloc(len + 1);
  SW_OK_(sw_layout_to_string(l, text, len + 1, &len));
  sw_layout_t* back = NULL;
  SW_OK_(sw_layout_parse(text, &back));
  bool eq = false;
  SW_OK_(sw_layout_equal(l, back, &eq));
  assert_true(eq);
  char* over = nested_layout(SW_MAX_LAYOUT_DEPTH + 2);
  sw_layout_t* none = NULL;
  SW_FAILS(sw_layout_parse(over, &none), SW_ERROR_VALUE, "limit of 32 levels");
  assert_null(none);
  free(over);
  free(text);
  free(at);
  sw_layout_release(back);
  sw_layout_release(l);
}

/* Grouping nests one level per call and stops at the same limit. */
static void group_nesting_is_limited(void** state) {
  (void)state;
  const int64_t shape[2] = {1, 1}, stride[2] = {1, 1};
  sw_layout_t *l = NULL, *leaf = NULL;
  SW_OK_(sw_layout_create(shape, stride, 2, &l));
  SW_OK_(sw_layout_create(shape, stride, 1, &leaf));
  int levels = 0;
  for (;;) {
    const sw_layout_t* parts[2] = {l, leaf};
    sw_layout_t* g = NULL;
    sw_error_t* e = sw_layout_group(parts, 2, &g);
    if (e) {
      assert_int_equal(sw_error_code(e), SW_ERROR_VALUE);
      assert_non_null(strstr(sw_error_message(e), "limit of 32 levels"));
      sw_error_free(e);
      break;
    }
    sw_layout_release(l);
    l = g;
    ++levels;
    assert_true(levels <= SW_MAX_LAYOUT_DEPTH);
  }
  /* The first group makes modes of depth 1 out of leaves. */
  assert_int_equal(levels, SW_MAX_LAYOUT_DEPTH);
  sw_layout_release(leaf);
  sw_layout_release(l);
}

static void expect_layout_refused(const char* text) {
  sw_layout_t* l = NULL;
  sw_error_t* e = sw_layout_parse(text, &l);
  if (!e) fail_msg("layout \"%s\" was accepted", text);
  assert_int_equal(sw_error_code(e), SW_ERROR_VALUE);
  if (!strstr(sw_error_message(e), "overflows 64 bits")) fail_msg("\"%s\": %s", text, sw_error_message(e));
  sw_error_free(e);
  assert_null(l);
}

/* One rule: size and index span (1 + sum |stride| * (extent - 1)) fit int64,
 * whichever way the layout is made. */
static void one_rule_for_strides_and_sizes(void** state) {
  (void)state;
  expect_layout_refused("2:-9223372036854775808");
  expect_layout_refused("2:9223372036854775807");
  expect_layout_refused("(2,2):(4611686018427387904,4611686018427387904)");
  expect_layout_refused("(3037000500,3037000500):(1,3037000500)");
  const int64_t shape8[1] = {8}, big[1] = {INT64_MAX};
  sw_layout_t* l = NULL;
  SW_FAILS(sw_layout_create(shape8, big, 1, &l), SW_ERROR_VALUE, "overflows 64 bits");
  /* At the boundary: the span is exactly INT64_MAX. */
  SW_OK_(sw_layout_parse("2:-9223372036854775806", &l));
  int64_t cosize = 0, index = 0;
  SW_OK_(sw_layout_cosize(l, &cosize));
  assert_true(cosize == INT64_MAX);
  const int64_t one[1] = {1};
  SW_OK_(sw_layout_index(l, one, 1, &index));
  assert_true(index == -INT64_MAX + 1);
  bool inj = false;
  SW_OK_(sw_layout_is_injective(l, &inj));
  assert_true(inj);
  sw_layout_release(l);
  /* A stride of INT64_MIN on an extent of 1 reaches only index 0. */
  SW_OK_(sw_layout_parse("(1,2):(-9223372036854775808,1)", &l));
  SW_OK_(sw_layout_is_injective(l, &inj));
  assert_true(inj);
  SW_OK_(sw_layout_cosize(l, &cosize));
  assert_int_equal(cosize, 2);
  sw_layout_release(l);
  /* Sizes: the product of extents must fit. */
  const int64_t huge[3] = {INT64_C(1) << 31, INT64_C(1) << 31, 4};
  SW_FAILS(sw_layout_dense(huge, 3, &l), SW_ERROR_VALUE, "overflows 64 bits");
}

/* Every coordinate is checked before it is used. */
static void index_checks_every_mode_first(void** state) {
  (void)state;
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse("(2,3):(4611686018427387903,1)", &l));
  const int64_t bad[2] = {1, 7};
  int64_t index = 0;
  SW_FAILS(sw_layout_index(l, bad, 2, &index), SW_ERROR_INDEX, "mode 1");
  const int64_t neg[2] = {-1, 0};
  SW_FAILS(sw_layout_index(l, neg, 2, &index), SW_ERROR_INDEX, "mode 0");
  const int64_t ok[2] = {1, 2};
  SW_OK_(sw_layout_index(l, ok, 2, &index));
  assert_true(index == INT64_C(4611686018427387905));
  int64_t ordinal = 0;
  SW_FAILS(sw_layout_encode(l, bad, 2, &ordinal), SW_ERROR_INDEX, "mode 1");
  sw_layout_release(l);
}

/* ---- selections and tile counts ------------------------------------------- */

static void selection_count_is_limited(void** state) {
  (void)state;
  int64_t axis[64];
  for (int i = 0; i < 64; ++i) axis[i] = i;
  const int64_t* axes[20];
  size_t counts[20];
  for (int per = 63; per <= 64; ++per) {
    for (int a = 0; a < 16; ++a) {
      axes[a] = axis;
      counts[a] = (size_t)per;
    }
    sw_tile_selection_t* s = NULL;
    SW_FAILS(sw_tile_selection_create(axes, counts, 16, &s), SW_ERROR_VALUE, "SW_MAX_TILES");
    assert_null(s);
  }
  for (int a = 0; a < 20; ++a) {
    axes[a] = axis;
    counts[a] = 64;
  }
  sw_tile_selection_t* s = NULL;
  SW_FAILS(sw_tile_selection_create(axes, counts, 20, &s), SW_ERROR_VALUE, "SW_MAX_RANK");
  /* Just under the limit: counted exactly. */
  for (int a = 0; a < 4; ++a) counts[a] = 64;
  SW_OK_(sw_tile_selection_create(axes, counts, 4, &s));
  size_t n = 0;
  SW_OK_(sw_tile_selection_count(s, &n));
  assert_int_equal(n, 64 * 64 * 64 * 64);
  sw_tile_selection_release(s);
}

/* A grid past SW_MAX_TILES is VALUE before anything is allocated or claimed. */
static void tiled_create_tile_count_is_limited(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t *p = NULL, *q = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &q));
  const int64_t grids[4][2] = {{INT64_C(1) << 61, 1}, {INT64_C(1) << 46, 1}, {INT64_C(1) << 23, 3}, {(INT64_C(1) << 24) + 1, 1}};
  const int64_t tile[2] = {1, 1};
  for (int i = 0; i < 4; ++i) {
    sw_carrier_t* te = NULL;
    SW_FAILS(sw_tiled_create(p, q, grids[i], tile, 2, NULL, &te), SW_ERROR_VALUE, "SW_MAX_TILES");
    assert_null(te);
    bool owned = true;
    SW_OK_(sw_carrier_is_owned(p, &owned));
    assert_false(owned);
  }
  /* Overflowing sizes are VALUE too. */
  const int64_t g[2] = {INT64_C(1) << 20, 1}, t[2] = {INT64_C(1) << 44, 1};
  sw_carrier_t* te = NULL;
  SW_FAILS(sw_tiled_create(p, q, g, t, 2, NULL, &te), SW_ERROR_VALUE, "overflows");
  sw_carrier_release(p);
  sw_carrier_release(q);
}

/* ---- versioned structs ------------------------------------------------------ */

static void runtime_desc_size_must_be_known(void** state) {
  (void)state;
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  sw_runtime_t* rt = NULL;
  const uint32_t bad[3] = {(uint32_t)(offsetof(sw_runtime_desc_t, pool_limit_bytes) + 4), (uint32_t)sizeof d + 8, 4};
  for (int i = 0; i < 3; ++i) {
    d.struct_size = bad[i];
    SW_FAILS(sw_runtime_create(&d, &rt), SW_ERROR_VALUE, "struct_size");
    assert_null(rt);
  }
  d.struct_size = sizeof d;
  SW_OK_(sw_runtime_create(&d, &rt));
  sw_runtime_release(rt);
}

static void file_desc_size_must_be_known(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.struct_size = (uint32_t)offsetof(sw_file_carrier_desc_t, chunk_bytes) + 2;
  sw_carrier_t* c = NULL;
  SW_FAILS(sw_carrier_create_file(rt, SW_DTYPE_F32, 16, &d, &c), SW_ERROR_VALUE, "sw_file_carrier_desc_t");
  d.struct_size = sizeof d + 4;
  SW_FAILS(sw_carrier_create_file(rt, SW_DTYPE_F32, 16, &d, &c), SW_ERROR_VALUE, "struct_size");
  assert_null(c);
}

static void copy_event_size_is_checked(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_device_t* dev = NULL;
  SW_OK_(sw_device_create_fake(rt, NULL, &dev));
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.dtype = SW_DTYPE_U8;
  spec.rank = 1;
  spec.shape[0] = 64;
  spec.max_extent_bytes = 64;
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(dev, &spec, 64, &a));
  size_t logged = 0;
  SW_OK_(sw_fake_device_log_count(dev, &logged));
  uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  sw_copy_event_t ev;
  memset(&ev, 0, sizeof ev);
  /* An out-event without its size: refused before the copy starts. */
  SW_FAILS(sw_device_host_to_device(a, 0, bytes, 8, true, &ev), SW_ERROR_VALUE, "sw_copy_event_t");
  size_t after = 0;
  SW_OK_(sw_fake_device_log_count(dev, &after));
  assert_int_equal(after, logged);
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(a, 0, bytes, 8, true, &ev));
  /* An in-event of another size. */
  sw_copy_event_t wrong = ev;
  wrong.struct_size = 12;
  bool released = false, complete = false;
  SW_FAILS(sw_device_event_query(dev, &wrong, &released, &complete), SW_ERROR_VALUE, "struct_size");
  SW_FAILS(sw_fake_device_complete(dev, &wrong), SW_ERROR_VALUE, "struct_size");
  SW_OK_(sw_fake_device_complete(dev, &ev));
  SW_OK_(sw_device_event_query(dev, &ev, &released, &complete));
  assert_true(released && complete);
  sw_device_allocation_release(a);
  sw_device_release(dev);
}

static sw_error_t* plan_nothing(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                                sw_residency_plan_t** out) {
  (void)user;
  (void)purpose;
  return sw_residency_plan_create(required, NULL, NULL, out);
}

static void outcome_must_not_run(void* user, const sw_residency_plan_t* plan, bool committed,
                                 const sw_tile_set_t* promoted, const sw_tile_set_t* evicted) {
  (void)plan;
  (void)committed;
  (void)promoted;
  (void)evicted;
  *(int*)user += 1;
}

/* A policy from the 0.1 header has no outcome field: its size is accepted
 * and whatever lies past it is never read. */
static void older_policy_struct_is_accepted(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  int outcomes = 0;
  sw_residency_policy_t vt;
  sw_residency_policy_init(&vt);
  vt.user_data = &outcomes;
  vt.plan = plan_nothing;
  vt.outcome = outcome_must_not_run;
  vt.struct_size = (uint32_t)offsetof(sw_residency_policy_t, outcome);
  sw_carrier_t *p = NULL, *q = NULL, *te = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 8, &q));
  const int64_t grid[1] = {2}, tile[1] = {4};
  SW_OK_(sw_tiled_create(p, q, grid, tile, 1, &vt, &te));
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  const int64_t k = 1;
  const int64_t* axes[1] = {&k};
  const size_t counts[1] = {1};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 1, &sel));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(te, full, sel, NULL, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  assert_int_equal(outcomes, 0);
  /* The current size gets the outcome. */
  sw_tensor_release(full);
  sw_carrier_release(te);
  vt.struct_size = sizeof vt;
  sw_carrier_t *p2 = NULL, *q2 = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p2));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 8, &q2));
  SW_OK_(sw_tiled_create(p2, q2, grid, tile, 1, &vt, &te));
  SW_OK_(sw_tiled_full_tensor(te, &full));
  SW_OK_(sw_tiled_project(te, full, sel, NULL, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  assert_int_equal(outcomes, 1);
  /* A size inside the plan field is not. */
  vt.struct_size = (uint32_t)offsetof(sw_residency_policy_t, plan) + 4;
  sw_carrier_t* none = NULL;
  SW_FAILS(sw_tiled_create(p, q, grid, tile, 1, &vt, &none), SW_ERROR_VALUE, "sw_residency_policy_t");
  sw_tile_selection_release(sel);
  sw_tensor_release(full);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(q);
  sw_carrier_release(p2);
  sw_carrier_release(q2);
}

static void out_struct_sizes_are_checked(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(2, &lru));
  sw_lru_stats_t stats;
  memset(&stats, 0, sizeof stats);
  SW_FAILS(sw_lru_policy_stats(lru, &stats), SW_ERROR_VALUE, "sw_lru_stats_t");
  sw_lru_stats_init(&stats);
  SW_OK_(sw_lru_policy_stats(lru, &stats));
  assert_int_equal(stats.struct_size, sizeof stats);
  assert_int_equal(stats.requests, 0);
  sw_lru_policy_release(lru);
  sw_carrier_t *p = NULL, *q = NULL, *te = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 4, &q));
  const int64_t grid[1] = {1}, tile[1] = {4}, zero[1] = {0};
  SW_OK_(sw_tiled_create(p, q, grid, tile, 1, NULL, &te));
  sw_tile_state_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st + 8;
  SW_FAILS(sw_tiled_tile_state(te, zero, 1, &st), SW_ERROR_VALUE, "sw_tile_state_t");
  sw_tile_state_init(&st);
  SW_OK_(sw_tiled_tile_state(te, zero, 1, &st));
  assert_int_equal(st.location, SW_TILE_SECONDARY);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_nesting_is_limited),
      cmocka_unit_test(parse_nesting_at_the_limit),
      cmocka_unit_test(group_nesting_is_limited),
      cmocka_unit_test(one_rule_for_strides_and_sizes),
      cmocka_unit_test(index_checks_every_mode_first),
      cmocka_unit_test(selection_count_is_limited),
      cmocka_unit_test_setup_teardown(tiled_create_tile_count_is_limited, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test(runtime_desc_size_must_be_known),
      cmocka_unit_test_setup_teardown(file_desc_size_must_be_known, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(copy_event_size_is_checked, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(older_policy_struct_is_accepted, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(out_struct_sizes_are_checked, sw_test_runtime_setup, sw_test_runtime_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
