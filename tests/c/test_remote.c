/* The remote carrier against real redis-server processes of the suite's
 * own, on unix sockets and loopback TCP: values, the header, a
 * TiledEvictable's promote / evict / projection / scatter / prefetch
 * bit-identical with a host secondary, missing and damaged blocks,
 * credentials and transport rules, a server killed or stopped mid-transfer,
 * a connection killed once (the read is sent again) and twice (IO), a
 * server out of memory and a read-only ACL user refusing a dirty eviction,
 * a writer and a reader process sharing a namespace, and a sweep of the
 * fault points at each chunk reply and commit; blocks over two servers
 * with one killed, reconnection backoff, the writer lease, and read
 * replicas taking over from a killed endpoint. Every wait is bounded; a
 * missing redis-server fails the suite. */
#include <pthread.h>
#include <spawn.h>

#include "sw_remote_test.h"

typedef struct fixture_t {
  rs_server_t srv;
  sw_runtime_t* rt;
  const char* eps[1];
} fixture_t;

static int setup(void** state) {
  fixture_t* f = (fixture_t*)calloc(1, sizeof *f);
  rs_start(&f->srv);
  f->eps[0] = f->srv.endpoint;
  SW_OK_(sw_runtime_create(NULL, &f->rt));
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture_t* f = (fixture_t*)*state;
  sw_runtime_release(f->rt);
  rs_stop(&f->srv);
  free(f);
  return 0;
}

static float pattern(size_t i, uint32_t seed) { return (float)((i * 7919u + seed * 104729u) % 100003u) - 50000.0f; }

static void fill(float* v, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
}

/* A remote f32 carrier of n slots in namespace ns, holding pattern(seed). */
static sw_carrier_t* seeded(fixture_t* f, const char* ns, size_t n, size_t block, uint32_t deadline_ms,
                            uint32_t seed) {
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, ns, block);
  d.deadline_ms = deadline_ms;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &c));
  float* v = (float*)malloc(sizeof(float) * n);
  fill(v, n, seed);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  free(v);
  return c;
}

/* A TiledEvictable of `tiles` tiles of T f32 slots: an empty CPU primary and
 * `secondary` (full). */
static sw_carrier_t* tiled_over(fixture_t* f, sw_carrier_t* secondary, int64_t tiles, int64_t T, tt_fix_t* geo) {
  sw_carrier_t* p = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &p));
  const int64_t grid[2] = {1, tiles}, tile[2] = {T, 1};
  sw_carrier_t* te = NULL;
  SW_OK_(sw_tiled_create(p, secondary, grid, tile, 2, NULL, &te));
  sw_carrier_release(p);
  memset(geo, 0, sizeof *geo);
  tt_geometry(geo, 2, grid, tile);
  geo->te = te;
  return te;
}

static sw_tile_set_t* one_tile(int64_t k) {
  const int64_t c[2] = {0, k};
  return tt_set(c, 1, 2);
}

static size_t primary_count(sw_carrier_t* te) {
  sw_tile_set_t* s = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_PRIMARY, &s));
  size_t n = 0;
  SW_OK_(sw_tile_set_count(s, &n));
  sw_tile_set_release(s);
  return n;
}

/* Tile k of the TiledEvictable's full tensor holds pattern(seed) of the
 * carrier's slots k*T.. . */
static void expect_tile_values(sw_carrier_t* te, int64_t k, int64_t T, uint32_t seed) {
  float* v = (float*)malloc(sizeof(float) * (size_t)T);
  SW_OK_(sw_carrier_read(te, (size_t)(k * T), (size_t)T, v));
  for (int64_t w = 0; w < T; ++w)
    if (v[w] != pattern((size_t)(k * T + w), seed))
      fail_msg("tile %lld slot %lld: %g, expected %g", (long long)k, (long long)w, (double)v[w],
               (double)pattern((size_t)(k * T + w), seed));
  free(v);
}

/* ---- values and the header -------------------------------------------- */

static void test_values_and_header(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const size_t n = 1000;
  sw_carrier_t* c = seeded(f, "values", n, 64, 0, 1);
  sw_carrier_kind_t kind;
  SW_OK_(sw_carrier_kind(c, &kind));
  assert_int_equal(kind, SW_CARRIER_REMOTE);
  uint64_t stored = 0;
  SW_OK_(sw_carrier_stored_bytes(c, &stored));
  assert_int_equal(stored, n * sizeof(float));
  float got[1000], want[1000];
  fill(want, n, 1);
  SW_OK_(sw_carrier_read(c, 0, n, got));
  assert_memory_equal(got, want, sizeof got);
  /* Ranges that start and end inside blocks. */
  SW_OK_(sw_carrier_read(c, 37, 100, got));
  assert_memory_equal(got, want + 37, 100 * sizeof(float));
  float part[10];
  for (int i = 0; i < 10; ++i) part[i] = 0.5f + (float)i;
  SW_OK_(sw_carrier_write(c, 60, 10, part)); /* across the boundary of blocks 0 and 1 */
  memcpy(want + 60, part, sizeof part);
  SW_OK_(sw_carrier_read(c, 0, n, got));
  assert_memory_equal(got, want, sizeof got);
  /* The last block is shorter: 1000 = 15 * 64 + 40. */
  rs_reply_t r = RS_CMD(&f->srv, "STRLEN", "values:b:15");
  assert_int_equal(r.integer, 40 * 4);

  /* Opened again, by the header's block size: as a reader; a second
   * writer is refused while c holds the writer lease. */
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "values", 0);
  sw_carrier_t* o = NULL;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &o), SW_ERROR_STATE, "has a writer already");
  d.read_only = true;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &o));
  d.read_only = false;
  SW_OK_(sw_carrier_read(o, 0, n, got));
  assert_memory_equal(got, want, sizeof got);
  sw_carrier_release(o);
  /* Other parameters are refused, naming the field and the server. */
  sw_carrier_t* bad = NULL;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F64, n, &d, &bad), SW_ERROR_VALUE, "dtype");
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n - 1, &d, &bad), SW_ERROR_VALUE, "size");
  d.block_elements = 32;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &bad), SW_ERROR_VALUE, "block_elements");
  d.block_elements = 0;
  d.placement_seed = 7;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &bad), SW_ERROR_VALUE, "placement_seed");
  d.placement_seed = 0;
  const char* two[2] = {f->srv.endpoint, f->srv.endpoint};
  d.endpoints = two;
  d.endpoint_count = 2;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &bad), SW_ERROR_VALUE, "endpoints");
  d = rs_desc(f->eps, 1, "nothing-here", 0);
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &bad), SW_ERROR_IO, f->srv.socket);
  d = rs_desc(f->eps, 1, "values", 64);
  SW_FAILS(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &bad), SW_ERROR_STATE, "already exists");
  assert_null(bad);
  /* Read-only. */
  d.read_only = true;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &o));
  SW_FAILS(sw_carrier_write(o, 0, 1, part), SW_ERROR_STATE, "read-only");
  sw_carrier_release(o);

  /* The carrier made the namespace: disposing it deletes its keys. */
  SW_OK_(sw_carrier_dispose(c));
  sw_carrier_release(c);
  r = RS_CMD(&f->srv, "EXISTS", "values:h", "values:c", "values:b:0", "values:b:15");
  assert_int_equal(r.integer, 0);
}

/* ---- a TiledEvictable, against a host secondary ------------------------- */

enum { G0 = 4, G1 = 3, T0 = 8, T1 = 5 };

/* Runs a fixed sequence of residency calls, projections and a scatter on a
 * TiledEvictable over `secondary` (empty) and returns every value it saw,
 * as bytes, in one buffer of *out_bytes. */
