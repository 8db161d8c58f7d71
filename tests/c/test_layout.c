/* Layouts: congruent (shape, stride) trees, first mode fastest. */
#include "sw_test.h"

/* ---- helpers -------------------------------------------------------------- */

static sw_layout_t* parse(const char* text) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(text, &l));
  assert_non_null(l);
  return l;
}

static sw_layout_t* flat(const int64_t* shape, const int64_t* stride, size_t rank) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_create(shape, stride, rank, &l));
  assert_non_null(l);
  return l;
}

static void expect_text(const sw_layout_t* l, const char* want) {
  size_t len = 0;
  SW_OK_(sw_layout_to_string(l, NULL, 0, &len));
  assert_int_equal(len, strlen(want));
  char buf[256];
  memset(buf, '#', sizeof buf);
  size_t len2 = 0;
  SW_OK_(sw_layout_to_string(l, buf, sizeof buf, &len2));
  assert_int_equal(len2, len);
  assert_string_equal(buf, want);
}

static size_t rank_of(const sw_layout_t* l) {
  size_t r = 999;
  SW_OK_(sw_layout_rank(l, &r));
  return r;
}

static int64_t size_of(const sw_layout_t* l) {
  int64_t s = -99;
  SW_OK_(sw_layout_size(l, &s));
  return s;
}

static int64_t cosize_of(const sw_layout_t* l) {
  int64_t s = -99;
  SW_OK_(sw_layout_cosize(l, &s));
  return s;
}

static bool injective(const sw_layout_t* l) {
  bool b = false;
  SW_OK_(sw_layout_is_injective(l, &b));
  return b;
}

static bool equal(const sw_layout_t* a, const sw_layout_t* b) {
  bool e = false;
  SW_OK_(sw_layout_equal(a, b, &e));
  bool e2 = !e;
  SW_OK_(sw_layout_equal(b, a, &e2));
  assert_int_equal(e, e2); /* symmetric */
  return e;
}

static int64_t index_of(const sw_layout_t* l, const int64_t* coord, size_t count) {
  int64_t i = -12345;
  SW_OK_(sw_layout_index(l, coord, count, &i));
  return i;
}

static void expect_extents(const sw_layout_t* l, const int64_t* want, size_t rank) {
  assert_int_equal(rank_of(l), rank);
  int64_t got[SW_MAX_RANK + 1];
  for (size_t i = 0; i < SW_MAX_RANK + 1; ++i) got[i] = -7;
  SW_OK_(sw_layout_extents(l, got, SW_MAX_RANK + 1));
  for (size_t i = 0; i < rank; ++i) assert_int_equal(got[i], want[i]);
  assert_int_equal(got[rank], -7); /* nothing written past the rank */
}

/* ---- construction ---------------------------------------------------------- */

static void flat_layout(void** state) {
  (void)state;
  const int64_t shape[2] = {3, 5}, stride[2] = {5, 1};
  sw_layout_t* l = flat(shape, stride, 2);
  expect_extents(l, shape, 2);
  assert_int_equal(size_of(l), 15);
  assert_int_equal(cosize_of(l), 15); /* max index 2*5 + 4*1 = 14 */
  const int64_t c[2] = {1, 2};
  assert_int_equal(index_of(l, c, 2), 7);
  const int64_t last[2] = {2, 4};
  assert_int_equal(index_of(l, last, 2), 14);
  expect_text(l, "(3,5):(5,1)");
  sw_layout_release(l);
}

static void flat_layout_negative_and_zero_strides(void** state) {
  (void)state;
  const int64_t shape[3] = {3, 2, 4}, stride[3] = {-1, 0, 7};
  sw_layout_t* l = flat(shape, stride, 3);
  expect_text(l, "(3,2,4):(-1,0,7)");
  const int64_t c[3] = {2, 1, 3};
  assert_int_equal(index_of(l, c, 3), -2 + 0 + 21);
  assert_int_equal(size_of(l), 24);
  sw_layout_release(l);
}

