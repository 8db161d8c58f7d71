/* The error model: pinned codes, NULL-safe accessors, code names, and
 * messages that name the problem. */
#include "sw_test.h"

/* The numbers are part of the ABI; bindings map them one-to-one. */
static void codes_are_pinned(void** state) {
  (void)state;
  assert_int_equal(SW_OK, 0);
  assert_int_equal(SW_ERROR_TYPE, 1);
  assert_int_equal(SW_ERROR_VALUE, 2);
  assert_int_equal(SW_ERROR_STATE, 3);
  assert_int_equal(SW_ERROR_UNSUPPORTED, 4);
  assert_int_equal(SW_ERROR_INDEX, 5);
  assert_int_equal(SW_ERROR_OUT_OF_MEMORY, 6);
  assert_int_equal(SW_ERROR_IO, 7);
  assert_int_equal(SW_ERROR_DATA_CORRUPT, 8);
  assert_int_equal(SW_ERROR_DEVICE_LOST, 9);
  assert_int_equal(SW_ERROR_STALE_HANDLE, 10);
  assert_int_equal(SW_ERROR_TIMEOUT, 11);
  assert_int_equal(SW_ERROR_CANCELLED, 12);
  assert_int_equal(SW_ERROR_INTERNAL, 13);
  assert_int_equal(sizeof(sw_error_code_t), 4);
}

static void null_error_accessors(void** state) {
  (void)state;
  assert_int_equal(sw_error_code(NULL), SW_OK);
  const char* m = sw_error_message(NULL);
  assert_non_null(m);
  assert_string_equal(m, "");
  sw_error_free(NULL); /* must not crash */
}

static void code_names(void** state) {
  (void)state;
  static const struct {
    sw_error_code_t code;
    const char* name;
  } names[] = {
      {SW_OK, "OK"},
      {SW_ERROR_TYPE, "TYPE"},
      {SW_ERROR_VALUE, "VALUE"},
      {SW_ERROR_STATE, "STATE"},
      {SW_ERROR_UNSUPPORTED, "UNSUPPORTED"},
      {SW_ERROR_INDEX, "INDEX"},
      {SW_ERROR_OUT_OF_MEMORY, "OUT_OF_MEMORY"},
      {SW_ERROR_IO, "IO"},
      {SW_ERROR_DATA_CORRUPT, "DATA_CORRUPT"},
      {SW_ERROR_DEVICE_LOST, "DEVICE_LOST"},
      {SW_ERROR_STALE_HANDLE, "STALE_HANDLE"},
      {SW_ERROR_TIMEOUT, "TIMEOUT"},
      {SW_ERROR_CANCELLED, "CANCELLED"},
      {SW_ERROR_INTERNAL, "INTERNAL"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    const char* got = sw_error_code_name(names[i].code);
    assert_non_null(got);
    assert_string_equal(got, names[i].name);
  }
}

static void unknown_code_name(void** state) {
  (void)state;
  assert_string_equal(sw_error_code_name((sw_error_code_t)14), "UNKNOWN");
  assert_string_equal(sw_error_code_name((sw_error_code_t)0x7ffffffe), "UNKNOWN");
  assert_string_equal(sw_error_code_name((sw_error_code_t)1000), "UNKNOWN");
  assert_string_equal(sw_error_code_name(SW_ERROR_CODE_FORCE32), "UNKNOWN");
}

/* One real failure per common code, checked through the accessors rather
 * than through SW_FAILS, so the accessors themselves are under test. */
static void real_errors_carry_code_and_message(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_layout_t* l = NULL;

  sw_error_t* e = sw_layout_parse("(4,4", &l);
  assert_non_null(e);
  assert_null(l);
  assert_int_equal(sw_error_code(e), SW_ERROR_VALUE);
  assert_true(strlen(sw_error_message(e)) > 0);
  sw_error_free(e);

  e = sw_layout_rank(NULL, &(size_t){0});
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_TYPE);
  assert_true(strlen(sw_error_message(e)) > 0);
  sw_error_free(e);

  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  float buf[8];
  e = sw_carrier_read(c, 2, 3, buf);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_INDEX);
  sw_error_free(e);

  SW_OK_(sw_carrier_dispose(c));
  e = sw_carrier_read(c, 0, 1, buf);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
  sw_error_free(e);
  sw_carrier_release(c);
}