static unsigned char* run_sequence(fixture_t* f, sw_dtype_t dtype, sw_carrier_t* secondary, size_t* out_bytes) {
  const int64_t grid[2] = {G0, G1}, tile[2] = {T0, T1};
  tt_fix_t fx;
  memset(&fx, 0, sizeof fx);
  fx.rt = f->rt;
  fx.dtype = dtype;
  tt_geometry(&fx, 2, grid, tile);
  sw_carrier_t* p = tt_carrier(f->rt, SW_CARRIER_CPU, dtype, (size_t)fx.n);
  tt_fill_tier(p, dtype, fx.ntiles, fx.T, 0.0);
  SW_OK_(sw_tiled_create(p, secondary, grid, tile, 2, NULL, &fx.te));
  sw_carrier_release(p);
  SW_OK_(sw_tiled_full_tensor(fx.te, &fx.full));
  const size_t es = dtype == SW_DTYPE_F64 ? 8 : 4;
  unsigned char* out = (unsigned char*)malloc(es * (size_t)fx.n * 8);
  size_t at = 0;

  /* Dirty evictions (async writes of whole blocks). */
  const int64_t evict_ks[] = {0, 2, 5, 7, 11};
  sw_tile_set_t* set = tt_set_ordinals(&fx, evict_ks, 5);
  SW_OK_(sw_tiled_evict(fx.te, set));
  sw_tile_set_release(set);
  for (size_t i = 0; i < 5; ++i) tt_expect_tile(&fx, evict_ks[i], SW_TILE_SECONDARY, false);
  /* A projection over evicted and resident tiles. */
  const int64_t a0[] = {0, 2, 3}, a1[] = {1, 2};
  sw_tile_selection_t* sel = tt_sel2(a0, 3, a1, 2);
  sw_tensor_t* compact = tt_project(&fx, fx.full, sel, NULL);
  int64_t cn = 0;
  SW_OK_(sw_tensor_numel(compact, &cn));
  SW_OK_(sw_tensor_read(compact, out + at, (size_t)cn * es));
  at += (size_t)cn * es;
  /* A scatter (ADD) into a fresh TiledEvictable of the same tier kinds. */
  sw_tensor_t* result = tt_scatter(&fx, compact, fx.full, sel, SW_SCATTER_ADD);
  sw_carrier_t* rte = tt_carrier_of(result);
  sw_carrier_t* rsec = NULL;
  SW_OK_(sw_tiled_secondary(rte, &rsec));
  sw_carrier_t* tsec = NULL;
  SW_OK_(sw_tiled_secondary(fx.te, &tsec));
  assert_int_equal(tt_kind(rsec), tt_kind(tsec));
  sw_carrier_release(rsec);
  sw_carrier_release(tsec);
  sw_tile_set_t* all_r = NULL;
  SW_OK_(sw_tiled_tiles(rte, SW_TILES_VALID, &all_r));
  SW_OK_(sw_tiled_evict(rte, all_r)); /* the scattered tiles, written to its own secondary */
  sw_tile_set_release(all_r);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(rte, result, sel, NULL, &a));
  sw_tensor_t* again = tt_wait_result(a);
  sw_await_release(a);
  SW_OK_(sw_tensor_read(again, out + at, (size_t)cn * es));
  at += (size_t)cn * es;
  sw_tensor_release(again);
  sw_tensor_release(result);
  sw_carrier_release(rte);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  /* Everything evicted, prefetched in part, promoted, and read whole. */
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(fx.te, SW_TILES_VALID, &all));
  SW_OK_(sw_tiled_evict(fx.te, all));
  assert_int_equal(primary_count(fx.te), 0);
  const int64_t pre[] = {1, 4, 9};
  set = tt_set_ordinals(&fx, pre, 3);
  SW_OK_(sw_tiled_prefetch_async(fx.te, set, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  sw_tile_set_release(set);
  assert_int_equal(primary_count(fx.te), 3);
  SW_OK_(sw_tiled_promote(fx.te, all));
  sw_tile_set_release(all);
  SW_OK_(sw_tensor_read(fx.full, out + at, (size_t)fx.n * es));
  at += (size_t)fx.n * es;
  tt_free(&fx);
  *out_bytes = at;
  return out;
}

static void test_tiled_matches_host(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const sw_dtype_t dtypes[] = {SW_DTYPE_F32, SW_DTYPE_F64};
  for (size_t i = 0; i < 2; ++i) {
    for (size_t chunk = 0; chunk < 2; ++chunk) {
      sw_carrier_t* host = NULL;
      SW_OK_(sw_carrier_create_host(f->rt, dtypes[i], 0, &host));
      size_t nh = 0, nr = 0;
      unsigned char* want = run_sequence(f, dtypes[i], host, &nh);
      sw_carrier_release(host);
      char ns[32];
      snprintf(ns, sizeof ns, "tiled%zu.%zu", i, chunk);
      sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, ns, T0 * T1);
      d.chunk_bytes = chunk ? 24 : 0; /* several GETRANGE / SETRANGE commands a block, or one */
      d.requests_in_flight = chunk ? 3 : 0;
      sw_carrier_t* remote = NULL;
      SW_OK_(sw_carrier_create_remote(f->rt, dtypes[i], 0, &d, &remote));
      unsigned char* got = run_sequence(f, dtypes[i], remote, &nr);
      sw_carrier_release(remote);
      assert_int_equal(nr, nh);
      assert_memory_equal(got, want, nh);
      free(want);
      free(got);
      /* Every namespace the run made (the scatter's too) is deleted with
       * its carrier, which the loop thread may release a moment later. */
      rs_reply_t r = RS_CMD(&f->srv, "DBSIZE");
      for (const double until = rs_now() + 5.0; r.integer != 0 && rs_now() < until; usleep(10000))
        r = RS_CMD(&f->srv, "DBSIZE");
      assert_int_equal(r.integer, 0);
    }
  }
}

/* ---- missing and damaged blocks ---------------------------------------- */

static void test_missing_block(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 256, tiles = 4;
  sw_carrier_t* c = seeded(f, "gone", (size_t)(T * tiles), (size_t)T, 0, 3);
  rs_reply_t r = RS_CMD(&f->srv, "DEL", "gone:b:1");
  assert_int_equal(r.integer, 1);
  float v[256];
  SW_FAILS(sw_carrier_read(c, (size_t)T, (size_t)T, v), SW_ERROR_IO, "block 1 (key 'gone:b:1')");
  SW_FAILS(sw_carrier_read(c, (size_t)T + 3, 5, v), SW_ERROR_IO, f->srv.socket);
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* s1 = one_tile(1);
  SW_FAILS(sw_tiled_promote(te, s1), SW_ERROR_IO, "is missing");
  tt_expect_tile(&geo, 1, SW_TILE_SECONDARY, false);
  assert_int_equal(primary_count(te), 0);
  sw_tile_set_t* s0 = one_tile(0);
  SW_OK_(sw_tiled_promote(te, s0));
  expect_tile_values(te, 0, T, 3);
  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

static void test_damaged_block(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 256, tiles = 4;
  sw_carrier_t* c = seeded(f, "bad", (size_t)(T * tiles), (size_t)T, 0, 4);
  rs_reply_t r = RS_CMD(&f->srv, "SETRANGE", "bad:b:2", "100", "x");
  assert_int_equal(r.integer, T * 4);
  r = RS_CMD(&f->srv, "SET", "bad:b:3", "short");
  assert_int_equal(r.type, '+');
  float v[256];
  SW_FAILS(sw_carrier_read(c, (size_t)(2 * T), (size_t)T, v), SW_ERROR_DATA_CORRUPT, "block 2 (key 'bad:b:2')");
  SW_FAILS(sw_carrier_read(c, (size_t)(3 * T), (size_t)T, v), SW_ERROR_DATA_CORRUPT, "holds 5 bytes");
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* s2 = one_tile(2);
  SW_FAILS(sw_tiled_promote(te, s2), SW_ERROR_DATA_CORRUPT, "CRC-32C");
  tt_expect_tile(&geo, 2, SW_TILE_SECONDARY, false);
  sw_tile_set_t* s3 = one_tile(3);
  SW_FAILS(sw_tiled_promote(te, s3), SW_ERROR_DATA_CORRUPT, "bad:b:3");
  assert_int_equal(primary_count(te), 0);
  sw_tile_set_release(s2);
  sw_tile_set_release(s3);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

/* ---- credentials and transport ------------------------------------------ */

static void test_credentials(void** state) {
  (void)state;
  rs_server_t srv;
  rs_start_ex(&srv, false, "right-horse-battery", false);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  const char* eps[1] = {srv.endpoint};
  char wrong[256], right[256], open_file[256], group_file[256];
  rs_password_file(wrong, sizeof wrong, "wrong-staple", 0600);
  rs_password_file(right, sizeof right, "right-horse-battery", 0600);
  rs_password_file(open_file, sizeof open_file, "right-horse-battery", 0644);
  rs_password_file(group_file, sizeof group_file, "right-horse-battery", 0640);
  sw_remote_carrier_desc_t d = rs_desc(eps, 1, "auth", 128);
  sw_carrier_t* c = NULL;
  /* No password: the server refuses the commands. */
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c), SW_ERROR_IO, "NOAUTH");
  /* A wrong one, never printed. */
  d.password_file = wrong;
  sw_error_t* e = sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  assert_non_null(strstr(sw_error_message(e), "refused the credentials of user 'default'"));
  assert_null(strstr(sw_error_message(e), "wrong-staple"));
  sw_error_free(e);
  /* A password file its group or others may read is refused before use. */
  d.password_file = open_file;
  e = sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_VALUE);
  assert_non_null(strstr(sw_error_message(e), "mode 0644"));
  assert_null(strstr(sw_error_message(e), "right-horse"));
  sw_error_free(e);
  d.password_file = group_file;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c), SW_ERROR_VALUE, "mode 0640");
  d.user = "someone";
  d.password_file = NULL;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c), SW_ERROR_VALUE, "password_file");
  d.user = NULL;
  /* The right one: blocking and asynchronous connections authenticate. */
  d.password_file = right;
  SW_OK_(sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &d, &c));
  float v[512];
  fill(v, 512, 9);
  SW_OK_(sw_carrier_write(c, 0, 512, v));
  fixture_t fx;
  memset(&fx, 0, sizeof fx);
  fx.rt = rt;
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(&fx, c, 4, 128, &geo);
  sw_tile_set_t* s = one_tile(2);
  SW_OK_(sw_tiled_promote(te, s));
  expect_tile_values(te, 2, 128, 9);
  sw_tile_set_release(s);
  sw_carrier_release(te);
  sw_carrier_release(c);
  /* An ACL user with read-only rights reads, and its writes fail IO. */
  rs_reply_t r = RS_CMD(&srv, "ACL", "SETUSER", "reader", "on", ">reader-pass", "~*", "+@read", "+auth", "+ping");
  assert_int_equal(r.type, '+');
  char reader[256];
  rs_password_file(reader, sizeof reader, "reader-pass", 0400);
  sw_remote_carrier_desc_t w = rs_desc(eps, 1, "auth2", 128);
  w.password_file = right;
  SW_OK_(sw_carrier_create_remote(rt, SW_DTYPE_F32, 512, &w, &c));
  SW_OK_(sw_carrier_write(c, 0, 512, v));
  sw_remote_carrier_desc_t ro = rs_desc(eps, 1, "auth2", 0);
  ro.user = "reader";
  ro.password_file = reader;
  sw_carrier_t* o = NULL;
  /* As a writer it cannot take the writer lease; as a reader it reads. */
  SW_FAILS(sw_carrier_open_remote(rt, SW_DTYPE_F32, 512, &ro, &o), SW_ERROR_IO, "NOPERM");
  ro.read_only = true;
  SW_OK_(sw_carrier_open_remote(rt, SW_DTYPE_F32, 512, &ro, &o));
  float back[512];
  SW_OK_(sw_carrier_read(o, 0, 512, back));
  assert_memory_equal(back, v, sizeof v);
  sw_carrier_release(o);
  sw_carrier_release(c);
  rs_password_file_remove(reader);
  rs_password_file_remove(wrong);
  rs_password_file_remove(right);
  rs_password_file_remove(open_file);
  rs_password_file_remove(group_file);
  sw_runtime_release(rt);
  rs_stop(&srv);
}