static void dense_is_first_mode_fastest(void** state) {
  (void)state;
  const int64_t e44[2] = {4, 4};
  sw_layout_t* d = NULL;
  SW_OK_(sw_layout_dense(e44, 2, &d));
  expect_text(d, "(4,4):(1,4)");
  const int64_t st[2] = {1, 4};
  sw_layout_t* f = flat(e44, st, 2);
  assert_true(equal(d, f));
  const int64_t c[2] = {1, 2}; /* (i, j) -> i + 4 j */
  assert_int_equal(index_of(d, c, 2), 9);
  sw_layout_release(f);
  sw_layout_release(d);

  const int64_t e234[3] = {2, 3, 4};
  SW_OK_(sw_layout_dense(e234, 3, &d));
  expect_text(d, "(2,3,4):(1,2,6)");
  const int64_t c3[3] = {1, 2, 3};
  assert_int_equal(index_of(d, c3, 3), 1 + 4 + 18);
  assert_int_equal(cosize_of(d), 24);
  assert_true(injective(d));
  sw_layout_release(d);
}

/* Every ordinal reaches the index equal to itself in a dense layout. */
static void dense_index_equals_ordinal(void** state) {
  (void)state;
  const int64_t e[3] = {3, 1, 5};
  sw_layout_t* d = NULL;
  SW_OK_(sw_layout_dense(e, 3, &d));
  for (int64_t o = 0; o < 15; ++o) {
    int64_t c[3] = {-1, -1, -1};
    SW_OK_(sw_layout_decode(d, o, c, 3));
    assert_int_equal(index_of(d, c, 3), o);
  }
  sw_layout_release(d);
}

static void rank_zero_layout(void** state) {
  (void)state;
  sw_layout_t* a = NULL;
  SW_OK_(sw_layout_create(NULL, NULL, 0, &a));
  sw_layout_t* b = NULL;
  SW_OK_(sw_layout_dense(NULL, 0, &b));
  sw_layout_t* c = parse("():()");
  assert_int_equal(rank_of(a), 0);
  assert_int_equal(size_of(a), 1); /* a scalar */
  assert_int_equal(cosize_of(a), 1);
  assert_true(injective(a));
  assert_int_equal(index_of(a, NULL, 0), 0);
  int64_t ord = -1;
  SW_OK_(sw_layout_encode(a, NULL, 0, &ord));
  assert_int_equal(ord, 0);
  SW_OK_(sw_layout_decode(a, 0, NULL, 0));
  int64_t dummy = 5;
  SW_FAILS(sw_layout_decode(a, 1, &dummy, 1), SW_ERROR_INDEX, NULL);
  SW_OK_(sw_layout_extents(a, NULL, 0));
  expect_text(a, "():()");
  assert_true(equal(a, b));
  assert_true(equal(a, c));
  const int64_t one[1] = {0};
  int64_t out = 77;
  SW_FAILS(sw_layout_index(a, one, 1, &out), SW_ERROR_VALUE, NULL);
  assert_int_equal(out, 77);
  sw_layout_release(a);
  sw_layout_release(b);
  sw_layout_release(c);
}

static void empty_layouts(void** state) {
  (void)state;
  const int64_t shape[2] = {3, 0}, stride[2] = {1, 3};
  sw_layout_t* l = flat(shape, stride, 2);
  expect_extents(l, shape, 2);
  assert_int_equal(size_of(l), 0);
  assert_int_equal(cosize_of(l), 0);
  assert_true(injective(l));
  expect_text(l, "(3,0):(1,3)");
  int64_t out = 55;
  const int64_t c[2] = {0, 0};
  SW_FAILS(sw_layout_index(l, c, 2, &out), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_layout_encode(l, c, 2, &out), SW_ERROR_INDEX, NULL);
  assert_int_equal(out, 55);
  int64_t coord[2] = {9, 9};
  SW_FAILS(sw_layout_decode(l, 0, coord, 2), SW_ERROR_INDEX, NULL);
  assert_int_equal(coord[0], 9);
  assert_int_equal(coord[1], 9);
  sw_layout_release(l);

  /* A zero extent anywhere, even with large strides, empties the layout. */
  sw_layout_t* p = parse("(0,(5,7)):(100,(9,1000))");
  assert_int_equal(size_of(p), 0);
  assert_int_equal(cosize_of(p), 0);
  assert_true(injective(p));
  sw_layout_release(p);

  const int64_t e[3] = {3, 0, 2};
  sw_layout_t* d = NULL;
  SW_OK_(sw_layout_dense(e, 3, &d));
  assert_int_equal(size_of(d), 0);
  assert_int_equal(cosize_of(d), 0);
  sw_layout_release(d);
}

/* ---- text form -------------------------------------------------------------- */

