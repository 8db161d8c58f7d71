/* File carriers: scratch files (zero-filled, removed on dispose) and read-only
 * windows on user files; synchronous reads and writes split into chunks,
 * asynchronous transfers (through sw_move_async) with several requests in
 * flight, O_DIRECT, and injected read/write faults. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sw_test.h"

/* Each test gets its own runtime (armed faults never leak) and its own fresh
 * directory, which must be empty again when the test ends. */
typedef struct {
  sw_runtime_t* rt;
  char dir[256];
} fixture_t;

static int fixture_setup(void** state) {
  fixture_t* f = (fixture_t*)calloc(1, sizeof *f);
  if (!f) return -1;
  const char* tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/sw_file_test_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(f->dir)) return -1;
  sw_error_t* e = sw_runtime_create(NULL, &f->rt);
  if (e) {
    sw_error_free(e);
    return -1;
  }
  *state = f;
  return 0;
}

/* Entries of `dir` other than "." and ".."; the first one's path goes to
 * `first` when given. */
static int count_entries(const char* dir, char* first, size_t capacity) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == 0 && first) snprintf(first, capacity, "%s/%s", dir, e->d_name);
    ++n;
  }
  closedir(d);
  return n;
}

/* Files this process holds open that were created in `dir` and are
 * unlinked ("/proc/self/fd/N -> DIR/strideweave-XXXXXX (deleted)"); the
 * first one's /proc path goes to `first` when given. */
static int open_scratch_files(const char* dir, char* first, size_t capacity) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/strideweave-", dir);
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char link[300], target[1024];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    const ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (strncmp(target, prefix, strlen(prefix)) != 0 || !strstr(target, " (deleted)")) continue;
    if (n == 0 && first) snprintf(first, capacity, "%s", link);
    ++n;
  }
  closedir(d);
  return n;
}

static int fixture_teardown(void** state) {
  fixture_t* f = (fixture_t*)*state;
  sw_runtime_release(f->rt);
  /* Files the test wrote itself; carriers' files are gone by now. */
  char path[512];
  while (count_entries(f->dir, path, sizeof path) > 0) unlink(path);
  int ok = rmdir(f->dir) == 0 ? 0 : -1;
  free(f);
  return ok;
}

#define FIXTURE(state) ((fixture_t*)*(state))

static sw_file_carrier_desc_t small_chunks(const char* dir, bool direct_io) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = dir;
  d.direct_io = direct_io;
  d.chunk_bytes = 4096;
  d.requests_in_flight = 3;
  return d;
}

static sw_carrier_t* create_file(fixture_t* f, sw_dtype_t dtype, size_t size, const sw_file_carrier_desc_t* d) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_file(f->rt, dtype, size, d, &c));
  assert_non_null(c);
  return c;
}

static uint64_t version_of(const sw_carrier_t* c) {
  uint64_t v = 0xdeadbeef;
  SW_OK_(sw_carrier_version(c, &v));
  return v;
}

static size_t size_of(const sw_carrier_t* c) {
  size_t s = 0xdeadbeef;
  SW_OK_(sw_carrier_size(c, &s));
  return s;
}

static bool is_disposed(const sw_carrier_t* c) {
  bool d = false;
  SW_OK_(sw_carrier_is_disposed(c, &d));
  return d;
}

static bool is_owned(const sw_carrier_t* c) {
  bool o = true;
  SW_OK_(sw_carrier_is_owned(c, &o));
  return o;
}

static float pattern(size_t i, unsigned seed) { return (float)((int)(i * 7 + seed * 131) % 20011) - 10000.0f; }

static float* pattern_array(size_t n, unsigned seed) {
  float* v = (float*)malloc(sizeof(float) * (n ? n : 1));
  for (size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
  return v;
}

/* Asserts that the carrier's slots [0, n) equal `expected` exactly. */
static void expect_f32(const sw_carrier_t* c, const float* expected, size_t n) {
  float* back = (float*)malloc(sizeof(float) * (n ? n : 1));
  SW_OK_(sw_carrier_read(c, 0, n, back));
  for (size_t i = 0; i < n; ++i)
    if (back[i] != expected[i]) fail_msg("slot %zu: %g, expected %g", i, (double)back[i], (double)expected[i]);
  free(back);
}

static void write_whole_file(const char* path, const void* data, size_t bytes) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, bytes), (ssize_t)bytes);
  assert_int_equal(close(fd), 0);
}

static void expect_file_bytes(const char* path, const void* data, size_t bytes) {
  unsigned char* back = (unsigned char*)malloc(bytes + 16);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(read(fd, back, bytes + 16), (ssize_t)bytes);
  close(fd);
  assert_memory_equal(back, data, bytes);
  free(back);
}

/* ---- descriptors and arguments ------------------------------------------ */

static void desc_init_defaults(void** state) {
  (void)state;
  sw_file_carrier_desc_t d;
  memset(&d, 0xab, sizeof d);
  sw_file_carrier_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof(sw_file_carrier_desc_t));
  assert_null(d.directory);
  assert_false(d.direct_io);
  assert_int_equal(d.chunk_bytes, 0);
  assert_int_equal(d.requests_in_flight, 0);
  sw_file_carrier_desc_init(NULL);
}