/* Errors are independent objects: each message stays valid until its own
 * error is freed, whatever order they are freed in. */
static void errors_are_independent(void** state) {
  (void)state;
  sw_layout_t* l = NULL;
  sw_error_t* first = sw_layout_parse("(1,2):(3)", &l);
  sw_error_t* second = sw_layout_rank(NULL, &(size_t){0});
  assert_non_null(first);
  assert_non_null(second);
  assert_ptr_not_equal(first, second);
  char copy[512];
  snprintf(copy, sizeof copy, "%s", sw_error_message(second));
  sw_error_free(first);
  assert_int_equal(sw_error_code(second), SW_ERROR_TYPE);
  assert_string_equal(sw_error_message(second), copy);
  sw_error_free(second);
}

static void message_names_out_of_range_coordinate(void** state) {
  (void)state;
  const int64_t ext[2] = {3, 5};
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(ext, 2, &l));
  int64_t out = -77;
  const int64_t c1[2] = {1, 1234};
  SW_FAILS(sw_layout_index(l, c1, 2, &out), SW_ERROR_INDEX, "1234");
  const int64_t c2[2] = {-42, 0};
  SW_FAILS(sw_layout_index(l, c2, 2, &out), SW_ERROR_INDEX, "-42");
  /* The extent it violated is named too. */
  SW_FAILS(sw_layout_index(l, c1, 2, &out), SW_ERROR_INDEX, "extent 5");
  assert_int_equal(out, -77);
  sw_layout_release(l);
}

static void message_names_parse_position(void** state) {
  (void)state;
  sw_layout_t* l = NULL;
  SW_FAILS(sw_layout_parse("(4,x):(1,4)", &l), SW_ERROR_VALUE, "position 3");
  SW_FAILS(sw_layout_parse("8:1 junk", &l), SW_ERROR_VALUE, "position 4");
  assert_null(l);
}

static void message_names_slot_range(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_I32, 10, &c));
  int32_t buf[4];
  SW_FAILS(sw_carrier_read(c, 97, 1, buf), SW_ERROR_INDEX, "97");
  SW_FAILS(sw_carrier_write(c, 8, 3, buf), SW_ERROR_INDEX, "10 slots");
  sw_carrier_release(c);
}

static void message_names_dtype_and_handles(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = NULL;
  SW_FAILS(sw_carrier_create_cpu(rt, (sw_dtype_t)77, 4, &c), SW_ERROR_TYPE, "77");
  assert_null(c);
  size_t n = 0;
  SW_FAILS(sw_carrier_size(NULL, &n), SW_ERROR_TYPE, "carrier");
  /* A handle of the wrong kind says what it got. */
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse("4:1", &l));
  SW_FAILS(sw_carrier_size((const sw_carrier_t*)l, &n), SW_ERROR_TYPE, "layout");
  /* A NULL out-parameter is named. */
  SW_FAILS(sw_layout_rank(l, NULL), SW_ERROR_VALUE, "out_rank");
  sw_layout_release(l);
}

static void message_names_state(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_U8, 3, &c));
  SW_OK_(sw_testing_claim(c));
  const uint8_t v = 1;
  SW_FAILS(sw_carrier_write(c, 0, 1, &v), SW_ERROR_STATE, "owned");
  SW_OK_(sw_testing_unclaim(c));
  SW_OK_(sw_carrier_dispose(c));
  SW_FAILS(sw_carrier_write(c, 0, 1, &v), SW_ERROR_STATE, "released");
  sw_carrier_release(c);
}