static void parse_round_trips(void** state) {
  (void)state;
  static const char* texts[] = {
      "(8):(1)",
      "(4,(2,2)):(1,(4,8))",
      "((2,2),(2,2)):((4,2),(1,8))",
      "(3,5):(5,1)",
      "(2,3):(-1,0)",
      "((2,(3,2)),1):((1,(2,6)),0)",
      "((4,4)):((1,4))",
      "(0,2):(1,0)",
      "():()",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i) {
    sw_layout_t* l = parse(texts[i]);
    expect_text(l, texts[i]);
    char buf[256];
    size_t len = 0;
    SW_OK_(sw_layout_to_string(l, buf, sizeof buf, &len));
    sw_layout_t* again = parse(buf);
    assert_true(equal(l, again));
    sw_layout_release(again);
    sw_layout_release(l);
  }
}

static void parse_normalises_text(void** state) {
  (void)state;
  /* A bare leaf is a rank-1 layout. */
  sw_layout_t* a = parse("8:1");
  assert_int_equal(rank_of(a), 1);
  expect_text(a, "(8):(1)");
  const int64_t s8[1] = {8}, d1[1] = {1};
  sw_layout_t* f = flat(s8, d1, 1);
  assert_true(equal(a, f));
  sw_layout_release(f);
  sw_layout_release(a);

  /* Whitespace and explicit signs are accepted. */
  sw_layout_t* b = parse("  ( 4 , ( 2,2 ) ) : ( +1 ,( 4 , -8 ))  ");
  expect_text(b, "(4,(2,2)):(1,(4,-8))");
  sw_layout_release(b);
}

static void to_string_buffer_rules(void** state) {
  (void)state;
  sw_layout_t* l = parse("(4,(2,2)):(1,(4,8))");
  const char* want = "(4,(2,2)):(1,(4,8))";
  const size_t n = strlen(want);
  size_t len = 0;
  SW_OK_(sw_layout_to_string(l, NULL, 0, &len));
  assert_int_equal(len, n);

  char buf[64];
  memset(buf, '#', sizeof buf);
  SW_OK_(sw_layout_to_string(l, buf, n + 1, &len)); /* exactly enough */
  assert_string_equal(buf, want);
  assert_int_equal(buf[n + 1], '#');

  /* Too small (no room for the NUL): nothing but the length is written. */
  memset(buf, '#', sizeof buf);
  len = 0;
  SW_FAILS(sw_layout_to_string(l, buf, n, &len), SW_ERROR_VALUE, NULL);
  assert_int_equal(len, n);
  for (size_t i = 0; i < sizeof buf; ++i) assert_int_equal(buf[i], '#');
  SW_FAILS(sw_layout_to_string(l, buf, 1, &len), SW_ERROR_VALUE, NULL);
  assert_int_equal(buf[0], '#');

  SW_FAILS(sw_layout_to_string(l, NULL, 16, &len), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_layout_to_string(l, buf, sizeof buf, NULL), SW_ERROR_VALUE, NULL);
  assert_int_equal(buf[0], '#');
  sw_layout_release(l);
}