static void create_rejects_bad_arguments(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  sw_carrier_t* c = (sw_carrier_t*)0x1;
  SW_FAILS(sw_carrier_create_file(NULL, SW_DTYPE_F32, 4, &d, &c), SW_ERROR_TYPE, "runtime");
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_INVALID, 4, &d, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_file(f->rt, (sw_dtype_t)99, 4, &d, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &d, NULL), SW_ERROR_VALUE, "out_carrier");

  /* A carrier handle where the runtime belongs is TYPE too. */
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 1, &cpu));
  SW_FAILS(sw_carrier_create_file((sw_runtime_t*)cpu, SW_DTYPE_F32, 4, &d, &c), SW_ERROR_TYPE, "runtime");
  sw_carrier_release(cpu);

  sw_file_carrier_desc_t bad = d;
  bad.struct_size = 0;
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_VALUE, "struct_size");
  bad.struct_size = sizeof(sw_file_carrier_desc_t) + 8;
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_VALUE, "struct_size");
  bad = d;
  bad.requests_in_flight = 1000;
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_VALUE, "requests_in_flight");
  bad = d;
  bad.directory = "";
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_VALUE, "directory");

  /* A directory that does not exist is IO naming it. */
  char missing[512];
  snprintf(missing, sizeof missing, "%s/no/such/dir", f->dir);
  bad = d;
  bad.directory = missing;
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_IO, missing);
  /* So is a path that is a file, not a directory. */
  char plain[512];
  snprintf(plain, sizeof plain, "%s/plain", f->dir);
  write_whole_file(plain, "x", 1);
  bad.directory = plain;
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &bad, &c), SW_ERROR_IO, plain);
  unlink(plain);

  /* A size whose bytes overflow is VALUE. */
  SW_FAILS(sw_carrier_create_file(f->rt, SW_DTYPE_F64, SIZE_MAX / 4, &d, &c), SW_ERROR_VALUE, NULL);
  assert_ptr_equal(c, (sw_carrier_t*)0x1); /* never written on failure */
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
}

static void open_rejects_bad_arguments(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  snprintf(path, sizeof path, "%s/weights.bin", f->dir);
  const float w[4] = {1, 2, 3, 4};
  write_whole_file(path, w, sizeof w);
  sw_carrier_t* c = (sw_carrier_t*)0x1;
  SW_FAILS(sw_carrier_open_file(NULL, SW_DTYPE_F32, path, 0, 4, NULL, &c), SW_ERROR_TYPE, "runtime");
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_INVALID, path, 0, 4, NULL, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, NULL, 0, 4, NULL, &c), SW_ERROR_VALUE, "path");
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, 4, NULL, NULL), SW_ERROR_VALUE, "out_carrier");
  sw_file_carrier_desc_t bad;
  sw_file_carrier_desc_init(&bad);
  bad.struct_size = 3;
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, 4, &bad, &c), SW_ERROR_VALUE, "struct_size");
  assert_ptr_equal(c, (sw_carrier_t*)0x1);
}

/* ---- scratch files -------------------------------------------------------- */

static void create_is_zero_filled(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  const size_t n = 10007; /* ~10 chunks of 4096 bytes, odd tail */
  sw_carrier_t* c = create_file(f, SW_DTYPE_F32, n, &d);
  sw_carrier_kind_t kind = (sw_carrier_kind_t)0;
  SW_OK_(sw_carrier_kind(c, &kind));
  assert_int_equal(kind, SW_CARRIER_FILE);
  sw_dtype_t dtype = SW_DTYPE_INVALID;
  SW_OK_(sw_carrier_dtype(c, &dtype));
  assert_int_equal(dtype, SW_DTYPE_F32);
  assert_int_equal(size_of(c), n);
  assert_int_equal(version_of(c), 0);
  assert_false(is_owned(c));
  assert_false(is_disposed(c));
  uint64_t stored = 0;
  SW_OK_(sw_carrier_stored_bytes(c, &stored));
  assert_int_equal(stored, n * 4);
  float* zeros = (float*)calloc(n, sizeof(float));
  expect_f32(c, zeros, n);
  free(zeros);

  /* The file was made in the directory we passed, sized to the region, and
   * unlinked at once: the directory is empty while the carrier lives, and
   * the process holds the file open until the release. */
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  char fd_path[320];
  assert_int_equal(open_scratch_files(f->dir, fd_path, sizeof fd_path), 1);
  struct stat st;
  assert_int_equal(stat(fd_path, &st), 0);
  assert_int_equal(st.st_size, n * 4);
  assert_int_equal(st.st_nlink, 0);
  sw_carrier_release(c);
  assert_int_equal(open_scratch_files(f->dir, NULL, 0), 0);
}

/* The child of crash_leaves_no_scratch_file (this program run again with
 * --scratch-child DIR): makes a scratch carrier in DIR, writes to it and
 * exits without releasing anything. */
static int scratch_child(const char* dir) {
  sw_runtime_t* rt = NULL;
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = dir;
  sw_carrier_t* c = NULL;
  if (sw_runtime_create(NULL, &rt) || sw_carrier_create_file(rt, SW_DTYPE_F32, 1 << 20, &d, &c)) _exit(3);
  const float one = 1.0f;
  if (sw_carrier_write(c, 5, 1, &one)) _exit(4);
  _exit(count_entries(dir, NULL, 0) == 0 ? 0 : 5); /* no release, no shutdown */
}

/* A process that dies holding a scratch carrier leaves nothing behind. The
 * child is a fresh process (fork and exec: a forked copy of this threaded
 * process may not start threads under ThreadSanitizer). */
static void crash_leaves_no_scratch_file(void** state) {
  fixture_t* f = FIXTURE(state);
  fflush(NULL);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    execl("/proc/self/exe", "test_file_carrier", "--scratch-child", f->dir, (char*)NULL);
    _exit(6);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
}