static void test_transport_rules(void** state) {
  (void)state;
  rs_server_t srv;
  rs_start_ex(&srv, true, NULL, false);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  sw_carrier_t* c = NULL;
  const char* plain[1] = {"redis://10.1.2.3:6379"};
  sw_remote_carrier_desc_t d = rs_desc(plain, 1, "t", 64);
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_VALUE, "not a loopback address");
  const char* named[1] = {"redis://example.org"};
  d.endpoints = named;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_VALUE, "allow_plaintext");
  const char* tls[1] = {"rediss://127.0.0.1:6380"};
  d.endpoints = tls;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_UNSUPPORTED, "TLS");
  const char* other[1] = {"http://127.0.0.1"};
  d.endpoints = other;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_VALUE, "unix:///path");
  const char* relative[1] = {"unix://relative.sock"};
  d.endpoints = relative;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_VALUE, "absolute");
  d.endpoints = NULL;
  d.endpoint_count = 0;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, &d, &c), SW_ERROR_VALUE, "endpoint_count");
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, 64, NULL, &c), SW_ERROR_VALUE, "desc");
  assert_null(c);
  /* Loopback TCP is allowed by default, and works (blocking and async). */
  const char* tcp[1] = {srv.tcp};
  d = rs_desc(tcp, 1, "tcp", 100);
  SW_OK_(sw_carrier_create_remote(rt, SW_DTYPE_F32, 400, &d, &c));
  float v[400], back[400];
  fill(v, 400, 5);
  SW_OK_(sw_carrier_write(c, 0, 400, v));
  SW_OK_(sw_carrier_read(c, 0, 400, back));
  assert_memory_equal(back, v, sizeof v);
  fixture_t fx;
  memset(&fx, 0, sizeof fx);
  fx.rt = rt;
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(&fx, c, 4, 100, &geo);
  sw_tile_set_t* s = one_tile(3);
  SW_OK_(sw_tiled_promote(te, s));
  expect_tile_values(te, 3, 100, 5);
  sw_tile_set_release(s);
  sw_carrier_release(te);
  sw_carrier_release(c);
  sw_runtime_release(rt);
  rs_stop(&srv);
}

/* ---- servers that die or stall ------------------------------------------- */

static void test_kill9_during_promote(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 262144, tiles = 4; /* 1 MiB tiles */
  sw_carrier_t* c = seeded(f, "killed", (size_t)(T * tiles), (size_t)T, 0, 6);
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  /* Stopped, so the transfer is surely in flight when the server dies. */
  kill(f->srv.pid, SIGSTOP);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_promote_async(te, all, &a));
  usleep(100000);
  const double t0 = rs_now();
  rs_kill9(&f->srv);
  SW_FAILS(sw_await_wait(a, 10000000000LL), SW_ERROR_IO, f->srv.socket);
  assert_true(rs_now() - t0 < 5.0); /* within the deadline */
  sw_await_release(a);
  assert_int_equal(primary_count(te), 0);
  for (int64_t k = 0; k < tiles; ++k) tt_expect_tile(&geo, k, SW_TILE_SECONDARY, false);
  /* Restarted empty and seeded again: the same carrier reconnects. */
  rs_start_ex(&f->srv, false, NULL, true);
  sw_carrier_t* again = seeded(f, "killed", (size_t)(T * tiles), (size_t)T, 0, 6);
  SW_OK_(sw_tiled_promote(te, all));
  assert_int_equal(primary_count(te), (size_t)tiles);
  for (int64_t k = 0; k < tiles; ++k) expect_tile_values(te, k, T, 6);
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(c);
  sw_carrier_release(again);
}

static void test_stopped_server_times_out(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 1024, tiles = 4;
  sw_carrier_t* c = seeded(f, "stalled", (size_t)(T * tiles), (size_t)T, 300, 7);
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* s0 = one_tile(0);
  SW_OK_(sw_tiled_promote(te, s0)); /* connected before the stall */
  sw_tile_set_t* s1 = one_tile(1);
  kill(f->srv.pid, SIGSTOP);
  double t0 = rs_now();
  SW_FAILS(sw_tiled_promote(te, s1), SW_ERROR_TIMEOUT, "within 300 ms");
  const double took = rs_now() - t0;
  assert_true(took >= 0.25 && took < 4.0);
  tt_expect_tile(&geo, 1, SW_TILE_SECONDARY, false);
  /* A dirty eviction that times out keeps the tile resident and dirty. */
  float v[1024];
  for (int i = 0; i < 1024; ++i) v[i] = -1.0f - (float)i;
  /* (The update goes through the carrier's public write, which needs no server.) */
  SW_OK_(sw_carrier_write(te, 0, (size_t)T, v));
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);
  SW_FAILS(sw_tiled_evict(te, s0), SW_ERROR_TIMEOUT, "stalled");
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);
  float back[1024];
  SW_OK_(sw_carrier_read(te, 0, (size_t)T, back));
  assert_memory_equal(back, v, sizeof v);
  kill(f->srv.pid, SIGCONT);
  /* The stored block was not touched by the failed eviction. */
  rs_reply_t r = RS_CMD(&f->srv, "EXISTS", "stalled:b:0");
  assert_int_equal(r.integer, 1);
  /* Recovered: the next requests reconnect. */
  SW_OK_(sw_tiled_promote(te, s1));
  expect_tile_values(te, 1, T, 7);
  SW_OK_(sw_tiled_evict(te, s0));
  tt_expect_tile(&geo, 0, SW_TILE_SECONDARY, false);
  SW_OK_(sw_tiled_promote(te, s0));
  SW_OK_(sw_carrier_read(te, 0, (size_t)T, back));
  assert_memory_equal(back, v, sizeof v);
  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

/* CLIENT PAUSE ALL holds back every command, CLIENT KILL's too, and runs
 * them in arrival order once it ends, writing no reply before all of them
 * ran: a kill sent after a promotion's commands closes its connection
 * before any of their replies leaves the server. */