static void parse_errors_name_position(void** state) {
  (void)state;
  static const struct {
    const char* text;
    const char* needle;
  } bad[] = {
      {"", "position 0:"},
      {"(4,4)", "position 5:"},       /* missing ':' */
      {"(4,4):", "position 6:"},      /* missing stride */
      {"(4,4):(1,4", "position 10:"}, /* unterminated: points at the end */
      {"4:1x", "position 3:"},        /* trailing text */
      {"(a):(1)", "position 1:"},
      {"(4,,4):(1,1,4)", "position 3:"},
      {"(4,4):(1)", "position"},         /* not congruent */
      {"(4,(2,2)):(1,4,8)", "position"}, /* not congruent */
      {"(4,4):((1,2),4)", "position"},   /* leaf vs tuple */
      {"-1:1", "position"},              /* negative extent */
      {"99999999999999999999:1", "position"},
      {"(4 4):(1 4)", "position 3:"},
      {"-:1", "position 0:"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    sw_layout_t* l = (sw_layout_t*)(uintptr_t)0x5151;
    sw_error_t* e = sw_layout_parse(bad[i].text, &l);
    if (!e) fail_msg("parse(\"%s\") succeeded", bad[i].text);
    if (sw_error_code(e) != SW_ERROR_VALUE)
      fail_msg("parse(\"%s\") failed with %s", bad[i].text, sw_error_code_name(sw_error_code(e)));
    if (!strstr(sw_error_message(e), bad[i].needle))
      fail_msg("parse(\"%s\"): message \"%s\" lacks \"%s\"", bad[i].text, sw_error_message(e), bad[i].needle);
    sw_error_free(e);
    assert_ptr_equal(l, (sw_layout_t*)(uintptr_t)0x5151);
  }
}

/* ---- index ------------------------------------------------------------------ */

/* The within-tile permutation of a 4x4 tensor with 2x2 tiles. Coordinate i
 * of a mode (2,2) decodes first mode fastest into (i % 2, i / 2). */
static void nested_tile_index(void** state) {
  (void)state;
  sw_layout_t* l = parse("((2,2),(2,2)):((4,2),(1,8))");
  const int64_t ext[2] = {4, 4};
  expect_extents(l, ext, 2);
  assert_int_equal(size_of(l), 16);
  assert_int_equal(cosize_of(l), 16);
  assert_true(injective(l));
  int seen[16] = {0};
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t mode[2] = {i, j};
      const int64_t want = (i % 2) * 4 + (i / 2) * 2 + (j % 2) * 1 + (j / 2) * 8;
      assert_int_equal(index_of(l, mode, 2), want);
      const int64_t leaf[4] = {i % 2, i / 2, j % 2, j / 2};
      assert_int_equal(index_of(l, leaf, 4), want);
      seen[want]++;
    }
  }
  for (int k = 0; k < 16; ++k) assert_int_equal(seen[k], 1); /* a permutation of 0..15 */
  /* A few spelled out. */
  const int64_t c10[2] = {1, 0}, c20[2] = {2, 0}, c01[2] = {0, 1}, c02[2] = {0, 2}, c33[2] = {3, 3};
  assert_int_equal(index_of(l, c10, 2), 4);
  assert_int_equal(index_of(l, c20, 2), 2);
  assert_int_equal(index_of(l, c01, 2), 1);
  assert_int_equal(index_of(l, c02, 2), 8);
  assert_int_equal(index_of(l, c33, 2), 15);
  sw_layout_release(l);
}

static void per_mode_and_per_leaf_coords(void** state) {
  (void)state;
  sw_layout_t* l = parse("(4,(2,2)):(1,(4,8))");
  const int64_t per_mode[2] = {1, 3};
  const int64_t per_leaf[3] = {1, 1, 1};
  assert_int_equal(index_of(l, per_mode, 2), 1 + 4 + 8);
  assert_int_equal(index_of(l, per_leaf, 3), 13);
  const int64_t m2[2] = {3, 2}; /* 2 -> (0, 1) */
  assert_int_equal(index_of(l, m2, 2), 3 + 8);
  const int64_t l2[3] = {3, 0, 1};
  assert_int_equal(index_of(l, l2, 3), 11);
  sw_layout_release(l);
}

static void out_of_range_coordinates(void** state) {
  (void)state;
  const int64_t e[2] = {3, 5};
  sw_layout_t* d = NULL;
  SW_OK_(sw_layout_dense(e, 2, &d));
  int64_t out = 4242;
  const int64_t hi0[2] = {3, 0}, hi1[2] = {0, 5}, neg[2] = {0, -1}, big[2] = {INT64_MAX, 0};
  SW_FAILS(sw_layout_index(d, hi0, 2, &out), SW_ERROR_INDEX, "3");
  SW_FAILS(sw_layout_index(d, hi1, 2, &out), SW_ERROR_INDEX, "5");
  SW_FAILS(sw_layout_index(d, neg, 2, &out), SW_ERROR_INDEX, "-1");
  SW_FAILS(sw_layout_index(d, big, 2, &out), SW_ERROR_INDEX, NULL);
  assert_int_equal(out, 4242);
  sw_layout_release(d);

  /* Per-leaf coordinates are checked against the leaf's extent, not the
   * mode's: 2 is a fine mode coordinate but not a leaf coordinate here. */
  sw_layout_t* n = parse("(4,(2,2)):(1,(4,8))");
  const int64_t leaf_bad[3] = {0, 2, 0};
  SW_FAILS(sw_layout_index(n, leaf_bad, 3, &out), SW_ERROR_INDEX, "2");
  const int64_t mode_bad[2] = {0, 4};
  SW_FAILS(sw_layout_index(n, mode_bad, 2, &out), SW_ERROR_INDEX, "4");
  assert_int_equal(out, 4242);
  sw_layout_release(n);
}