static void default_directory_is_tmpdir(void** state) {
  fixture_t* f = FIXTURE(state);
  /* NULL desc and NULL directory both mean $TMPDIR or /tmp. */
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_file(f->rt, SW_DTYPE_I32, 3, NULL, &c));
  const int32_t v[3] = {-1, 0, 7};
  SW_OK_(sw_carrier_write(c, 0, 3, v));
  int32_t back[3] = {0, 0, 0};
  SW_OK_(sw_carrier_read(c, 0, 3, back));
  assert_memory_equal(back, v, sizeof v);
  sw_carrier_release(c);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  SW_OK_(sw_carrier_create_file(f->rt, SW_DTYPE_U8, 0, &d, &c));
  assert_int_equal(size_of(c), 0);
  sw_carrier_release(c);
}

/* Writes at odd offsets and sizes, each spanning several 4096-byte chunks,
 * checked against a shadow copy after every step. */
static void round_trips_at_odd_offsets(void** state) {
  fixture_t* f = FIXTURE(state);
  for (int direct = 0; direct < 2; ++direct) {
    sw_file_carrier_desc_t d = small_chunks(f->dir, direct);
    const size_t n = 20011;
    sw_carrier_t* c = create_file(f, SW_DTYPE_F32, n, &d);
    float* shadow = (float*)calloc(n, sizeof(float));
    const struct {
      size_t first, count;
    } steps[] = {{0, 1}, {1, 3071}, {17, 5003}, {1024, 4096}, {n - 9001, 9001}, {4095, 2}, {0, n}, {12345, 7}};
    uint64_t version = 0;
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; ++s) {
      float* v = pattern_array(steps[s].count, (unsigned)s + 1);
      SW_OK_(sw_carrier_write(c, steps[s].first, steps[s].count, v));
      memcpy(shadow + steps[s].first, v, steps[s].count * sizeof(float));
      assert_int_equal(version_of(c), ++version);
      expect_f32(c, shadow, n);
      /* A read of the same odd range. */
      float* back = (float*)malloc(steps[s].count * sizeof(float));
      SW_OK_(sw_carrier_read(c, steps[s].first, steps[s].count, back));
      assert_memory_equal(back, v, steps[s].count * sizeof(float));
      free(back);
      free(v);
    }
    assert_int_equal(version_of(c), version); /* reads do not step it */
    SW_FAILS(sw_carrier_read(c, n - 1, 2, shadow), SW_ERROR_INDEX, NULL);
    SW_FAILS(sw_carrier_write(c, n, 1, shadow), SW_ERROR_INDEX, NULL);
    assert_int_equal(version_of(c), version);
    free(shadow);
    sw_carrier_release(c);
  }
}

/* Single bytes at every offset class, for a byte-sized dtype. */
static void byte_dtype_round_trip(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  d.chunk_bytes = 1000; /* chunks need not divide the page size */
  const size_t n = 9999;
  sw_carrier_t* c = create_file(f, SW_DTYPE_U8, n, &d);
  unsigned char* shadow = (unsigned char*)calloc(n, 1);
  for (size_t first = 0; first < n; first += 997) {
    unsigned char v[1500];
    size_t count = first + sizeof v <= n ? sizeof v : n - first;
    for (size_t i = 0; i < count; ++i) v[i] = (unsigned char)(first + i * 3);
    SW_OK_(sw_carrier_write(c, first, count, v));
    memcpy(shadow + first, v, count);
  }
  unsigned char* back = (unsigned char*)malloc(n);
  SW_OK_(sw_carrier_read(c, 0, n, back));
  assert_memory_equal(back, shadow, n);
  free(back);
  free(shadow);
  sw_carrier_release(c);
}

static void dispose_closes_the_file(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  sw_carrier_t* c = create_file(f, SW_DTYPE_F64, 1000, &d);
  const double v[2] = {1.5, -2.25};
  SW_OK_(sw_carrier_write(c, 998, 2, v));
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  assert_int_equal(open_scratch_files(f->dir, NULL, 0), 1);
  SW_OK_(sw_carrier_dispose(c));
  assert_int_equal(open_scratch_files(f->dir, NULL, 0), 0);
  assert_true(is_disposed(c));
  SW_OK_(sw_carrier_dispose(c)); /* idempotent */
  /* The handle still answers; values are gone. */
  assert_int_equal(size_of(c), 1000);
  uint64_t stored = 1;
  SW_OK_(sw_carrier_stored_bytes(c, &stored));
  assert_int_equal(stored, 0);
  double back[2];
  SW_FAILS(sw_carrier_read(c, 0, 2, back), SW_ERROR_STATE, "released");
  SW_FAILS(sw_carrier_write(c, 0, 2, v), SW_ERROR_STATE, "released");
  sw_carrier_release(c);
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);

  /* A large file too (its last close may happen in the background, so only
   * the values are checked after it). Sparse, so this writes nothing. */
  c = create_file(f, SW_DTYPE_F64, (size_t)8 << 20, &d);
  SW_OK_(sw_carrier_write(c, ((size_t)8 << 20) - 2, 2, v));
  assert_int_equal(open_scratch_files(f->dir, NULL, 0), 1);
  SW_OK_(sw_carrier_dispose(c));
  SW_FAILS(sw_carrier_read(c, 0, 2, back), SW_ERROR_STATE, "released");
  sw_carrier_release(c);
  c = create_file(f, SW_DTYPE_F64, (size_t)8 << 20, &d);
  /* The first one's close may still be pending on a worker. */
  assert_true(open_scratch_files(f->dir, NULL, 0) >= 1);
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  sw_carrier_release(c); /* destruction without dispose */
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
}