static void test_client_kill_retried(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 65536, tiles = 3; /* 256 KiB tiles */
  sw_carrier_t* c = seeded(f, "ckill", (size_t)(T * tiles), (size_t)T, 0, 8);
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* s0 = one_tile(0);
  SW_OK_(sw_tiled_promote(te, s0)); /* the asynchronous connection is made */
  const int k = rs_connect(&f->srv);
  assert_true(k >= 0);
  const long long connections = rs_info_number(&f->srv, "stats", "total_connections_received");

  /* One kill: the read is sent again on a fresh connection and succeeds. */
  RS_SEND(k, "CLIENT", "PAUSE", "400", "ALL");
  assert_int_equal(rs_reply(k).type, '+');
  sw_tile_set_t* s1 = one_tile(1);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_promote_async(te, s1, &a));
  usleep(100000);
  RS_SEND(k, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
  SW_OK_(sw_await_wait(a, 10000000000LL));
  sw_await_release(a);
  assert_true(rs_reply(k).integer >= 1);
  tt_expect_tile(&geo, 1, SW_TILE_PRIMARY, false);
  expect_tile_values(te, 1, T, 8);
  assert_true(rs_info_number(&f->srv, "stats", "total_connections_received") > connections);

  /* A second kill, of the fresh connection, while the read runs again on
   * it: the promotion fails IO, naming the block and the server, and leaves
   * the tile where it was. */
  RS_SEND(k, "CLIENT", "PAUSE", "400", "ALL");
  assert_int_equal(rs_reply(k).type, '+');
  sw_tile_set_t* s2 = one_tile(2);
  SW_OK_(sw_tiled_promote_async(te, s2, &a));
  usleep(100000);
  RS_SEND(k, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
  RS_SEND(k, "CLIENT", "PAUSE", "400", "ALL");
  RS_SEND(k, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
  sw_error_t* e = sw_await_wait(a, 10000000000LL);
  sw_await_release(a);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  const char* m = sw_error_message(e);
  if (!strstr(m, "block 2 (key 'ckill:b:2')") || !strstr(m, f->srv.socket) || !strstr(m, "again on a fresh connection"))
    fail_msg("unexpected message: %s", m);
  sw_error_free(e);
  assert_true(rs_reply(k).integer >= 1);
  assert_int_equal(rs_reply(k).type, '+');
  assert_true(rs_reply(k).integer >= 1);
  close(k);
  tt_expect_tile(&geo, 2, SW_TILE_SECONDARY, false);
  assert_int_equal(primary_count(te), 2);
  /* The next promotion connects again. */
  SW_OK_(sw_tiled_promote(te, s2));
  expect_tile_values(te, 2, T, 8);
  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  sw_tile_set_release(s2);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

/* The blocking path reads again on a fresh connection too. */
typedef struct blocking_read_t {
  sw_carrier_t* c;
  float* v;
  size_t first, count;
  sw_error_t* e;
} blocking_read_t;

static void* blocking_read(void* arg) {
  blocking_read_t* r = (blocking_read_t*)arg;
  r->e = sw_carrier_read(r->c, r->first, r->count, r->v);
  return NULL;
}

static void test_client_kill_blocking_read(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const size_t T = 65536, n = 2 * T;
  sw_carrier_t* c = seeded(f, "bkill", n, T, 0, 10);
  float* v = (float*)malloc(sizeof(float) * n);
  SW_OK_(sw_carrier_read(c, 0, n, v)); /* a pooled connection */
  const int k = rs_connect(&f->srv);
  assert_true(k >= 0);
  RS_SEND(k, "CLIENT", "PAUSE", "400", "ALL");
  assert_int_equal(rs_reply(k).type, '+');
  memset(v, 0, sizeof(float) * n);
  blocking_read_t r = {c, v, 0, n, NULL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, blocking_read, &r), 0);
  usleep(100000);
  RS_SEND(k, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
  pthread_join(t, NULL);
  SW_OK_(r.e);
  assert_true(rs_reply(k).integer >= 1);
  close(k);
  for (size_t i = 0; i < n; ++i)
    if (v[i] != pattern(i, 10)) fail_msg("slot %zu: %g, expected %g", i, (double)v[i], (double)pattern(i, 10));
  free(v);
  sw_carrier_release(c);
}

/* ---- refusals of a write: out of memory, an ACL ------------------------- */

/* A carrier opened over namespace `ns` of `srv` (blocking reads), holding
 * pattern(seed) in slots first..first+count? */
static void expect_stored(sw_runtime_t* rt, const char* const* eps, const char* ns, size_t n, size_t first,
                          size_t count, uint32_t seed) {
  sw_remote_carrier_desc_t d = rs_desc(eps, 1, ns, 0);
  d.read_only = true;
  sw_carrier_t* o = NULL;
  SW_OK_(sw_carrier_open_remote(rt, SW_DTYPE_F32, n, &d, &o));
  float* v = (float*)malloc(sizeof(float) * count);
  SW_OK_(sw_carrier_read(o, first, count, v));
  for (size_t i = 0; i < count; ++i)
    if (v[i] != pattern(first + i, seed))
      fail_msg("stored slot %zu: %g, expected %g", first + i, (double)v[i], (double)pattern(first + i, seed));
  free(v);
  sw_carrier_release(o);
}

/* Writes pattern(seed) into tile k of a TiledEvictable: the tile is then
 * resident and dirty. */
static void dirty_tile(sw_carrier_t* te, int64_t k, int64_t T, uint32_t seed) {
  float* v = (float*)malloc(sizeof(float) * (size_t)T);
  for (int64_t w = 0; w < T; ++w) v[w] = pattern((size_t)(k * T + w), seed);
  SW_OK_(sw_carrier_write(te, (size_t)(k * T), (size_t)T, v));
  free(v);
}

/* `in_flight` 4: the chunks, then the commit; 16: the block's whole
 * transaction at once, which the server refuses while queuing it. */
static void out_of_memory(fixture_t* f, const char* ns, uint32_t in_flight) {
  const int64_t T = 65536, tiles = 2; /* 256 KiB tiles */
  const size_t n = (size_t)(T * tiles);
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, ns, (size_t)T);
  d.chunk_bytes = 16384; /* the server runs out part way through a block */
  d.requests_in_flight = in_flight;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &c));
  float* v = (float*)malloc(sizeof(float) * n);
  fill(v, n, 11);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  free(v);
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);
  sw_tile_set_t* s0 = one_tile(0);
  SW_OK_(sw_tiled_promote(te, s0));
  dirty_tile(te, 0, T, 12);
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);

  /* Room for a quarter of the block. */
  char limit[32];
  snprintf(limit, sizeof limit, "%lld", rs_info_number(&f->srv, "memory", "used_memory") + 65536);
  rs_reply_t r = RS_CMD(&f->srv, "CONFIG", "SET", "maxmemory", limit);
  assert_int_equal(r.type, '+');
  sw_error_t* e = sw_tiled_evict(te, s0);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  const char* m = sw_error_message(e);
  char key[64];
  snprintf(key, sizeof key, "block 0 (key '%s:b:0')", ns);
  if (!strstr(m, "OOM") || !strstr(m, key) || !strstr(m, f->srv.socket))
    fail_msg("unexpected message: %s", m);
  sw_error_free(e);
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);
  expect_tile_values(te, 0, T, 12);
  expect_stored(f->rt, f->eps, ns, n, 0, (size_t)T, 11); /* the stored block is the old one */

  /* Room again: the same eviction commits. */
  r = RS_CMD(&f->srv, "CONFIG", "SET", "maxmemory", "0");
  assert_int_equal(r.type, '+');
  SW_OK_(sw_tiled_evict(te, s0));
  tt_expect_tile(&geo, 0, SW_TILE_SECONDARY, false);
  expect_stored(f->rt, f->eps, ns, n, 0, (size_t)T, 12);
  SW_OK_(sw_tiled_promote(te, s0));
  expect_tile_values(te, 0, T, 12);
  sw_tile_set_release(s0);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

static void test_out_of_memory(void** state) {
  fixture_t* f = (fixture_t*)*state;
  out_of_memory(f, "oom4", 4);
  out_of_memory(f, "oom16", 16);
}

/* The least-privilege users of docs/remote-tier.md, for namespace acl. */
static void test_read_only_acl(void** state) {
  fixture_t* f = (fixture_t*)*state;
  rs_reply_t r = RS_CMD(&f->srv, "ACL", "SETUSER", "acl-writer", "on", ">writer-pass", "resetkeys", "~acl:*",
                        "resetchannels", "-@all", "+exists", "+hgetall", "+hget", "+strlen", "+getrange", "+hset",
                        "+del", "+unlink", "+set", "+setrange", "+multi", "+exec", "+rename", "+get", "+watch",
                        "+unwatch", "+pexpire", "+pttl");
  assert_int_equal(r.type, '+');
  r = RS_CMD(&f->srv, "ACL", "SETUSER", "acl-reader", "on", ">reader-pass", "resetkeys", "~acl:*", "resetchannels",
             "-@all", "+hgetall", "+hget", "+strlen", "+getrange");
  assert_int_equal(r.type, '+');
  char writer_pw[256], reader_pw[256];
  rs_password_file(writer_pw, sizeof writer_pw, "writer-pass", 0600);
  rs_password_file(reader_pw, sizeof reader_pw, "reader-pass", 0600);
  const int64_t T = 1024, tiles = 3;
  const size_t n = (size_t)(T * tiles);

  /* The writer makes the namespace, writes it, evicts into it. */
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "acl", (size_t)T);
  d.user = "acl-writer";
  d.password_file = writer_pw;
  sw_carrier_t* w = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &w));
  float v[3072];
  fill(v, n, 13);
  SW_OK_(sw_carrier_write(w, 0, n, v));
  tt_fix_t wgeo;
  sw_carrier_t* wte = tiled_over(f, w, tiles, T, &wgeo);
  sw_tile_set_t* s1 = one_tile(1);
  SW_OK_(sw_tiled_promote(wte, s1));
  dirty_tile(wte, 1, T, 14);
  SW_OK_(sw_tiled_evict(wte, s1));
  tt_expect_tile(&wgeo, 1, SW_TILE_SECONDARY, false);
  /* Out of its keys, it is refused. */
  sw_remote_carrier_desc_t other = d;
  other.key_namespace = "elsewhere";
  sw_carrier_t* x = NULL;
  SW_FAILS(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &other, &x), SW_ERROR_IO, "NOPERM");

  /* The reader cannot take the writer lease. */
  sw_remote_carrier_desc_t rd = rs_desc(f->eps, 1, "acl", 0);
  rd.user = "acl-reader";
  rd.password_file = reader_pw;
  sw_carrier_t* rc = NULL;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &rd, &rc), SW_ERROR_IO, "NOPERM");
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &rd, &rc), SW_ERROR_IO, "writer lease 'acl:w'");
  /* A dirty eviction the server refuses (the writer's SETRANGE right taken
   * back): the tile stays resident and dirty, the stored block whole; with
   * the right back, evicting again commits it. */
  r = RS_CMD(&f->srv, "ACL", "SETUSER", "acl-writer", "-setrange");
  assert_int_equal(r.type, '+');
  sw_tile_set_t* s0 = one_tile(0);
  SW_OK_(sw_tiled_promote(wte, s0));
  expect_tile_values(wte, 0, T, 13);
  dirty_tile(wte, 0, T, 15);
  sw_error_t* e = sw_tiled_evict(wte, s0);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  const char* m = sw_error_message(e);
  if (!strstr(m, "NOPERM") || !strstr(m, "block 0 (key 'acl:b:0')") || !strstr(m, f->srv.socket))
    fail_msg("unexpected message: %s", m);
  sw_error_free(e);
  tt_expect_tile(&wgeo, 0, SW_TILE_PRIMARY, true);
  expect_tile_values(wte, 0, T, 15);
  expect_stored(f->rt, f->eps, "acl", n, 0, (size_t)T, 13);
  r = RS_CMD(&f->srv, "ACL", "SETUSER", "acl-writer", "+setrange");
  assert_int_equal(r.type, '+');
  SW_OK_(sw_tiled_evict(wte, s0));
  tt_expect_tile(&wgeo, 0, SW_TILE_SECONDARY, false);
  expect_stored(f->rt, f->eps, "acl", n, 0, (size_t)T, 15);
  tt_fix_t geo;
  sw_carrier_t* te = NULL;
  /* Opened read-only, the library refuses a dirty eviction first. */
  rd.read_only = true;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &rd, &rc));
  te = tiled_over(f, rc, tiles, T, &geo);
  SW_OK_(sw_tiled_promote(te, s0));
  dirty_tile(te, 0, T, 15);
  SW_FAILS(sw_tiled_evict(te, s0), SW_ERROR_STATE, "read-only");
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);
  sw_carrier_release(te);
  sw_carrier_release(rc);

  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  sw_carrier_release(wte);
  sw_carrier_release(w); /* the writer deletes the keys (UNLINK), perhaps a moment later on the loop thread */
  r = RS_CMD(&f->srv, "EXISTS", "acl:h", "acl:c", "acl:b:0", "acl:w");
  for (const double until = rs_now() + 5.0; r.integer != 0 && rs_now() < until; usleep(10000))
    r = RS_CMD(&f->srv, "EXISTS", "acl:h", "acl:c", "acl:b:0", "acl:w");
  assert_int_equal(r.integer, 0);
  rs_password_file_remove(writer_pw);
  rs_password_file_remove(reader_pw);
}