static void wrong_coordinate_count(void** state) {
  (void)state;
  sw_layout_t* n = parse("(4,(2,2)):(1,(4,8))"); /* rank 2, 3 leaves */
  const int64_t c[5] = {0, 0, 0, 0, 0};
  int64_t out = 31;
  SW_FAILS(sw_layout_index(n, c, 1, &out), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_layout_index(n, c, 4, &out), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_layout_index(n, c, 0, &out), SW_ERROR_VALUE, NULL);
  /* encode takes per-mode coordinates only. */
  SW_FAILS(sw_layout_encode(n, c, 3, &out), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_layout_encode(n, c, 1, &out), SW_ERROR_VALUE, NULL);
  assert_int_equal(out, 31);
  sw_layout_release(n);
}

/* ---- encode / decode ------------------------------------------------------- */

static void decode_is_colexicographic(void** state) {
  (void)state;
  const int64_t e[2] = {2, 2};
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(e, 2, &l));
  const int64_t want[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (int64_t o = 0; o < 4; ++o) {
    int64_t c[2] = {-1, -1};
    SW_OK_(sw_layout_decode(l, o, c, 2));
    assert_int_equal(c[0], want[o][0]);
    assert_int_equal(c[1], want[o][1]);
    int64_t back = -1;
    SW_OK_(sw_layout_encode(l, c, 2, &back));
    assert_int_equal(back, o);
  }
  sw_layout_release(l);
}

static void encode_ignores_strides(void** state) {
  (void)state;
  /* encode/decode belong to the shape: (i, j) of (3, 4) is i + 3 j whatever
   * the strides. */
  const int64_t shape[2] = {3, 4}, stride[2] = {7, -1};
  sw_layout_t* l = flat(shape, stride, 2);
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t c[2] = {i, j};
      int64_t o = -1;
      SW_OK_(sw_layout_encode(l, c, 2, &o));
      assert_int_equal(o, i + 3 * j);
      int64_t d[3] = {-1, -1, -9};
      SW_OK_(sw_layout_decode(l, o, d, 3)); /* capacity above the rank is fine */
      assert_int_equal(d[0], i);
      assert_int_equal(d[1], j);
      assert_int_equal(d[2], -9);
    }
  }
  sw_layout_release(l);

  /* Nested modes decode per mode (extents (4, 4)), not per leaf. */
  sw_layout_t* n = parse("(4,(2,2)):(1,(4,8))");
  const int64_t c[2] = {1, 3};
  int64_t o = -1;
  SW_OK_(sw_layout_encode(n, c, 2, &o));
  assert_int_equal(o, 13);
  int64_t d[2] = {-1, -1};
  SW_OK_(sw_layout_decode(n, 13, d, 2));
  assert_int_equal(d[0], 1);
  assert_int_equal(d[1], 3);
  sw_layout_release(n);
}

static void decode_errors(void** state) {
  (void)state;
  const int64_t e[2] = {2, 3};
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(e, 2, &l));
  int64_t c[2] = {-5, -5};
  SW_FAILS(sw_layout_decode(l, 6, c, 2), SW_ERROR_INDEX, "6");
  SW_FAILS(sw_layout_decode(l, -1, c, 2), SW_ERROR_INDEX, "-1");
  SW_FAILS(sw_layout_decode(l, 0, c, 1), SW_ERROR_VALUE, NULL); /* capacity below rank */
  SW_FAILS(sw_layout_decode(l, 0, NULL, 2), SW_ERROR_VALUE, NULL);
  assert_int_equal(c[0], -5);
  assert_int_equal(c[1], -5);
  const int64_t bad[2] = {2, 0};
  int64_t o = 99;
  SW_FAILS(sw_layout_encode(l, bad, 2, &o), SW_ERROR_INDEX, "2");
  assert_int_equal(o, 99);
  sw_layout_release(l);
}

/* ---- size, cosize, injectivity ------------------------------------------- */