static void claimed_carrier_keeps_its_file(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_carrier_t* c = create_file(f, SW_DTYPE_F32, 8, NULL);
  SW_OK_(sw_testing_claim(c));
  SW_FAILS(sw_carrier_dispose(c), SW_ERROR_STATE, "owned");
  const float v = 3.0f;
  SW_FAILS(sw_carrier_write(c, 0, 1, &v), SW_ERROR_STATE, "owned");
  SW_OK_(sw_testing_unclaim(c));
  SW_OK_(sw_carrier_write(c, 0, 1, &v));
  float back = 0;
  SW_OK_(sw_carrier_read(c, 0, 1, &back));
  assert_true(back == 3.0f);
  sw_carrier_release(c);
}

/* ---- read-only user files ------------------------------------------------- */

static void open_reads_a_user_file(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  snprintf(path, sizeof path, "%s/weights.bin", f->dir);
  /* A 6-byte header (unaligned for f32), then values, then a trailer. */
  const size_t header = 6, n = 7777, trailer = 10;
  const size_t bytes = header + n * 4 + trailer;
  unsigned char* file = (unsigned char*)malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) file[i] = (unsigned char)(i * 13 + 1);
  float* values = pattern_array(n, 9);
  memcpy(file + header, values, n * 4);
  write_whole_file(path, file, bytes);

  for (int direct = 0; direct < 2; ++direct) {
    sw_file_carrier_desc_t d = small_chunks(NULL, direct);
    sw_carrier_t* c = NULL;
    SW_OK_(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, header, n, &d, &c));
    sw_carrier_kind_t kind = (sw_carrier_kind_t)0;
    SW_OK_(sw_carrier_kind(c, &kind));
    assert_int_equal(kind, SW_CARRIER_FILE);
    assert_int_equal(size_of(c), n);
    uint64_t stored = 0;
    SW_OK_(sw_carrier_stored_bytes(c, &stored));
    assert_int_equal(stored, n * 4);
    expect_f32(c, values, n);
    float part[3];
    SW_OK_(sw_carrier_read(c, n - 3, 3, part));
    assert_memory_equal(part, values + n - 3, sizeof part);

    /* The user's file is never written. */
    bool read_only = false;
    SW_OK_(sw_carrier_is_read_only(c, &read_only));
    assert_true(read_only);
    const float z[2] = {0, 0};
    SW_FAILS(sw_carrier_write(c, 0, 2, z), SW_ERROR_STATE, "read-only");
    assert_int_equal(version_of(c), 0);
    SW_OK_(sw_carrier_dispose(c));
    SW_OK_(sw_carrier_is_read_only(c, &read_only)); /* still answers after dispose */
    assert_true(read_only);
    sw_carrier_release(c);
    /* Nor removed. */
    expect_file_bytes(path, file, bytes);
  }

  /* Without a desc, and a region ending exactly at the end of the file. */
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_open_file(f->rt, SW_DTYPE_U8, path, bytes - 4, 4, NULL, &c));
  unsigned char tail[4];
  SW_OK_(sw_carrier_read(c, 0, 4, tail));
  assert_memory_equal(tail, file + bytes - 4, 4);
  sw_carrier_release(c);
  SW_OK_(sw_carrier_open_file(f->rt, SW_DTYPE_U8, path, bytes, 0, NULL, &c));
  assert_int_equal(size_of(c), 0);
  sw_carrier_release(c);
  expect_file_bytes(path, file, bytes);
  free(values);
  free(file);
}

static void open_region_past_end_is_value(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  snprintf(path, sizeof path, "%s/short.bin", f->dir);
  const float w[4] = {1, 2, 3, 4};
  write_whole_file(path, w, sizeof w);
  sw_carrier_t* c = (sw_carrier_t*)0x1;
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, 5, NULL, &c), SW_ERROR_VALUE, path);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 1, 4, NULL, &c), SW_ERROR_VALUE, "end");
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_U8, path, 17, 0, NULL, &c), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, UINT64_MAX - 2, 1, NULL, &c), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F64, path, 0, SIZE_MAX / 2, NULL, &c), SW_ERROR_VALUE, NULL);
  assert_ptr_equal(c, (sw_carrier_t*)0x1);
  expect_file_bytes(path, w, sizeof w);
}

static void open_missing_file_is_io(void** state) {
  fixture_t* f = FIXTURE(state);
  char path[512];
  snprintf(path, sizeof path, "%s/missing.bin", f->dir);
  sw_carrier_t* c = (sw_carrier_t*)0x1;
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, 1, NULL, &c), SW_ERROR_IO, path);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, 1, NULL, &c), SW_ERROR_IO, "No such file");
  /* A directory is not a weights file. */
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, f->dir, 0, 0, NULL, &c), SW_ERROR_IO, f->dir);
  SW_FAILS(sw_carrier_open_file(f->rt, SW_DTYPE_F32, "", 0, 0, NULL, &c), SW_ERROR_IO, NULL);
  assert_ptr_equal(c, (sw_carrier_t*)0x1);
}

/* ---- injected faults -------------------------------------------------------- */

static void injected_faults_fail_sync_access(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  const size_t n = 5000; /* 5 chunks */
  sw_carrier_t* c = create_file(f, SW_DTYPE_F32, n, &d);
  float* v = pattern_array(n, 3);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  float* other = pattern_array(n, 4);
  float* back = (float*)malloc(n * sizeof(float));

  /* A read fault on the first or a later chunk fails the whole read. */
  for (uint64_t nth = 1; nth <= 5; nth += 2) {
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, nth));
    SW_FAILS(sw_carrier_read(c, 0, n, back), SW_ERROR_IO, "injected read failure");
  }
  /* A write fault on any chunk changes nothing: no byte, no version. */
  for (uint64_t nth = 1; nth <= 5; nth += 2) {
    SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, nth));
    SW_FAILS(sw_carrier_write(c, 0, n, other), SW_ERROR_IO, "injected write failure");
    assert_int_equal(version_of(c), 1);
    expect_f32(c, v, n);
  }
  /* The faults were one-shot. */
  SW_OK_(sw_carrier_write(c, 0, n, other));
  assert_int_equal(version_of(c), 2);
  expect_f32(c, other, n);
  /* A fault armed past this write's requests hits a later one. */
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 7));
  SW_OK_(sw_carrier_write(c, 0, n, v));     /* write requests 1..5 */
  SW_OK_(sw_carrier_write(c, 0, 1, other)); /* 6 */
  SW_FAILS(sw_carrier_write(c, 1, 1, other), SW_ERROR_IO, "injected write failure"); /* 7 */
  assert_int_equal(version_of(c), 4);
  v[0] = other[0];
  expect_f32(c, v, n);
  free(back);
  free(other);
  free(v);
  sw_carrier_release(c);
}