/* ---- a writer and a reader of one namespace ----------------------------- */

/* Version `ver` of tile k, slot w: every slot tells the tile and the version. */
#define SHARED_TILES 3
#define SHARED_T 16384 /* 64 KiB blocks, read in 16 chunks */
#define SHARED_VERSIONS 4000 /* (4000 * 4 + k) * 1024 + 1023 < 2^24: exact in f32 */
static float shared_value(int64_t k, int64_t ver, int64_t w) {
  return (float)(((ver * 4 + k) * 1024) + (w & 1023));
}

/* The reader, in a process of its own (this program with --shared-reader
 * SOCKET NAMESPACE): opens the namespace read-only and reads its blocks again
 * and again, through a TiledEvictable and with blocking reads, until the
 * writer sets NAMESPACE-test:done. Every read must be one whole version of
 * its tile, at least the version the writer had committed before the read
 * began. Reports its count of reads and of versions seen in
 * NAMESPACE-test:reads and :seen; exits 0, or 1 with a message. */
static int shared_reader(const char* socket_path, const char* ns) {
  rs_server_t srv;
  memset(&srv, 0, sizeof srv);
  rs_copy(srv.socket, sizeof srv.socket, socket_path);
  snprintf(srv.endpoint, sizeof srv.endpoint, "unix://%s", socket_path);
  const char* eps[1] = {srv.endpoint};
  sw_runtime_t* rt = NULL;
  sw_error_t* e = sw_runtime_create(NULL, &rt);
  sw_carrier_t *c = NULL, *p = NULL, *te = NULL;
  sw_remote_carrier_desc_t d = rs_desc(eps, 1, ns, 0);
  d.read_only = true;
  d.chunk_bytes = 4096;
  if (!e) e = sw_carrier_open_remote(rt, SW_DTYPE_F32, SHARED_TILES * SHARED_T, &d, &c);
  if (!e) e = sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p);
  const int64_t grid[2] = {1, SHARED_TILES}, tile[2] = {SHARED_T, 1};
  if (!e) e = sw_tiled_create(p, c, grid, tile, 2, NULL, &te);
  if (e) {
    fprintf(stderr, "reader: %s\n", sw_error_message(e));
    return 1;
  }
  char key[128], done_key[128];
  snprintf(done_key, sizeof done_key, "%s-test:done", ns);
  snprintf(key, sizeof key, "%s-test:started", ns);
  rs_cmdv(&srv, 3, (const char*[]){"SET", key, "1"});
  static float v[SHARED_T];
  long long reads = 0, seen = 0, last[SHARED_TILES] = {0};
  const double until = rs_now() + 60.0;
  int status = 0;
  while (status == 0 && rs_now() < until) {
    rs_reply_t done = rs_cmdv(&srv, 2, (const char*[]){"GET", done_key});
    if (!done.nil) break;
    for (int64_t k = 0; k < SHARED_TILES && status == 0; ++k) {
      snprintf(key, sizeof key, "%s-test:committed:%lld", ns, (long long)k);
      const long long committed = atoll(rs_cmdv(&srv, 2, (const char*[]){"GET", key}).text);
      const bool tiled = (reads & 1) == 0;
      if (tiled) {
        const int64_t coord[2] = {0, k};
        sw_tile_set_t* s = NULL;
        e = sw_tile_set_create(coord, 1, 2, &s);
        if (!e) e = sw_tiled_promote(te, s);
        if (!e) e = sw_carrier_read(te, (size_t)(k * SHARED_T), SHARED_T, v);
        if (!e) e = sw_tiled_evict(te, s); /* clean: dropped */
        sw_tile_set_release(s);
      } else {
        e = sw_carrier_read(c, (size_t)(k * SHARED_T), SHARED_T, v);
      }
      if (e) {
        fprintf(stderr, "reader: %s read of tile %lld: %s: %s\n", tiled ? "tiled" : "blocking", (long long)k,
                sw_error_code_name(sw_error_code(e)), sw_error_message(e));
        sw_error_free(e);
        status = 1;
        break;
      }
      ++reads;
      const long long ver = (long long)v[0] / 1024 / 4;
      for (int64_t w = 0; w < SHARED_T; ++w)
        if (v[w] != shared_value(k, ver, w)) {
          fprintf(stderr, "reader: tile %lld slot %lld holds %g, not version %lld's %g: a mixed read\n", (long long)k,
                  (long long)w, (double)v[w], ver, (double)shared_value(k, ver, w));
          status = 1;
          break;
        }
      if (status == 0 && ver < committed) {
        fprintf(stderr, "reader: tile %lld read (%s, read %lld) as version %lld after version %lld was committed\n",
                (long long)k, tiled ? "through the TiledEvictable" : "blocking", reads, ver, committed);
        status = 1;
      }
      if (ver != last[k]) ++seen;
      last[k] = ver;
    }
  }
  char number[32];
  snprintf(key, sizeof key, "%s-test:reads", ns);
  snprintf(number, sizeof number, "%lld", reads);
  rs_cmdv(&srv, 3, (const char*[]){"SET", key, number});
  snprintf(key, sizeof key, "%s-test:seen", ns);
  snprintf(number, sizeof number, "%lld", seen);
  rs_cmdv(&srv, 3, (const char*[]){"SET", key, number});
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(c);
  sw_runtime_release(rt);
  return status;
}

static void test_writer_and_reader(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = SHARED_T, tiles = SHARED_TILES;
  const size_t n = (size_t)(T * tiles);
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "shared", (size_t)T);
  d.chunk_bytes = 4096;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &c));
  float* v = (float*)malloc(sizeof(float) * n);
  for (int64_t k = 0; k < tiles; ++k)
    for (int64_t w = 0; w < T; ++w) v[k * T + w] = shared_value(k, 0, w);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  char key[64], number[32];
  for (int64_t k = 0; k < tiles; ++k) {
    snprintf(key, sizeof key, "shared-test:committed:%lld", (long long)k);
    RS_CMD(&f->srv, "SET", key, "0");
  }
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, tiles, T, &geo);

  char self[512];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  pid_t reader;
  char* argv[] = {self, (char*)"--shared-reader", f->srv.socket, (char*)"shared", NULL};
  extern char** environ;
  assert_int_equal(posix_spawn(&reader, self, NULL, NULL, argv, environ), 0);

  /* Once the reader reads: new versions of every tile for two seconds, each
   * committed by a dirty eviction, with a pause of 2 ms after each version.
   * A block replaced during each of its reader's nine reads is refused
   * (SW_ERROR_IO, docs/remote-tier.md); without the pause, a writer that
   * keeps both CPUs busy (under ThreadSanitizer, beside another suite) could
   * starve the reader into that refusal. */
  for (const double until = rs_now() + 30.0; RS_CMD(&f->srv, "GET", "shared-test:started").nil; usleep(10000)) {
    int status;
    if (waitpid(reader, &status, WNOHANG) == reader) fail_msg("the reader ended before it started reading");
    if (rs_now() > until) fail_msg("the reader did not start within 30 s");
  }
  int64_t ver = 1;
  for (const double until = rs_now() + 2.0; rs_now() < until && ver < SHARED_VERSIONS; ++ver) {
    for (int64_t k = 0; k < tiles; ++k) {
      for (int64_t w = 0; w < T; ++w) v[w] = shared_value(k, ver, w);
      SW_OK_(sw_carrier_write(te, (size_t)(k * T), (size_t)T, v));
      sw_tile_set_t* s = one_tile(k);
      SW_OK_(sw_tiled_evict(te, s));
      sw_tile_set_release(s);
      snprintf(key, sizeof key, "shared-test:committed:%lld", (long long)k);
      snprintf(number, sizeof number, "%lld", (long long)ver);
      RS_CMD(&f->srv, "SET", key, number);
    }
    usleep(2000);
  }
  free(v);
  RS_CMD(&f->srv, "SET", "shared-test:done", "1");
  int status = 0;
  const double until = rs_now() + 30.0;
  while (waitpid(reader, &status, WNOHANG) == 0) {
    if (rs_now() > until) {
      kill(reader, SIGKILL);
      waitpid(reader, &status, 0);
      fail_msg("the reader did not finish within 30 s");
    }
    usleep(10000);
  }
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  const long long reads = atoll(RS_CMD(&f->srv, "GET", "shared-test:reads").text);
  const long long seen = atoll(RS_CMD(&f->srv, "GET", "shared-test:seen").text);
  print_message("writer committed %lld versions of %lld tiles; the reader read %lld blocks, %lld of them new\n",
                (long long)(ver - 1), (long long)tiles, reads, seen);
  assert_true(reads >= 100);
  assert_true(seen >= 10);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