static void size_and_cosize(void** state) {
  (void)state;
  static const struct {
    const char* text;
    int64_t size, cosize;
  } cases[] = {
      {"(3,4):(4,1)", 12, 12},
      {"(3,4):(1,3)", 12, 12},
      {"(3,4):(2,0)", 12, 5},   /* broadcast mode: indices 0, 2, 4 */
      {"(3,4):(1,10)", 12, 33}, /* padded: max 2 + 30 */
      {"(1):(100)", 1, 1},      /* a unit mode reaches only index 0 */
      {"(4,(2,2)):(1,(4,8))", 16, 16},
      {"((2,2),(2,2)):((4,2),(1,8))", 16, 16},
      {"(5,0):(1,5)", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    sw_layout_t* l = parse(cases[i].text);
    if (size_of(l) != cases[i].size) fail_msg("size(%s) = %lld", cases[i].text, (long long)size_of(l));
    if (cosize_of(l) != cases[i].cosize) fail_msg("cosize(%s) = %lld", cases[i].text, (long long)cosize_of(l));
    sw_layout_release(l);
  }
}

/* "Negative strides are counted by magnitude": (4):(-1) reaches indices
 * 0, -1, -2, -3, a span of 4 slots. */
static void cosize_counts_negative_strides_by_magnitude(void** state) {
  (void)state;
  sw_layout_t* a = parse("(4):(-1)");
  assert_int_equal(cosize_of(a), 4);
  sw_layout_t* b = parse("(2,3):(1,-2)"); /* 1 + 1*1 + 2*2 */
  assert_int_equal(cosize_of(b), 6);
  sw_layout_t* c = parse("(2,3):(-1,-2)");
  assert_int_equal(cosize_of(c), 6);
  sw_layout_release(a);
  sw_layout_release(b);
  sw_layout_release(c);
}

/* A span of indices that does not fit 64 bits cannot be reported. */
/* A layout whose cosize would overflow is refused where it is made (the one
 * rule for sizes and strides), so no later query can overflow. */
static void cosize_overflow_is_value(void** state) {
  (void)state;
  sw_layout_t* l = (sw_layout_t*)(uintptr_t)0x5151;
  int64_t c = -3;
  SW_FAILS(sw_layout_parse("(2):(9223372036854775807)", &l), SW_ERROR_VALUE, "overflows 64 bits");
  assert_true(l == (sw_layout_t*)(uintptr_t)0x5151);
  SW_FAILS(sw_layout_parse("(2,2):(4611686018427387904,-4611686018427387904)", &l), SW_ERROR_VALUE,
           "overflows 64 bits");
  assert_int_equal(c, -3);
  l = parse("(2,2):(4611686018427387903,-4611686018427387903)"); /* span 2^63 - 2 */
  SW_OK_(sw_layout_cosize(l, &c));
  assert_int_equal(c, INT64_MAX);
  sw_layout_release(l);
}

static void size_overflow_is_value(void** state) {
  (void)state;
  const int64_t e[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  sw_layout_t* l = (sw_layout_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_layout_dense(e, 2, &l), SW_ERROR_VALUE, NULL);
  const int64_t st[2] = {1, 1};
  SW_FAILS(sw_layout_create(e, st, 2, &l), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_layout_parse("(1099511627776,1099511627776):(1,1)", &l), SW_ERROR_VALUE, NULL);
  assert_ptr_equal(l, (sw_layout_t*)(uintptr_t)0x5151);
}

static void negative_extent_is_value(void** state) {
  (void)state;
  const int64_t e[2] = {3, -2}, st[2] = {1, 3};
  sw_layout_t* l = (sw_layout_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_layout_create(e, st, 2, &l), SW_ERROR_VALUE, "-2");
  SW_FAILS(sw_layout_dense(e, 2, &l), SW_ERROR_VALUE, "-2");
  assert_ptr_equal(l, (sw_layout_t*)(uintptr_t)0x5151);
}

static void injectivity(void** state) {
  (void)state;
  static const struct {
    const char* text;
    bool injective;
  } cases[] = {
      {"(4,4):(1,4)", true},
      {"(4,4):(4,1)", true},
      {"(2,2):(3,2)", true}, /* indices 0 3 2 5: injective, strides not sorted */
      {"(3,2):(2,3)", true}, /* 0 2 4 3 5 7: injective, strides interleave */
      {"(2,3):(3,2)", true}, /* 0 3 2 5 4 7 */
      {"(2,2):(1,-2)", true},
      {"(4,1):(1,0)", true}, /* stride 0 on a unit mode reaches nothing new */
      {"(1):(0)", true},
      {"(0,3):(0,0)", true}, /* empty */
      {"((2,2),(2,2)):((4,2),(1,8))", true},
      {"(4):(0)", false},            /* stride 0 */
      {"(3,2):(1,0)", false},        /* broadcast mode */
      {"(2,2):(1,1)", false},        /* overlapping: 0 1 1 2 */
      {"(3,2):(1,2)", false},        /* overlapping: 0 1 2 2 3 4 */
      {"(4,2):(2,4)", false},        /* 0 2 4 6 4 ... */
      {"(2,2):(1,-1)", false},       /* 0 1 -1 0 */
      {"((2,2)):((1,1))", false},    /* overlap inside a nested mode */
      {"(2,(2,2)):(4,(1,4))", false}, /* nested leaf collides with a top-level one */
      /* 35.6 million coordinates, colliding in their first two leaves (6 = 6):
       * found without enumerating them all (a fuzzing input that took 50 s) */
      {"(7,(2542854,2)):(1,(8,6))", false},
      /* a non-nested pair under a large nested leaf: only the pair is checked */
      {"((3,2),4000000):((2,3),8)", true},
      {"((3,2),400):((2,3),7)", false} /* 7 is inside the pair's span: 0+7 = 4+3 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    sw_layout_t* l = parse(cases[i].text);
    if (injective(l) != cases[i].injective)
      fail_msg("is_injective(%s) = %d, expected %d", cases[i].text, !cases[i].injective, cases[i].injective);
    sw_layout_release(l);
  }
}

/* ---- equality, group, permute --------------------------------------------- */

static void layout_equality(void** state) {
  (void)state;
  sw_layout_t* a = parse("(4,(2,2)):(1,(4,8))");
  sw_layout_t* b = parse("(4, (2, 2)) : (1, (4, 8))");
  assert_true(equal(a, b));
  assert_true(equal(a, a));

  /* Same extents and the same index function, different nesting: not equal. */
  sw_layout_t* flat44 = parse("(4,4):(1,4)");
  sw_layout_t* nested44 = parse("((2,2),4):((1,2),4)");
  sw_layout_t* flat224 = parse("(2,2,4):(1,2,4)");
  assert_false(equal(flat44, nested44));
  assert_false(equal(flat224, nested44));
  assert_false(equal(flat44, flat224));
  sw_layout_t* wrapped = parse("((4,4)):((1,4))");
  assert_false(equal(flat44, wrapped));

  sw_layout_t* stride_differs = parse("(4,(2,2)):(1,(4,9))");
  sw_layout_t* extent_differs = parse("(4,(2,3)):(1,(4,8))");
  assert_false(equal(a, stride_differs));
  assert_false(equal(a, extent_differs));

  const int64_t e[2] = {4, 4};
  sw_layout_t* d = NULL;
  SW_OK_(sw_layout_dense(e, 2, &d));
  assert_true(equal(d, flat44));

  sw_layout_release(a);
  sw_layout_release(b);
  sw_layout_release(flat44);
  sw_layout_release(nested44);
  sw_layout_release(flat224);
  sw_layout_release(wrapped);
  sw_layout_release(stride_differs);
  sw_layout_release(extent_differs);
  sw_layout_release(d);
}

static void group_modes(void** state) {
  (void)state;
  /* A rank-1 layout contributes its single mode, any other rank the tuple of
   * its modes. */
  sw_layout_t* m0 = parse("(4):(1)");
  sw_layout_t* m1 = parse("(2,2):(4,8)");
  const sw_layout_t* modes[2] = {m0, m1};
  sw_layout_t* g = NULL;
  SW_OK_(sw_layout_group(modes, 2, &g));
  sw_layout_t* want = parse("(4,(2,2)):(1,(4,8))");
  assert_true(equal(g, want));
  expect_text(g, "(4,(2,2)):(1,(4,8))");
  sw_layout_release(g);
  sw_layout_release(want);

  /* Building the 2x2-tile permutation from its modes. */
  sw_layout_t* rows = parse("((2,2)):((4,2))"); /* rank 1, nested mode */
  sw_layout_t* cols = parse("(2,2):(1,8)");     /* rank 2 -> grouped */
  const sw_layout_t* tile_modes[2] = {rows, cols};
  SW_OK_(sw_layout_group(tile_modes, 2, &g));
  want = parse("((2,2),(2,2)):((4,2),(1,8))");
  assert_true(equal(g, want));
  sw_layout_release(g);
  sw_layout_release(want);

  /* Grouping nothing is a rank-0 layout; grouping one rank-1 is itself. */
  SW_OK_(sw_layout_group(NULL, 0, &g));
  assert_int_equal(rank_of(g), 0);
  assert_int_equal(size_of(g), 1);
  sw_layout_release(g);
  const sw_layout_t* one[1] = {m0};
  SW_OK_(sw_layout_group(one, 1, &g));
  assert_true(equal(g, m0));
  sw_layout_release(g);

  /* Inputs are unchanged (layouts are immutable). */
  expect_text(m1, "(2,2):(4,8)");

  sw_layout_release(rows);
  sw_layout_release(cols);
  sw_layout_release(m0);
  sw_layout_release(m1);
}

static void permute_modes(void** state) {
  (void)state;
  sw_layout_t* l = parse("(3,4,5):(1,3,12)");
  const size_t perm[3] = {2, 0, 1};
  sw_layout_t* p = NULL;
  SW_OK_(sw_layout_permute(l, perm, 3, &p));
  expect_text(p, "(5,3,4):(12,1,3)");
  const int64_t c[3] = {4, 2, 3}; /* mode i of p is mode perm[i] of l */
  const int64_t lc[3] = {2, 3, 4};
  assert_int_equal(index_of(p, c, 3), index_of(l, lc, 3));
  expect_text(l, "(3,4,5):(1,3,12)"); /* the source is unchanged */
  sw_layout_release(p);

  const size_t id[3] = {0, 1, 2};
  SW_OK_(sw_layout_permute(l, id, 3, &p));
  assert_true(equal(p, l));
  sw_layout_release(p);

  sw_layout_t* n = parse("(4,(2,2)):(1,(4,8))");
  const size_t swap[2] = {1, 0};
  SW_OK_(sw_layout_permute(n, swap, 2, &p));
  expect_text(p, "((2,2),4):((4,8),1)");
  sw_layout_release(p);

  p = (sw_layout_t*)(uintptr_t)0x5151;
  const size_t too_short[2] = {0, 1};
  SW_FAILS(sw_layout_permute(l, too_short, 2, &p), SW_ERROR_VALUE, NULL);
  const size_t repeat[3] = {0, 0, 1};
  SW_FAILS(sw_layout_permute(l, repeat, 3, &p), SW_ERROR_VALUE, NULL);
  const size_t out_of_range[3] = {0, 3, 1};
  SW_FAILS(sw_layout_permute(l, out_of_range, 3, &p), SW_ERROR_INDEX, "3");
  assert_ptr_equal(p, (sw_layout_t*)(uintptr_t)0x5151);
  sw_layout_release(n);
  sw_layout_release(l);
}

static void extents_capacity(void** state) {
  (void)state;
  sw_layout_t* l = parse("(4,(2,3),5):(1,(4,8),24)");
  const int64_t want[3] = {4, 6, 5};
  expect_extents(l, want, 3);
  int64_t got[3] = {-1, -1, -1};
  SW_FAILS(sw_layout_extents(l, got, 2), SW_ERROR_VALUE, NULL);
  assert_int_equal(got[0], -1);
  assert_int_equal(got[1], -1);
  SW_OK_(sw_layout_extents(l, got, 3));
  assert_int_equal(got[1], 6);
  sw_layout_release(l);
}

static void retain_release_layout(void** state) {
  (void)state;
  sw_layout_t* l = parse("(2):(1)");
  sw_layout_retain(l);
  sw_layout_release(l);
  assert_int_equal(size_of(l), 2);
  sw_layout_release(l);
  sw_layout_retain(NULL);
  sw_layout_release(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flat_layout),
      cmocka_unit_test(flat_layout_negative_and_zero_strides),
      cmocka_unit_test(dense_is_first_mode_fastest),
      cmocka_unit_test(dense_index_equals_ordinal),
      cmocka_unit_test(rank_zero_layout),
      cmocka_unit_test(empty_layouts),
      cmocka_unit_test(parse_round_trips),
      cmocka_unit_test(parse_normalises_text),
      cmocka_unit_test(to_string_buffer_rules),
      cmocka_unit_test(parse_errors_name_position),
      cmocka_unit_test(nested_tile_index),
      cmocka_unit_test(per_mode_and_per_leaf_coords),
      cmocka_unit_test(out_of_range_coordinates),
      cmocka_unit_test(wrong_coordinate_count),
      cmocka_unit_test(decode_is_colexicographic),
      cmocka_unit_test(encode_ignores_strides),
      cmocka_unit_test(decode_errors),
      cmocka_unit_test(size_and_cosize),
      cmocka_unit_test(cosize_counts_negative_strides_by_magnitude),
      cmocka_unit_test(cosize_overflow_is_value),
      cmocka_unit_test(size_overflow_is_value),
      cmocka_unit_test(negative_extent_is_value),
      cmocka_unit_test(injectivity),
      cmocka_unit_test(layout_equality),
      cmocka_unit_test(group_modes),
      cmocka_unit_test(permute_modes),
      cmocka_unit_test(extents_capacity),
      cmocka_unit_test(retain_release_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