/* ---- O_DIRECT -------------------------------------------------------------- */

/* The same writes and reads, with aligned and unaligned offsets and buffers,
 * give the same bytes with and without O_DIRECT. */
static void direct_io_matches_buffered(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 65536 + 333;
  float* results[2];
  float* aligned = NULL;
  assert_int_equal(posix_memalign((void**)&aligned, 4096, (n + 1024) * sizeof(float)), 0);
  for (int direct = 0; direct < 2; ++direct) {
    sw_file_carrier_desc_t d;
    sw_file_carrier_desc_init(&d);
    d.directory = f->dir;
    d.direct_io = direct;
    d.chunk_bytes = 3 * 4096 + 5; /* rounded internally for O_DIRECT */
    d.requests_in_flight = 2;
    sw_carrier_t* c = create_file(f, SW_DTYPE_F32, n, &d);
    for (size_t i = 0; i < n; ++i) aligned[i] = pattern(i, 21);
    SW_OK_(sw_carrier_write(c, 0, n, aligned)); /* aligned everywhere */
    for (size_t i = 0; i < 5000; ++i) aligned[1 + i] = pattern(i, 22);
    SW_OK_(sw_carrier_write(c, 1024, 5000, aligned + 1)); /* aligned file offset, unaligned buffer */
    for (size_t i = 0; i < 9000; ++i) aligned[1024 + i] = pattern(i, 23);
    SW_OK_(sw_carrier_write(c, 3, 9000, aligned + 1024)); /* unaligned offset, aligned buffer */
    for (size_t i = 0; i < 20000; ++i) aligned[3 + i] = pattern(i, 24);
    SW_OK_(sw_carrier_write(c, 4099, 20000, aligned + 3)); /* same misalignment: head, body, tail */
    results[direct] = (float*)malloc(n * sizeof(float));
    SW_OK_(sw_carrier_read(c, 0, n, aligned)); /* aligned read */
    memcpy(results[direct], aligned, n * sizeof(float));
    SW_OK_(sw_carrier_read(c, 4099, 20000, aligned + 3)); /* head, body, tail read */
    assert_memory_equal(aligned + 3, results[direct] + 4099, 20000 * sizeof(float));
    SW_OK_(sw_carrier_read(c, 5, 7000, aligned + 1)); /* unaligned read */
    assert_memory_equal(aligned + 1, results[direct] + 5, 7000 * sizeof(float));
    sw_carrier_release(c);
  }
  assert_memory_equal(results[0], results[1], n * sizeof(float));
  /* And both hold what was written, in order. */
  for (size_t i = 0; i < 20000; ++i) assert_true(results[0][4099 + i] == pattern(i, 24));
  assert_true(results[0][0] == pattern(0, 21));
  assert_true(results[0][3] == pattern(0, 23));
  assert_true(results[0][n - 1] == pattern(n - 1, 21));
  free(results[0]);
  free(results[1]);
  free(aligned);
}

/* A TiledEvictable over a direct-I/O scratch file under an LRU budget, its
 * tiles of any size (their file boundaries mostly unaligned: writes split
 * into buffered ends and a direct middle, reads padded or bounced, pooled
 * buffers of 64 KiB and up owning their blocks), through a random sequence
 * of updates, promotions and evictions: every dirty value survives, read
 * through the tensor as it goes and from the file itself at the end. */