/* ---- a fault at each chunk reply and at the commit ------------------------ */

/* The remote tier's fault points, swept: each GETRANGE reply of a promotion
 * (SW_FAULT_READ), and each SETRANGE reply, the commit that joins a block's
 * chunks, a transaction sent in part and the commit's reply of a dirty
 * eviction (SW_FAULT_WRITE). For
 * every n the step reaches, the n-th point fails: the step fails IO
 * ("injected"), exactly one fault was injected, a failed promotion left
 * nothing resident, a failed eviction left every tile resident and dirty
 * with its values and every stored block whole (the old or the new one,
 * its CRC checked); the step then succeeds and the values are right. */
#define SWEEP_TILES 3
#define SWEEP_T 64 /* 256-byte blocks in 4 chunks */

static void sweep_expect_stored_whole(fixture_t* f, const char* ns, int64_t k, uint32_t old_seed, uint32_t new_seed) {
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, ns, 0);
  d.read_only = true;
  sw_carrier_t* o = NULL;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, SWEEP_TILES * SWEEP_T, &d, &o));
  float v[SWEEP_T];
  SW_OK_(sw_carrier_read(o, (size_t)(k * SWEEP_T), SWEEP_T, v)); /* its CRC checked */
  sw_carrier_release(o);
  bool is_old = true, is_new = true;
  for (int64_t w = 0; w < SWEEP_T; ++w) {
    is_old = is_old && v[w] == pattern((size_t)(k * SWEEP_T + w), old_seed);
    is_new = is_new && v[w] == pattern((size_t)(k * SWEEP_T + w), new_seed);
  }
  if (!is_old && !is_new) fail_msg("stored block %lld is neither the old nor the new one", (long long)k);
}

/* `in_flight` 2: a block's chunks go out as replies free room, and its
 * commit after them; 4: the whole transaction at once. */
static void fault_sweep(fixture_t* f, const char* ns, uint32_t in_flight) {
  const size_t n = SWEEP_TILES * SWEEP_T;
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, ns, SWEEP_T);
  d.chunk_bytes = 64;
  d.requests_in_flight = in_flight;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &c));
  float v[SWEEP_TILES * SWEEP_T];
  fill(v, n, 1);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, SWEEP_TILES, SWEEP_T, &geo);
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  uint64_t reached = 0, injected = 0, before = 0;

  /* Promotions: a fault at each chunk reply. */
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, UINT64_MAX));
  SW_OK_(sw_tiled_promote(te, all));
  SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_READ, &reached, &before));
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, 0));
  assert_int_equal(reached, SWEEP_TILES * 4);
  SW_OK_(sw_tiled_evict(te, all)); /* clean: dropped */
  uint32_t seed = 1;
  for (uint64_t nth = 1; nth <= reached; ++nth) {
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, nth));
    sw_error_t* e = sw_tiled_promote(te, all);
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, 0));
    SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_READ, NULL, &injected));
    assert_int_equal(injected, before + 1);
    before = injected;
    assert_non_null(e);
    assert_int_equal(sw_error_code(e), SW_ERROR_IO);
    if (!strstr(sw_error_message(e), "injected read failure: remote read of a chunk"))
      fail_msg("read fault %llu: %s", (unsigned long long)nth, sw_error_message(e));
    sw_error_free(e);
    assert_int_equal(primary_count(te), 0);
    for (int64_t k = 0; k < SWEEP_TILES; ++k) tt_expect_tile(&geo, k, SW_TILE_SECONDARY, false);
    SW_OK_(sw_tiled_promote(te, all));
    for (int64_t k = 0; k < SWEEP_TILES; ++k) expect_tile_values(te, k, SWEEP_T, seed);
    SW_OK_(sw_tiled_evict(te, all));
  }
  print_message("remote read faults, %u in flight: %llu points\n", in_flight, (unsigned long long)reached);

  /* Dirty evictions: a fault at each chunk reply, each commit and each
   * commit's reply. */
  SW_OK_(sw_tiled_promote(te, all));
  for (int64_t k = 0; k < SWEEP_TILES; ++k) dirty_tile(te, k, SWEEP_T, ++seed);
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, UINT64_MAX));
  SW_OK_(sw_tiled_evict(te, all));
  SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_WRITE, &reached, &before));
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 0));
  /* Per block: each chunk's reply, the commit, the commit's reply; in one
   * transaction also the point where it is sent in part (the connection is
   * then dropped, which discards it). */
  assert_int_equal(reached, SWEEP_TILES * (4 + (in_flight >= 4 ? 3 : 2)));
  uint32_t stored[SWEEP_TILES];
  for (int64_t k = 0; k < SWEEP_TILES; ++k) stored[k] = seed - (uint32_t)(SWEEP_TILES - 1 - k);
  SW_OK_(sw_tiled_promote(te, all));
  for (uint64_t nth = 1; nth <= reached; ++nth) {
    uint32_t next[SWEEP_TILES];
    for (int64_t k = 0; k < SWEEP_TILES; ++k) {
      next[k] = ++seed;
      dirty_tile(te, k, SWEEP_T, next[k]);
    }
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, nth));
    sw_error_t* e = sw_tiled_evict(te, all);
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 0));
    SW_OK_(sw_testing_fault_counts(f->rt, SW_FAULT_WRITE, NULL, &injected));
    assert_int_equal(injected, before + 1);
    before = injected;
    assert_non_null(e);
    assert_int_equal(sw_error_code(e), SW_ERROR_IO);
    if (!strstr(sw_error_message(e), "injected write failure: remote"))
      fail_msg("write fault %llu: %s", (unsigned long long)nth, sw_error_message(e));
    sw_error_free(e);
    for (int64_t k = 0; k < SWEEP_TILES; ++k) {
      tt_expect_tile(&geo, k, SW_TILE_PRIMARY, true);
      expect_tile_values(te, k, SWEEP_T, next[k]);
      sweep_expect_stored_whole(f, ns, k, stored[k], next[k]);
    }
    SW_OK_(sw_tiled_evict(te, all));
    for (int64_t k = 0; k < SWEEP_TILES; ++k) {
      tt_expect_tile(&geo, k, SW_TILE_SECONDARY, false);
      stored[k] = next[k];
    }
    expect_stored(f->rt, f->eps, ns, n, 0, SWEEP_T, stored[0]);
    SW_OK_(sw_tiled_promote(te, all));
    for (int64_t k = 0; k < SWEEP_TILES; ++k) expect_tile_values(te, k, SWEEP_T, stored[k]);
  }
  print_message("remote write faults, %u in flight: %llu points\n", in_flight, (unsigned long long)reached);
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

/* A block's transaction sent in part (a command after MULTI not sent): the
 * eviction fails, the connection is dropped, so the server discards the
 * open transaction and the stored block stays the old one; the next
 * eviction, on a fresh connection, commits. */
static void transaction_sent_in_part(fixture_t* f) {
  const size_t n = 2 * SWEEP_T;
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "part", SWEEP_T);
  d.chunk_bytes = 64;
  d.requests_in_flight = 4; /* a block's 4 chunks in one transaction */
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &c));
  float v[2 * SWEEP_T];
  fill(v, n, 31);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, c, 2, SWEEP_T, &geo);
  sw_tile_set_t *s0 = one_tile(0), *s1 = one_tile(1);
  SW_OK_(sw_tiled_promote(te, s0));
  dirty_tile(te, 0, SWEEP_T, 32);
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 2)); /* 1: the commit's point; 2: sent in part */
  sw_error_t* e = sw_tiled_evict(te, s0);
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 0));
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  if (!strstr(sw_error_message(e), "injected write failure: remote transaction sent in part"))
    fail_msg("unexpected message: %s", sw_error_message(e));
  sw_error_free(e);
  tt_expect_tile(&geo, 0, SW_TILE_PRIMARY, true);
  expect_tile_values(te, 0, SWEEP_T, 32);
  /* The next commands on the link are not queued into the open transaction:
   * a read gets its bytes, not QUEUED replies. */
  SW_OK_(sw_tiled_promote(te, s1));
  float back[SWEEP_T];
  SW_OK_(sw_carrier_read(te, SWEEP_T, SWEEP_T, back));
  assert_memory_equal(back, v + SWEEP_T, sizeof back);
  expect_stored(f->rt, f->eps, "part", n, 0, SWEEP_T, 31);
  SW_OK_(sw_tiled_evict(te, s0));
  tt_expect_tile(&geo, 0, SW_TILE_SECONDARY, false);
  expect_stored(f->rt, f->eps, "part", n, 0, SWEEP_T, 32);
  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  sw_carrier_release(te);
  sw_carrier_release(c);
}