/* sw_error_create: every valid code and its message come back as given. */
static void created_errors_round_trip(void** state) {
  (void)state;
  for (int code = SW_ERROR_TYPE; code <= SW_ERROR_INTERNAL; ++code) {
    char text[64];
    snprintf(text, sizeof text, "host failure %d", code);
    sw_error_t* e = sw_error_create((sw_error_code_t)code, text);
    assert_non_null(e);
    assert_int_equal(sw_error_code(e), code);
    assert_string_equal(sw_error_message(e), text);
    text[0] = 'X'; /* the message is a copy */
    assert_int_equal(sw_error_message(e)[0], 'h');
    sw_error_free(e);
  }
  /* Errors made this way are independent of each other. */
  sw_error_t* a = sw_error_create(SW_ERROR_VALUE, "first");
  sw_error_t* b = sw_error_create(SW_ERROR_VALUE, "first");
  assert_ptr_not_equal(a, b);
  sw_error_free(a);
  assert_string_equal(sw_error_message(b), "first");
  sw_error_free(b);
}

static void created_error_with_null_message_is_empty(void** state) {
  (void)state;
  sw_error_t* e = sw_error_create(SW_ERROR_STATE, NULL);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
  assert_string_equal(sw_error_message(e), "");
  sw_error_free(e);
  e = sw_error_create(SW_ERROR_INDEX, "");
  assert_int_equal(sw_error_code(e), SW_ERROR_INDEX);
  assert_string_equal(sw_error_message(e), "");
  sw_error_free(e);
}

/* SW_OK and numbers outside the enum never read as success: INTERNAL, with
 * the invalid number and the message kept. */
static void created_error_with_invalid_code_is_internal(void** state) {
  (void)state;
  const struct {
    sw_error_code_t code;
    const char* message;
    const char* expected;
  } cases[] = {
      {SW_OK, "fine", "invalid error code 0: fine"},
      {(sw_error_code_t)14, "next", "invalid error code 14: next"},
      {(sw_error_code_t)-3, NULL, "invalid error code -3: "},
      {SW_ERROR_CODE_FORCE32, "max", "invalid error code 2147483647: max"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    sw_error_t* e = sw_error_create(cases[i].code, cases[i].message);
    assert_non_null(e);
    assert_int_equal(sw_error_code(e), SW_ERROR_INTERNAL);
    assert_string_equal(sw_error_message(e), cases[i].expected);
    sw_error_free(e);
  }
}

/* Out of memory is the one code whose canonical message gives the static
 * error; freeing it is still allowed (and a no-op). */
static void created_out_of_memory_error_frees(void** state) {
  (void)state;
  sw_error_t* e = sw_error_create(SW_ERROR_OUT_OF_MEMORY, "out of memory");
  assert_int_equal(sw_error_code(e), SW_ERROR_OUT_OF_MEMORY);
  assert_string_equal(sw_error_message(e), "out of memory");
  sw_error_free(e);
  e = sw_error_create(SW_ERROR_OUT_OF_MEMORY, "budget of 4 tiles exhausted");
  assert_string_equal(sw_error_message(e), "budget of 4 tiles exhausted");
  sw_error_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(codes_are_pinned),
      cmocka_unit_test(null_error_accessors),
      cmocka_unit_test(code_names),
      cmocka_unit_test(unknown_code_name),
      cmocka_unit_test(real_errors_carry_code_and_message),
      cmocka_unit_test(errors_are_independent),
      cmocka_unit_test(message_names_out_of_range_coordinate),
      cmocka_unit_test(message_names_parse_position),
      cmocka_unit_test(message_names_slot_range),
      cmocka_unit_test(message_names_dtype_and_handles),
      cmocka_unit_test(message_names_state),
      cmocka_unit_test(created_errors_round_trip),
      cmocka_unit_test(created_error_with_null_message_is_empty),
      cmocka_unit_test(created_error_with_invalid_code_is_internal),
      cmocka_unit_test(created_out_of_memory_error_frees),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