static void direct_io_dirty_tiles_survive(void** state) {
  fixture_t* f = FIXTURE(state);
  static const size_t kChunks[] = {4096, 12288, 65536, 1 << 20};
  uint64_t rng = 0x2545f4914f6cdd1dull;
  for (int c = 0; c < 12; ++c) {
    const int64_t G = 3 + (int64_t)(sw_test_random(&rng) % 6);
    const int64_t T = c % 2 ? 17000 + (int64_t)(sw_test_random(&rng) % 40000) : 1000 + (int64_t)(sw_test_random(&rng) % 15000);
    const size_t budget = 1 + (size_t)(sw_test_random(&rng) % (uint64_t)(G - 1));
    sw_file_carrier_desc_t d;
    sw_file_carrier_desc_init(&d);
    d.directory = f->dir;
    d.direct_io = true;
    d.chunk_bytes = kChunks[sw_test_random(&rng) % 4];
    d.requests_in_flight = 1 + (uint32_t)(sw_test_random(&rng) % 4);
    const size_t n = (size_t)(G * T);
    sw_carrier_t* file = create_file(f, SW_DTYPE_F32, n, &d);
    float* shadow = (float*)calloc(n, sizeof(float));
    sw_carrier_t* cpu = NULL;
    SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
    sw_lru_policy_t* lru = NULL;
    SW_OK_(sw_lru_policy_create(budget, &lru));
    sw_residency_policy_t policy;
    SW_OK_(sw_lru_policy_as_residency_policy(lru, &policy));
    sw_carrier_t* tiled = NULL;
    SW_OK_(sw_tiled_create(cpu, file, &G, &T, 1, &policy, &tiled));
    sw_carrier_release(cpu);
    sw_tensor_t* full = NULL;
    SW_OK_(sw_tiled_full_tensor(tiled, &full));
    float* values = (float*)malloc(sizeof(float) * budget * (size_t)T);
    float* got = (float*)malloc(sizeof(float) * n);
    for (int step = 0; step < 40; ++step) {
      const size_t count = 1 + (size_t)(sw_test_random(&rng) % budget);
      int64_t picked[16];
      size_t m = 0;
      while (m < count) { /* distinct tiles */
        const int64_t k = (int64_t)(sw_test_random(&rng) % (uint64_t)G);
        bool seen = false;
        for (size_t i = 0; i < m; ++i) seen |= picked[i] == k;
        if (!seen) picked[m++] = k;
      }
      sw_tile_set_t* set = NULL;
      SW_OK_(sw_tile_set_create(picked, m, 1, &set));
      const int op = (int)(sw_test_random(&rng) % 4);
      if (op <= 1) { /* an update of the picked tiles, in the order picked */
        for (size_t i = 0; i < m; ++i)
          for (int64_t w = 0; w < T; ++w) {
            const float v = (float)(c * 1000000 + step * 1000 + (int)i) + (float)(w % 977) / 1024.0f;
            values[i * (size_t)T + (size_t)w] = v;
            shadow[(size_t)(picked[i] * T + w)] = v;
          }
        const int64_t* axis = picked;
        sw_tile_selection_t* sel = NULL;
        SW_OK_(sw_tile_selection_create(&axis, &m, 1, &sel));
        const int64_t extent = (int64_t)m * T;
        sw_tensor_t* compact = NULL;
        SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, &extent, 1, values, &compact));
        sw_await_t* a = NULL;
        SW_OK_(sw_tiled_update_async(tiled, full, compact, sel, SW_SCATTER_REPLACE, &a));
        SW_OK_(sw_await_wait(a, -1));
        sw_await_release(a);
        sw_tensor_release(compact);
        sw_tile_selection_release(sel);
      } else if (op == 2) {
        SW_OK_(sw_tiled_promote(tiled, set));
      } else {
        SW_OK_(sw_tiled_evict(tiled, set));
      }
      sw_tile_set_release(set);
      if (step % 8 == 7) {
        SW_OK_(sw_tensor_read(full, got, n * sizeof(float)));
        for (size_t i = 0; i < n; ++i)
          if (got[i] != shadow[i])
            fail_msg("case %d (%lld tiles of %lld, budget %zu, chunk %zu), step %d: element %zu is %g, not %g", c,
                     (long long)G, (long long)T, budget, d.chunk_bytes, step, i, (double)got[i], (double)shadow[i]);
      }
    }
    /* Everything evicted: the file itself holds every last value. */
    int64_t all[16];
    for (int64_t k = 0; k < G; ++k) all[k] = k;
    sw_tile_set_t* every = NULL;
    SW_OK_(sw_tile_set_create(all, (size_t)G, 1, &every));
    SW_OK_(sw_tiled_evict(tiled, every));
    sw_tile_set_release(every);
    SW_OK_(sw_carrier_read(file, 0, n, got));
    assert_memory_equal(got, shadow, n * sizeof(float));
    sw_tensor_release(full);
    sw_carrier_release(tiled);
    sw_lru_policy_release(lru);
    sw_carrier_release(file);
    free(got);
    free(values);
    free(shadow);
  }
}

/* ---- threads -------------------------------------------------------------- */

typedef struct {
  const sw_carrier_t* carrier;
  size_t first, count;
  int ok;
} reader_t;

static void* read_range(void* arg) {
  reader_t* r = (reader_t*)arg;
  float* back = (float*)malloc(r->count * sizeof(float));
  r->ok = 1;
  for (int rep = 0; rep < 20 && r->ok; ++rep) {
    sw_error_t* e = sw_carrier_read(r->carrier, r->first, r->count, back);
    if (e) {
      sw_error_free(e);
      r->ok = 0;
      break;
    }
    for (size_t i = 0; i < r->count; ++i)
      if (back[i] != pattern(r->first + i, 5)) r->ok = 0;
  }
  free(back);
  return NULL;
}

static void concurrent_readers(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  const size_t n = 40000;
  sw_carrier_t* c = create_file(f, SW_DTYPE_F32, n, &d);
  float* v = pattern_array(n, 5);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  pthread_t threads[4];
  reader_t readers[4];
  for (int t = 0; t < 4; ++t) {
    readers[t].carrier = c;
    readers[t].first = (size_t)t * 7001 + 3;
    readers[t].count = 12000;
    pthread_create(&threads[t], NULL, read_range, &readers[t]);
  }
  for (int t = 0; t < 4; ++t) {
    pthread_join(threads[t], NULL);
    assert_true(readers[t].ok);
  }
  free(v);
  sw_carrier_release(c);
}

/* ---- asynchronous transfers (sw_move_async) --------------------------------- */

static sw_tensor_t* dense_view(sw_carrier_t* c, int64_t n) {
  sw_layout_t* layout = NULL;
  SW_OK_(sw_layout_dense(&n, 1, &layout));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, layout, &t));
  sw_layout_release(layout);
  return t;
}

/* Moves `t` into `destination`; returns the result tensor. */
static sw_tensor_t* move_and_wait(sw_tensor_t* t, sw_carrier_t* destination) {
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, destination, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* result = NULL;
  SW_OK_(sw_await_result(a, &result));
  assert_non_null(result);
  sw_await_release(a);
  return result;
}