static void test_fault_sweep(void** state) {
  fixture_t* f = (fixture_t*)*state;
  fault_sweep(f, "sweep2", 2);
  fault_sweep(f, "sweep4", 4);
  transaction_sent_in_part(f);
}

/* ---- several servers ------------------------------------------------------ */

/* Blocks placed over two servers; one killed fails only the tiles whose
 * blocks it held. */
static void test_two_servers_one_killed(void** state) {
  (void)state;
  rs_server_t a, b;
  rs_start(&a);
  rs_start(&b);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  const char* eps[2] = {a.endpoint, b.endpoint};
  const int64_t T = 512, tiles = 12;
  const size_t n = (size_t)(T * tiles);
  sw_remote_carrier_desc_t d = rs_desc(eps, 2, "pair", (size_t)T);
  d.placement_seed = 11;
  sw_carrier_t* w = NULL;
  SW_OK_(sw_carrier_create_remote(rt, SW_DTYPE_F32, n, &d, &w));
  float* v = (float*)malloc(sizeof(float) * n);
  fill(v, n, 17);
  SW_OK_(sw_carrier_write(w, 0, n, v));
  /* Each block on exactly one server, both used; the header on both. */
  bool on_b[12];
  int count_b = 0;
  for (int64_t k = 0; k < tiles; ++k) {
    char key[32];
    snprintf(key, sizeof key, "pair:b:%lld", (long long)k);
    const long long in_a = RS_CMD(&a, "EXISTS", key).integer, in_b = RS_CMD(&b, "EXISTS", key).integer;
    if (in_a + in_b != 1) fail_msg("block %lld is on %lld servers", (long long)k, in_a + in_b);
    on_b[k] = in_b == 1;
    count_b += on_b[k];
  }
  if (count_b == 0 || count_b == tiles) fail_msg("all %lld blocks on one server", (long long)tiles);
  assert_int_equal(RS_CMD(&a, "EXISTS", "pair:h").integer, 1);
  assert_int_equal(RS_CMD(&b, "EXISTS", "pair:h").integer, 1);
  d.read_only = true;
  sw_carrier_t* r = NULL;
  SW_OK_(sw_carrier_open_remote(rt, SW_DTYPE_F32, n, &d, &r));
  fixture_t fx = {.rt = rt};
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(&fx, r, tiles, T, &geo);
  rs_kill9(&b);
  for (int64_t k = 0; k < tiles; ++k) {
    sw_tile_set_t* one = one_tile(k);
    if (on_b[k]) {
      SW_FAILS(sw_tiled_promote(te, one), SW_ERROR_IO, b.socket);
      tt_expect_tile(&geo, k, SW_TILE_SECONDARY, false);
    } else {
      SW_OK_(sw_tiled_promote(te, one));
      expect_tile_values(te, k, T, 17);
    }
    sw_tile_set_release(one);
  }
  assert_int_equal(primary_count(te), (size_t)(tiles - count_b));
  free(v);
  sw_carrier_release(te);
  sw_carrier_release(r);
  sw_carrier_release(w);
  sw_runtime_release(rt);
  rs_stop(&b);
  rs_stop(&a);
}

/* ---- reconnection backoff ------------------------------------------------- */

static void test_reconnect_backoff(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const int64_t T = 256, tiles = 2;
  const size_t n = (size_t)(T * tiles);
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "backoff", (size_t)T);
  d.persistent = true;
  sw_carrier_t* w = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &w));
  sw_carrier_release(w);
  d.read_only = true;
  d.persistent = false;
  sw_carrier_t* o = NULL;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &o));
  tt_fix_t geo;
  sw_carrier_t* te = tiled_over(f, o, tiles, T, &geo);
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  rs_kill9(&f->srv);
  /* The first attempt fails at once; the next waits 20 ms first, the one
   * after 40 ms; the asynchronous path shares the wait. */
  float v[4];
  SW_FAILS(sw_carrier_read(o, 0, 4, v), SW_ERROR_IO, f->srv.socket);
  double t = rs_now();
  SW_FAILS(sw_carrier_read(o, 0, 4, v), SW_ERROR_IO, "cannot connect");
  if (rs_now() - t < 0.018) fail_msg("the second attempt came after %.3f s, not after the 20 ms backoff", rs_now() - t);
  t = rs_now();
  SW_FAILS(sw_tiled_promote(te, all), SW_ERROR_IO, f->srv.socket);
  if (rs_now() - t < 0.035) fail_msg("the promotion's attempt came after %.3f s, not after the 40 ms backoff", rs_now() - t);
  assert_int_equal(primary_count(te), 0);
  /* Restarted and seeded again: the next request waits out what is left of
   * the backoff and connects, which resets it. */
  rs_start_ex(&f->srv, false, NULL, true);
  sw_carrier_t* again = seeded(f, "backoff", n, (size_t)T, 0, 8);
  SW_OK_(sw_tiled_promote(te, all));
  for (int64_t k = 0; k < tiles; ++k) expect_tile_values(te, k, T, 8);
  SW_OK_(sw_carrier_read(o, 0, 4, v));
  assert_true(v[3] == pattern(3, 8));
  /* A wait longer than the request's deadline fails at once. */
  sw_remote_carrier_desc_t quick = d;
  quick.deadline_ms = 30;
  sw_carrier_t* q = NULL;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &quick, &q));
  rs_kill9(&f->srv);
  SW_FAILS(sw_carrier_read(q, 0, 4, v), SW_ERROR_IO, f->srv.socket);  /* the attempt fails: 20 ms */
  SW_FAILS(sw_carrier_read(q, 0, 4, v), SW_ERROR_IO, "cannot connect"); /* waited, failed: 40 ms */
  t = rs_now();
  SW_FAILS(sw_carrier_read(q, 0, 4, v), SW_ERROR_IO, "past what the request may wait");
  assert_true(rs_now() - t < 0.025);
  rs_start_ex(&f->srv, false, NULL, true);
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(q);
  sw_carrier_release(o);
  sw_carrier_release(again);
}

/* ---- the writer lease ------------------------------------------------------ */

/* Writes one slot until it fails (at most `seconds`): the error, or NULL. */
static sw_error_t* write_until_refused(sw_carrier_t* c, double seconds) {
  const float one = 1.0f;
  for (const double until = rs_now() + seconds;; usleep(20000)) {
    sw_error_t* e = sw_carrier_write(c, 0, 1, &one);
    if (e || rs_now() > until) return e;
  }
}

static void test_writer_lease(void** state) {
  fixture_t* f = (fixture_t*)*state;
  const size_t n = 256;
  sw_remote_carrier_desc_t d = rs_desc(f->eps, 1, "lease", 64);
  d.lease_ms = 300;
  d.persistent = true;
  sw_carrier_t* a = NULL;
  SW_OK_(sw_carrier_create_remote(f->rt, SW_DTYPE_F32, n, &d, &a));
  rs_reply_t r = RS_CMD(&f->srv, "GET", "lease:w");
  char pid[32];
  snprintf(pid, sizeof pid, ":%d:", (int)getpid());
  if (r.type != '$' || !strstr(r.text, pid)) fail_msg("lease:w holds '%s', not this process's token", r.text);
  /* A second writer is refused, naming the holder; readers are not. */
  d.persistent = false;
  sw_carrier_t* b = NULL;
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &b), SW_ERROR_STATE, "has a writer already");
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &b), SW_ERROR_STATE, pid);
  SW_FAILS(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &b), SW_ERROR_STATE, "writer lease 'lease:w'");
  sw_remote_carrier_desc_t ro = d;
  ro.read_only = true;
  sw_carrier_t* reader = NULL;
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &ro, &reader));
  /* Renewed: three times its time to live later, a writes and holds it. */
  usleep(900000);
  const float x = 7.0f;
  SW_OK_(sw_carrier_write(a, 3, 1, &x));
  float back = 0.0f;
  SW_OK_(sw_carrier_read(reader, 3, 1, &back));
  assert_true(back == 7.0f);
  r = RS_CMD(&f->srv, "PTTL", "lease:w");
  assert_true(r.integer > 0 && r.integer <= 300);
  /* Ended with its carrier: the next writer takes it. */
  sw_carrier_release(a);
  r = RS_CMD(&f->srv, "EXISTS", "lease:w");
  assert_int_equal(r.integer, 0);
  SW_OK_(sw_carrier_open_remote(f->rt, SW_DTYPE_F32, n, &d, &b));
  SW_OK_(sw_carrier_write(b, 4, 1, &x));
  /* Its renewals stopped (the server paused): writes are refused once half
   * the time to live passed, before the server is asked, and go on once a
   * renewal succeeds. */
  kill(f->srv.pid, SIGSTOP);
  usleep(200000);
  const double t0 = rs_now();
  SW_FAILS(sw_carrier_write(b, 4, 1, &x), SW_ERROR_STATE, "was last renewed");
  assert_true(rs_now() - t0 < 0.1);
  kill(f->srv.pid, SIGCONT);
  sw_error_t* e = NULL;
  for (const double until = rs_now() + 10.0; rs_now() < until; usleep(20000)) {
    e = sw_carrier_write(b, 4, 1, &x);
    if (!e) break;
    assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
    sw_error_free(e);
  }
  assert_null(e);
  /* Taken by another writer (its own lapsed meanwhile): b never writes
   * again, even once the key is gone. */
  r = RS_CMD(&f->srv, "SET", "lease:w", "intruder:1:0");
  assert_int_equal(r.type, '+');
  e = write_until_refused(b, 5.0);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
  if (sw_test_lacks(sw_error_message(e), "lost its writer lease 'lease:w' to 'intruder:1:0'"))
    fail_msg("unexpected message: %s", sw_error_message(e));
  sw_error_free(e);
  RS_CMD(&f->srv, "DEL", "lease:w");
  usleep(300000);
  SW_FAILS(sw_carrier_write(b, 4, 1, &x), SW_ERROR_STATE, "lost its writer lease");
  /* Its end leaves the intruder's key alone. */
  r = RS_CMD(&f->srv, "SET", "lease:w", "intruder:1:0");
  sw_carrier_release(b);
  r = RS_CMD(&f->srv, "GET", "lease:w");
  assert_string_equal(r.text, "intruder:1:0");
  sw_carrier_release(reader);
}