/* CPU -> file -> CPU through many pipelined requests, with and without
 * O_DIRECT, into an empty file carrier and into a sized one. */
static void move_through_file_round_trip(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 300007; /* ~293 requests of 4096 bytes each way */
  float* v = pattern_array(n, 11);
  for (int variant = 0; variant < 4; ++variant) {
    const bool direct = variant & 1, empty = variant & 2;
    sw_file_carrier_desc_t d = small_chunks(f->dir, direct);
    sw_carrier_t* cpu = NULL;
    SW_OK_(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, v, n, &cpu));
    sw_tensor_t* t = dense_view(cpu, (int64_t)n);
    sw_carrier_t* file = create_file(f, SW_DTYPE_F32, empty ? 0 : n, &d);

    sw_tensor_t* on_file = move_and_wait(t, file);
    assert_true(is_disposed(cpu)); /* the source is gone */
    assert_int_equal(size_of(file), n);
    assert_int_equal(version_of(file), 1);
    assert_false(is_owned(file));
    expect_f32(file, v, n);

    sw_carrier_t* back = NULL;
    SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &back));
    sw_tensor_t* on_cpu = move_and_wait(on_file, back);
    assert_true(is_disposed(file));
    assert_int_equal(count_entries(f->dir, NULL, 0), 0); /* disposed: file removed */
    int64_t numel = 0;
    SW_OK_(sw_tensor_numel(on_cpu, &numel));
    assert_int_equal(numel, n);
    float* got = (float*)malloc(n * sizeof(float));
    SW_OK_(sw_tensor_read(on_cpu, got, n * sizeof(float)));
    assert_memory_equal(got, v, n * sizeof(float));
    free(got);

    sw_tensor_release(on_cpu);
    sw_tensor_release(on_file);
    sw_tensor_release(t);
    sw_carrier_release(back);
    sw_carrier_release(file);
    sw_carrier_release(cpu);
  }
  free(v);
}

/* A read fault in the middle of a file -> CPU move fails the await with IO;
 * the file carrier keeps its values and a retry succeeds. */
static void move_with_injected_read_fault(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 100003;
  float* v = pattern_array(n, 12);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  sw_carrier_t* file = create_file(f, SW_DTYPE_F32, n, &d);
  SW_OK_(sw_carrier_write(file, 0, n, v));
  sw_tensor_t* t = dense_view(file, (int64_t)n);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));

  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_READ, 17));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, cpu, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected read failure");
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected read failure"); /* the same every time */
  sw_await_status_t status = SW_AWAIT_PENDING;
  SW_OK_(sw_await_query(a, &status));
  assert_int_equal(status, SW_AWAIT_FAILED);
  sw_await_release(a);

  /* Both carriers are usable and unchanged. */
  assert_false(is_disposed(file));
  assert_false(is_owned(file));
  assert_false(is_owned(cpu));
  assert_int_equal(version_of(file), 1);
  assert_int_equal(size_of(cpu), 0);
  expect_f32(file, v, n);
  assert_int_equal(open_scratch_files(f->dir, NULL, 0), 1);

  /* The fault was one-shot: the retry succeeds. */
  sw_tensor_t* result = move_and_wait(t, cpu);
  assert_true(is_disposed(file));
  expect_f32(cpu, v, n);
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  sw_tensor_release(result);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(file);
  free(v);
}

/* A write fault in a CPU -> file move leaves the file carrier as it was. */
static void move_with_injected_write_fault(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 50001;
  float* before = pattern_array(n, 13);
  float* v = pattern_array(n, 14);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  sw_carrier_t* file = create_file(f, SW_DTYPE_F32, n, &d);
  SW_OK_(sw_carrier_write(file, 0, n, before));
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, v, n, &cpu));
  sw_tensor_t* t = dense_view(cpu, (int64_t)n);

  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 9));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, file, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected write failure");
  sw_await_release(a);
  assert_false(is_disposed(cpu));
  assert_int_equal(version_of(file), 1);
  expect_f32(file, before, n);
  expect_f32(cpu, v, n);

  sw_tensor_t* result = move_and_wait(t, file);
  assert_int_equal(version_of(file), 2);
  expect_f32(file, v, n);
  sw_tensor_release(result);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(file);
  free(v);
  free(before);
}

/* A failed move into an empty file carrier leaves it empty, file included. */
static void failed_move_into_empty_file_stays_empty(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 40009;
  float* v = pattern_array(n, 17);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  sw_carrier_t* file = create_file(f, SW_DTYPE_F32, 0, &d);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, v, n, &cpu));
  sw_tensor_t* t = dense_view(cpu, (int64_t)n);
  char path[64]; /* the unlinked scratch file, through /proc/self/fd */
  assert_int_equal(open_scratch_files(f->dir, path, sizeof path), 1);
  struct stat st;

  /* The allocation itself fails: OUT_OF_MEMORY. */
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_ALLOCATION, 1));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, file, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_OUT_OF_MEMORY, NULL);
  sw_await_release(a);
  assert_int_equal(size_of(file), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 0);

  /* A write request fails half way: the file is truncated back to nothing. */
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_WRITE, 20));
  SW_OK_(sw_move_async(t, file, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected write failure");
  sw_await_release(a);
  assert_int_equal(size_of(file), 0);
  assert_int_equal(version_of(file), 0);
  assert_false(is_owned(file));
  assert_false(is_disposed(cpu));
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 0);
  uint64_t stored = 1;
  SW_OK_(sw_carrier_stored_bytes(file, &stored));
  assert_int_equal(stored, 0);

  sw_tensor_t* result = move_and_wait(t, file);
  assert_int_equal(size_of(file), n);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, n * sizeof(float));
  expect_f32(file, v, n);
  sw_tensor_release(result);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(file);
  free(v);
}

/* Shutting the runtime down while a promotion is in flight: the await ends
 * (CANCELLED, or succeeded if it won the race), the file carrier keeps its
 * values when cancelled, and synchronous access keeps working. */
static void shutdown_during_promotion(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 1 << 20;
  float* v = pattern_array(n, 18);
  sw_file_carrier_desc_t d = small_chunks(f->dir, false);
  d.requests_in_flight = 1;
  sw_carrier_t* file = create_file(f, SW_DTYPE_F32, n, &d);
  SW_OK_(sw_carrier_write(file, 0, n, v));
  sw_tensor_t* t = dense_view(file, (int64_t)n);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, cpu, &a));
  SW_OK_(sw_runtime_shutdown(f->rt));
  sw_await_status_t status = SW_AWAIT_PENDING;
  SW_OK_(sw_await_query(a, &status));
  assert_int_not_equal(status, SW_AWAIT_PENDING);
  sw_error_t* e = sw_await_wait(a, 0);
  assert_false(is_owned(file));
  assert_false(is_owned(cpu));
  if (e) {
    assert_int_equal(sw_error_code(e), SW_ERROR_CANCELLED);
    sw_error_free(e);
    assert_false(is_disposed(file));
    assert_int_equal(size_of(cpu), 0);
    expect_f32(file, v, n);
    assert_int_equal(open_scratch_files(f->dir, NULL, 0), 1);
  } else {
    assert_true(is_disposed(file));
    expect_f32(cpu, v, n);
  }
  sw_await_release(a);
  /* Asynchronous calls now fail CANCELLED; synchronous ones still work. */
  sw_carrier_t* other = create_file(f, SW_DTYPE_F32, n, &d);
  SW_OK_(sw_carrier_write(other, 0, n, v));
  expect_f32(other, v, n);
  sw_carrier_t* cpu2 = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu2));
  sw_tensor_t* t2 = dense_view(other, (int64_t)n);
  SW_FAILS(sw_move_async(t2, cpu2, &a), SW_ERROR_CANCELLED, NULL);
  sw_tensor_release(t2);
  sw_carrier_release(cpu2);
  sw_carrier_release(other);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(file);
  assert_int_equal(count_entries(f->dir, NULL, 0), 0);
  free(v);
}

static sw_carrier_t* open_weights(fixture_t* f, char* path, size_t capacity, const float* v, size_t n) {
  snprintf(path, capacity, "%s/weights.bin", f->dir);
  write_whole_file(path, v, n * sizeof(float));
  sw_file_carrier_desc_t d = small_chunks(NULL, false);
  sw_carrier_t* weights = NULL;
  SW_OK_(sw_carrier_open_file(f->rt, SW_DTYPE_F32, path, 0, n, &d, &weights));
  return weights;
}

/* Nothing moves into a read-only file. */
static void move_into_read_only_file_is_state(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 30011;
  float* v = pattern_array(n, 15);
  float* w = pattern_array(n, 16);
  char path[512];
  sw_carrier_t* weights = open_weights(f, path, sizeof path, v, n);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, w, n, &cpu));
  sw_tensor_t* t = dense_view(cpu, (int64_t)n);
  sw_await_t* a = (sw_await_t*)0x1;
  SW_FAILS(sw_move_async(t, weights, &a), SW_ERROR_STATE, "read-only");
  assert_ptr_equal(a, (sw_await_t*)0x1);
  assert_false(is_disposed(cpu));
  assert_false(is_owned(weights));
  expect_f32(weights, v, n);
  expect_file_bytes(path, v, n * sizeof(float));
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(weights);
  expect_file_bytes(path, v, n * sizeof(float));
  free(w);
  free(v);
}

/* A read-only file (a weights file) can be promoted to CPU: the move
 * disposes the carrier, and the user's file stays as it was. */
static void move_from_read_only_file(void** state) {
  fixture_t* f = FIXTURE(state);
  const size_t n = 30011;
  float* v = pattern_array(n, 15);
  char path[512];
  sw_carrier_t* weights = open_weights(f, path, sizeof path, v, n);
  sw_tensor_t* t = dense_view(weights, (int64_t)n);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, cpu, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* promoted = NULL;
  SW_OK_(sw_await_result(a, &promoted));
  sw_await_release(a);
  assert_true(is_disposed(weights));
  expect_f32(cpu, v, n);
  expect_file_bytes(path, v, n * sizeof(float)); /* the user's file stays */
  sw_tensor_release(promoted);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(weights);
  expect_file_bytes(path, v, n * sizeof(float));
  free(v);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--scratch-child") == 0) return scratch_child(argv[2]);
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
  const struct CMUnitTest tests[] = {
      T(desc_init_defaults),
      T(create_rejects_bad_arguments),
      T(open_rejects_bad_arguments),
      T(create_is_zero_filled),
      T(crash_leaves_no_scratch_file),
      T(default_directory_is_tmpdir),
      T(round_trips_at_odd_offsets),
      T(byte_dtype_round_trip),
      T(dispose_closes_the_file),
      T(claimed_carrier_keeps_its_file),
      T(open_reads_a_user_file),
      T(open_region_past_end_is_value),
      T(open_missing_file_is_io),
      T(injected_faults_fail_sync_access),
      T(direct_io_matches_buffered),
      T(direct_io_dirty_tiles_survive),
      T(concurrent_readers),
      T(move_through_file_round_trip),
      T(move_with_injected_read_fault),
      T(move_with_injected_write_fault),
      T(failed_move_into_empty_file_stays_empty),
      T(shutdown_during_promotion),
      T(move_into_read_only_file_is_state),
      T(move_from_read_only_file),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