/* ---- read replicas -------------------------------------------------------- */

/* A read-only carrier over namespace `ns` on `primary`, with `replica` as
 * its read replica (or none when NULL). */
static sw_error_t* open_with_replica(sw_runtime_t* rt, const char* const* eps, const char* ns, size_t n, size_t block,
                                     const char* const* replica, bool read_only, sw_carrier_t** out) {
  static const size_t of_first[1] = {0};
  sw_remote_carrier_desc_t d = rs_desc(eps, 1, ns, block);
  d.read_only = read_only;
  if (replica) {
    d.replica_endpoints = replica;
    d.replica_of = of_first;
    d.replica_count = 1;
  }
  return sw_carrier_open_remote(rt, SW_DTYPE_F32, n, &d, out);
}

static void test_read_replicas(void** state) {
  (void)state;
  rs_server_t primary, replica;
  rs_start_ex(&primary, true, NULL, false); /* the replica follows it over loopback TCP */
  rs_start_replica(&replica, false, NULL, false, primary.port);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  const char* eps[1] = {primary.endpoint};
  const char* reps[1] = {replica.endpoint};
  const int64_t T = 4096, tiles = 4;
  const size_t n = (size_t)(T * tiles);

  /* Seeded on the primary by a writer without replicas; the replica has it
   * all once WAIT says so. */
  sw_remote_carrier_desc_t d = rs_desc(eps, 1, "rep", (size_t)T);
  d.persistent = true;
  sw_carrier_t* writer = NULL;
  SW_OK_(sw_carrier_create_remote(rt, SW_DTYPE_F32, n, &d, &writer));
  float* v = (float*)malloc(sizeof(float) * n);
  fill(v, n, 21);
  SW_OK_(sw_carrier_write(writer, 0, n, v));
  sw_carrier_release(writer);
  rs_reply_t r = RS_CMD(&primary, "WAIT", "1", "30000");
  assert_int_equal(r.integer, 1);

  /* Refusals: replicas on a carrier that can write, bad indices, NULLs, a
   * replica that is the endpoint itself. */
  static const size_t of_first[1] = {0}, of_second[1] = {1};
  sw_carrier_t* c = NULL;
  d = rs_desc(eps, 1, "rep.new", (size_t)T);
  d.replica_endpoints = reps;
  d.replica_of = of_first;
  d.replica_count = 1;
  SW_FAILS(sw_carrier_create_remote(rt, SW_DTYPE_F32, n, &d, &c), SW_ERROR_VALUE, "read replicas serve only");
  SW_FAILS(open_with_replica(rt, eps, "rep", n, (size_t)T, reps, false, &c), SW_ERROR_VALUE, "read_only");
  d = rs_desc(eps, 1, "rep", (size_t)T);
  d.read_only = true;
  d.replica_endpoints = reps;
  d.replica_of = of_second;
  d.replica_count = 1;
  SW_FAILS(sw_carrier_open_remote(rt, SW_DTYPE_F32, n, &d, &c), SW_ERROR_VALUE, "desc->replica_of[0] is 1");
  d.replica_of = NULL;
  SW_FAILS(sw_carrier_open_remote(rt, SW_DTYPE_F32, n, &d, &c), SW_ERROR_VALUE, "desc->replica_of is NULL");
  SW_FAILS(open_with_replica(rt, eps, "rep", n, (size_t)T, eps, true, &c), SW_ERROR_VALUE,
           "is already one of the carrier's servers");
  const char* null_replica[1] = {NULL};
  SW_FAILS(open_with_replica(rt, eps, "rep", n, (size_t)T, null_replica, true, &c), SW_ERROR_VALUE,
           "desc->replica_endpoints[0] is NULL");
  assert_null(c);

  /* Both up: reads go to the primary. */
  sw_carrier_t* plain = NULL;
  SW_OK_(open_with_replica(rt, eps, "rep", n, (size_t)T, NULL, true, &plain));
  SW_OK_(open_with_replica(rt, eps, "rep", n, (size_t)T, reps, true, &c));
  tt_fix_t geo, plain_geo;
  fixture_t fx = {.rt = rt};
  sw_carrier_t* te = tiled_over(&fx, c, tiles, T, &geo);
  sw_carrier_t* plain_te = tiled_over(&fx, plain, tiles, T, &plain_geo);
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  SW_OK_(sw_tiled_promote(te, all));
  for (int64_t k = 0; k < tiles; ++k) expect_tile_values(te, k, T, 21);
  SW_OK_(sw_tiled_evict(te, all));

  /* The primary killed during a promote: the lost reads are sent again,
   * on a fresh connection (refused), then on the replica. */
  kill(primary.pid, SIGSTOP);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_promote_async(te, all, &a));
  usleep(100000);
  rs_kill9(&primary);
  SW_OK_(sw_await_wait(a, 10000000000LL));
  sw_await_release(a);
  assert_int_equal(primary_count(te), (size_t)tiles);
  for (int64_t k = 0; k < tiles; ++k) expect_tile_values(te, k, T, 21);
  SW_OK_(sw_tiled_evict(te, all));
  /* With the primary gone: promotions (no connection to it can be made),
   * the blocking read, and a carrier opened now (the replica's header) all
   * read the replica; the carrier without replicas fails, naming the
   * primary. */
  SW_OK_(sw_tiled_promote(te, all));
  for (int64_t k = 0; k < tiles; ++k) expect_tile_values(te, k, T, 21);
  memset(v, 0, sizeof(float) * n);
  SW_OK_(sw_carrier_read(c, 0, n, v));
  for (size_t i = 0; i < n; ++i)
    if (v[i] != pattern(i, 21)) fail_msg("blocking read from the replica, slot %zu: %g", i, (double)v[i]);
  sw_carrier_t* late = NULL;
  SW_OK_(open_with_replica(rt, eps, "rep", n, (size_t)T, reps, true, &late));
  SW_OK_(sw_carrier_read(late, (size_t)T + 5, 3, v));
  for (size_t i = 0; i < 3; ++i) assert_true(v[i] == pattern((size_t)T + 5 + i, 21));
  sw_carrier_release(late);
  SW_FAILS(sw_tiled_promote(plain_te, all), SW_ERROR_IO, primary.socket);
  assert_int_equal(primary_count(plain_te), 0);
  SW_FAILS(open_with_replica(rt, eps, "rep", n, (size_t)T, NULL, true, &late), SW_ERROR_IO, primary.socket);

  /* Both gone: IO naming the block and each server tried, nothing resident. */
  SW_OK_(sw_tiled_evict(te, all));
  rs_kill9(&replica);
  SW_FAILS(sw_tiled_promote(te, all), SW_ERROR_IO, "no server holding block");
  SW_FAILS(sw_tiled_promote(te, all), SW_ERROR_IO, replica.socket);
  SW_FAILS(sw_tiled_promote(te, all), SW_ERROR_IO, "before that");
  assert_int_equal(primary_count(te), 0);
  SW_FAILS(sw_carrier_read(c, 0, 4, v), SW_ERROR_IO, replica.socket);
  SW_FAILS(open_with_replica(rt, eps, "rep", n, (size_t)T, reps, true, &late), SW_ERROR_IO, primary.socket);

  free(v);
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(plain_te);
  sw_carrier_release(c);
  sw_carrier_release(plain);
  sw_runtime_release(rt);
  rs_stop(&replica);
  rs_stop(&primary);
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--shared-reader") == 0) return shared_reader(argv[2], argv[3]);
  signal(SIGPIPE, SIG_DFL); /* the library must not die of one */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_values_and_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tiled_matches_host, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_block, setup, teardown),
      cmocka_unit_test_setup_teardown(test_damaged_block, setup, teardown),
      cmocka_unit_test(test_credentials),
      cmocka_unit_test(test_transport_rules),
      cmocka_unit_test_setup_teardown(test_kill9_during_promote, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stopped_server_times_out, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_kill_retried, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_kill_blocking_read, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only_acl, setup, teardown),
      cmocka_unit_test_setup_teardown(test_writer_and_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fault_sweep, setup, teardown),
      cmocka_unit_test(test_two_servers_one_killed),
      cmocka_unit_test_setup_teardown(test_reconnect_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(test_writer_lease, setup, teardown),
      cmocka_unit_test(test_read_replicas),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
