/* The device profile: a file carrier with direct_io and chunk_bytes /
 * requests_in_flight left 0 takes the measured best of its device, measured
 * once (the probe) and kept in a cache file. sw_file_carrier_io says what a
 * carrier uses and where it came from.
 *
 * The runtime keeps the profiles it knows for the life of the process, so
 * every case that needs a process that knows none runs in a child (fork):
 * the parent never opens a file that the probe would measure. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "sw_test.h"
#include "sw_file_test.h"

#define MIB ((size_t)1 << 20)
/* Large enough to be measured (the runtime's floor is 64 MiB). */
#define BIG_BYTES (64 * MIB)

static char big_path[512], small_path[512], cache_dir[512], cache_file[600];
static bool direct_works;

/* The fixture's directory holds a 64 MiB file, a 1 MiB one and the cache. */
static int setup(void** state) {
  if (file_fixture_setup(state, "sw_device_profile") != 0) return -1;
  fixture_t* f = FIXTURE(state);
  path_in(f, "big.bin", big_path, sizeof big_path);
  path_in(f, "small.bin", small_path, sizeof small_path);
  path_in(f, "cache", cache_dir, sizeof cache_dir);
  snprintf(cache_file, sizeof cache_file, "%s/io-devices", cache_dir);
  unsigned char* bytes = (unsigned char*)malloc(BIG_BYTES);
  if (!bytes) return -1;
  for (size_t i = 0; i < BIG_BYTES; ++i) bytes[i] = (unsigned char)(i * 2654435761u >> 13);
  FILE* fp = fopen(big_path, "wb");
  if (!fp || fwrite(bytes, 1, BIG_BYTES, fp) != BIG_BYTES || fclose(fp) != 0) return -1;
  free(bytes);
  static unsigned char one[MIB];
  write_bytes(small_path, one, MIB);
  const int fd = open(big_path, O_RDONLY | O_DIRECT);
  direct_works = fd >= 0;
  if (fd >= 0) close(fd);
  setenv("STRIDEWEAVE_CACHE_DIR", cache_dir, 1);
  unsetenv("STRIDEWEAVE_IO_PROBE");
  return 0;
}

static int teardown(void** state) {
  unlink(cache_file);
  rmdir(cache_dir);
  return fixture_teardown(state);
}

static sw_file_carrier_desc_t direct_desc(const char* dir) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = dir;
  d.direct_io = true;
  return d;
}

static sw_file_carrier_io_t io_of(sw_carrier_t* c) {
  sw_file_carrier_io_t io;
  sw_file_carrier_io_init(&io);
  SW_OK_(sw_file_carrier_io(c, &io));
  return io;
}

static sw_carrier_t* open_file(sw_runtime_t* rt, const char* path, size_t bytes, const sw_file_carrier_desc_t* d) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_open_file(rt, SW_DTYPE_U8, path, 0, bytes, d, &c));
  return c;
}

/* The start of a cache line for the test files' device, as the runtime
 * writes it: the format, "major:minor" and the size in sectors from sysfs
 * ("-" without one). */
static void device_line(char* out, size_t capacity) {
  struct stat st;
  assert_int_equal(stat(big_path, &st), 0);
  char sysfs[128], identity[64] = "-";
  snprintf(sysfs, sizeof sysfs, "/sys/dev/block/%u:%u/size", major(st.st_dev), minor(st.st_dev));
  FILE* fp = fopen(sysfs, "r");
  if (fp) {
    if (fscanf(fp, "%63s", identity) != 1) snprintf(identity, sizeof identity, "-");
    fclose(fp);
  }
  snprintf(out, capacity, "strideweave-io-devices-1 %u:%u %s", major(st.st_dev), minor(st.st_dev), identity);
}

/* The cache file's lines, into `out` (NUL-separated); the count. */
static int cache_lines(char out[][256], int capacity) {
  if (access(cache_file, R_OK) != 0) return -1;
  size_t size = 0;
  unsigned char* text = read_bytes(cache_file, &size);
  text[size] = 0;
  int n = 0;
  for (char* line = strtok((char*)text, "\n"); line && n < capacity; line = strtok(NULL, "\n"))
    snprintf(out[n++], 256, "%s", line);
  free(text);
  return n;
}

static void write_cache(const char* text) {
  mkdir(cache_dir, 0755);
  FILE* fp = fopen(cache_file, "w");
  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
}

/* Runs `body` in a child process with its own runtime; the child's exit
 * status is the number of its failed checks. */
typedef int (*child_fn)(sw_runtime_t* rt, const char* dir);
static int in_child(child_fn body, const char* dir) {
  fflush(NULL);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    sw_runtime_t* rt = NULL;
    sw_error_t* e = sw_runtime_create(NULL, &rt);
    if (e) _exit(100);
    const int failures = body(rt, dir);
    sw_runtime_release(rt);
    _exit(failures);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "child check failed: %s (line %d)\n", #cond, __LINE__); \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

/* In a child: the io of a carrier over the first `bytes` of `path` opened
 * with `d`, released again (the process keeps the profile); false when the
 * open or the query failed. */
static bool opened_io(sw_runtime_t* rt, const char* path, size_t bytes, const sw_file_carrier_desc_t* d,
                      sw_file_carrier_io_t* io) {
  sw_carrier_t* c = NULL;
  if (sw_carrier_open_file(rt, SW_DTYPE_U8, path, 0, bytes, d, &c)) return false;
  sw_file_carrier_io_init(io);
  const bool ok = sw_file_carrier_io(c, io) == NULL;
  sw_carrier_release(c);
  return ok;
}

/* In a child: moves n values CPU -> a new scratch carrier made with `d` ->
 * CPU, the scratch carrier's io into *io and the runtime's request counts
 * into *qs afterwards; false when a call failed or a value came back wrong. */
static bool round_trip(sw_runtime_t* rt, const sw_file_carrier_desc_t* d, size_t n, sw_file_carrier_io_t* io,
                       sw_io_queue_stats_t* qs) {
  float* v = (float*)malloc(n * sizeof(float));
  float* got = (float*)malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) v[i] = (float)(i % 4099) * 0.5f - 17.0f;
  sw_carrier_t *scratch = NULL, *cpu = NULL, *back = NULL;
  int64_t extent = (int64_t)n;
  sw_layout_t* layout = NULL;
  sw_tensor_t *t = NULL, *on_file = NULL, *on_cpu = NULL;
  sw_await_t *a = NULL, *b = NULL;
  sw_file_carrier_io_init(io);
  sw_io_queue_stats_init(qs);
  const bool ok =
      !sw_carrier_create_file(rt, SW_DTYPE_F32, 0, d, &scratch) && !sw_file_carrier_io(scratch, io) &&
      !sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, v, n, &cpu) && !sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &back) &&
      !sw_layout_dense(&extent, 1, &layout) && !sw_tensor_create(cpu, 0, layout, &t) &&
      !sw_move_async(t, scratch, &a) && !sw_await_wait(a, -1) && !sw_await_result(a, &on_file) &&
      !sw_move_async(on_file, back, &b) && !sw_await_wait(b, -1) && !sw_await_result(b, &on_cpu) &&
      !sw_tensor_read(on_cpu, got, n * sizeof(float)) && memcmp(got, v, n * sizeof(float)) == 0 &&
      !sw_testing_io_queue_stats(rt, qs);
  sw_await_release(b);
  sw_await_release(a);
  sw_tensor_release(on_cpu);
  sw_tensor_release(on_file);
  sw_tensor_release(t);
  sw_layout_release(layout);
  sw_carrier_release(back);
  sw_carrier_release(cpu);
  sw_carrier_release(scratch);
  free(v);
  free(got);
  return ok;
}

static bool is_probe_choice(const sw_file_carrier_io_t* io) {
  return (io->chunk_bytes == MIB || io->chunk_bytes == 2 * MIB || io->chunk_bytes == 4 * MIB) &&
         (io->requests_in_flight == 2 || io->requests_in_flight == 4 || io->requests_in_flight == 8) &&
         io->device_read_bytes_per_second > 0;
}

/* ---- without a measure ------------------------------------------------- */

static void io_of_refuses_bad_arguments(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_carrier_t* host = NULL;
  SW_OK_(sw_carrier_create_host(f->rt, SW_DTYPE_F32, 4, &host));
  sw_file_carrier_io_t io;
  sw_file_carrier_io_init(&io);
  SW_FAILS(sw_file_carrier_io(host, &io), SW_ERROR_TYPE, "not a File carrier");
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = f->dir;
  sw_carrier_t* file = NULL;
  SW_OK_(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, &d, &file));
  SW_FAILS(sw_file_carrier_io(file, NULL), SW_ERROR_VALUE, "out_io");
  io.struct_size = 3;
  SW_FAILS(sw_file_carrier_io(file, &io), SW_ERROR_VALUE, "out_io");
  SW_FAILS(sw_file_carrier_io(NULL, &io), SW_ERROR_TYPE, "carrier");
  sw_file_carrier_io_init(NULL);
  sw_carrier_release(file);
  sw_carrier_release(host);
}

static void buffered_takes_the_defaults(void** state) {
  fixture_t* f = FIXTURE(state);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  sw_carrier_t* c = open_file(f->rt, big_path, BIG_BYTES, &d);
  const sw_file_carrier_io_t io = io_of(c);
  assert_int_equal(io.chunk_bytes, 4 * MIB);
  assert_int_equal(io.requests_in_flight, 4);
  assert_false(io.direct_io);
  assert_int_equal(io.source, SW_IO_PROFILE_DEFAULT);
  assert_true(io.device_read_bytes_per_second == 0);
  sw_carrier_release(c);
  assert_int_equal(access(cache_file, F_OK), -1); /* nothing measured, nothing written */
}

static int probe_off_child(sw_runtime_t* rt, const char* dir) {
  (void)dir;
  int failures = 0;
  setenv("STRIDEWEAVE_IO_PROBE", "0", 1);
  sw_file_carrier_desc_t d = direct_desc(NULL);
  sw_file_carrier_io_t io;
  if (!opened_io(rt, big_path, BIG_BYTES, &d, &io)) return 50;
  CHECK(io.source == SW_IO_PROFILE_DEFAULT);
  CHECK(io.chunk_bytes == 4 * MIB && io.requests_in_flight == 4);
  CHECK(io.direct_io);
  return failures;
}

static void probe_off_takes_the_defaults(void** state) {
  if (!direct_works) SW_SKIP("the test directory's file system refuses O_DIRECT");
  fixture_t* f = FIXTURE(state);
  char line[192], valid[256];
  device_line(line, sizeof line);
  snprintf(valid, sizeof valid, "%s 1048576 4 1000000000 1\n", line);
  write_cache(valid); /* even a usable line is not read */
  assert_int_equal(in_child(probe_off_child, f->dir), 0);
  assert_int_equal(unlink(cache_file), 0);
}

static int small_file_child(sw_runtime_t* rt, const char* dir) {
  (void)dir;
  int failures = 0;
  sw_file_carrier_desc_t d = direct_desc(NULL);
  sw_file_carrier_io_t io;
  if (!opened_io(rt, small_path, MIB, &d, &io)) return 50;
  CHECK(io.source == SW_IO_PROFILE_DEFAULT);
  CHECK(io.chunk_bytes == 4 * MIB && io.requests_in_flight == 4);
  return failures;
}

static void small_file_is_not_measured(void** state) {
  if (!direct_works) SW_SKIP("the test directory's file system refuses O_DIRECT");
  fixture_t* f = FIXTURE(state);
  assert_int_equal(in_child(small_file_child, f->dir), 0);
  assert_int_equal(access(cache_file, F_OK), -1);
}

/* ---- measured --------------------------------------------------------- */

static sw_file_carrier_io_t first_probe;

/* Measures, then finds the result for a second open, a scratch carrier in
 * the same directory and a carrier that sets its own chunk; moves values
 * through the scratch carrier's device slots. */
static int probe_child(sw_runtime_t* rt, const char* dir) {
  int failures = 0;
  sw_file_carrier_desc_t d = direct_desc(NULL);
  sw_file_carrier_io_t io;
  if (!opened_io(rt, big_path, BIG_BYTES, &d, &io)) return 50;
  CHECK(io.source == SW_IO_PROFILE_PROBED);
  CHECK(io.direct_io);
  CHECK(is_probe_choice(&io));
  struct stat st;
  CHECK(stat(big_path, &st) == 0 && io.device == (uint64_t)st.st_dev);

  sw_file_carrier_io_t io2;
  if (!opened_io(rt, big_path, BIG_BYTES, &d, &io2)) return 51;
  CHECK(io2.source == SW_IO_PROFILE_CACHED);
  CHECK(io2.chunk_bytes == io.chunk_bytes && io2.requests_in_flight == io.requests_in_flight);
  CHECK(io2.device_read_bytes_per_second == io.device_read_bytes_per_second);

  /* The caller's chunk wins; the device gives the rest. */
  sw_file_carrier_desc_t own = direct_desc(NULL);
  own.chunk_bytes = 12345;
  sw_file_carrier_io_t io3;
  if (!opened_io(rt, big_path, BIG_BYTES, &own, &io3)) return 52;
  CHECK(io3.chunk_bytes == 16384); /* rounded up to whole 4096-byte blocks */
  CHECK(io3.requests_in_flight == io.requests_in_flight);

  /* A scratch carrier of the directory: known profile, never measured. */
  const size_t n = 3 * MIB + 777; /* several requests, an unaligned end */
  sw_file_carrier_desc_t sd = direct_desc(dir);
  sw_file_carrier_io_t io4;
  sw_io_queue_stats_t qs;
  if (!round_trip(rt, &sd, n, &io4, &qs)) return 53;
  CHECK(io4.source == SW_IO_PROFILE_CACHED);
  CHECK(io4.chunk_bytes == io.chunk_bytes && io4.requests_in_flight == io.requests_in_flight);
  CHECK(qs.demand_requests >= 2 * (n * sizeof(float) / io.chunk_bytes));
  CHECK(qs.max_in_flight >= 1 && qs.max_in_flight <= io.requests_in_flight);
  /* Through the ring when there is one: every request of the two moves
   * but the write of the unaligned end, which is buffered. */
  CHECK(qs.io_uring ? qs.ring_requests == qs.demand_requests - 1 : qs.ring_requests == 0);
  return failures;
}

static int cached_child(sw_runtime_t* rt, const char* dir) {
  (void)dir;
  int failures = 0;
  sw_file_carrier_desc_t d = direct_desc(NULL);
  sw_file_carrier_io_t io;
  if (!opened_io(rt, big_path, BIG_BYTES, &d, &io)) return 50;
  CHECK(io.source == SW_IO_PROFILE_CACHED);
  /* What the cache holds (the rate as whole bytes per second). */
  CHECK(io.chunk_bytes == first_probe.chunk_bytes && io.requests_in_flight == first_probe.requests_in_flight);
  CHECK(io.device_read_bytes_per_second == (double)(long long)first_probe.device_read_bytes_per_second);
  return failures;
}

static int report_child(sw_runtime_t* rt, const char* dir) {
  (void)dir;
  sw_file_carrier_desc_t d = direct_desc(NULL);
  sw_file_carrier_io_t io;
  if (!opened_io(rt, big_path, BIG_BYTES, &d, &io)) return 250;
  return (int)io.source;
}

static void probe_measures_once_and_caches(void** state) {
  if (!direct_works) SW_SKIP("the test directory's file system refuses O_DIRECT");
  fixture_t* f = FIXTURE(state);
  assert_int_equal(in_child(probe_child, f->dir), 0);

  /* One line, for the file's device, in the documented format. */
  char lines[8][256];
  assert_int_equal(cache_lines(lines, 8), 1);
  char line[192];
  device_line(line, sizeof line);
  assert_memory_equal(lines[0], line, strlen(line));
  unsigned long long chunk = 0, depth = 0, rate = 0, when = 0;
  assert_int_equal(sscanf(lines[0] + strlen(line), " %llu %llu %llu %llu", &chunk, &depth, &rate, &when), 4);
  first_probe.chunk_bytes = chunk;
  first_probe.requests_in_flight = (uint32_t)depth;
  first_probe.device_read_bytes_per_second = (double)rate;
  assert_true(is_probe_choice(&first_probe));

  /* A new process finds it there and measures nothing. */
  assert_int_equal(in_child(cached_child, f->dir), 0);

  /* refresh measures again and replaces the line. */
  setenv("STRIDEWEAVE_IO_PROBE", "refresh", 1);
  assert_int_equal(in_child(report_child, f->dir), SW_IO_PROFILE_PROBED);
  unsetenv("STRIDEWEAVE_IO_PROBE");
  assert_int_equal(cache_lines(lines, 8), 1);
  assert_int_equal(in_child(report_child, f->dir), SW_IO_PROFILE_CACHED);
}

static void damaged_or_foreign_lines_are_measured_anew(void** state) {
  if (!direct_works) SW_SKIP("the test directory's file system refuses O_DIRECT");
  fixture_t* f = FIXTURE(state);
  struct stat st;
  assert_int_equal(stat(big_path, &st), 0);
  const unsigned ma = major(st.st_dev), mi = minor(st.st_dev);
  char text[1024];
  /* Damaged lines for the device (no chunk, a chunk off the block size, a
   * zero depth, a rate that is not a number, too few fields), another
   * device's valid line, and the device's line under another identity. */
  snprintf(text, sizeof text,
           "garbage\n"
           "strideweave-io-devices-1 %u:%u - 0 2 1000 1\n"
           "strideweave-io-devices-1 %u:%u - 1000 2 1000 1\n"
           "strideweave-io-devices-1 %u:%u - 1048576 0 1000 1\n"
           "strideweave-io-devices-1 %u:%u - 1048576 2 fast 1\n"
           "strideweave-io-devices-1 %u:%u - 1048576\n"
           "strideweave-io-devices-0 %u:%u - 1048576 2 1000 1\n"
           "strideweave-io-devices-1 %u:%u 1 1048576 2 1000 1\n"
           "strideweave-io-devices-1 999:%u - 2097152 4 5000 1\n",
           ma, mi, ma, mi, ma, mi, ma, mi, ma, mi, ma, mi, ma, mi, mi);
  write_cache(text);
  assert_int_equal(in_child(report_child, f->dir), SW_IO_PROFILE_PROBED);
  /* Rewritten: the other device's line kept, the damaged ones dropped. */
  char lines[16][256];
  const int n = cache_lines(lines, 16);
  assert_int_equal(n, 2);
  assert_non_null(strstr(lines[0], "999:"));
  char mine[64];
  snprintf(mine, sizeof mine, "strideweave-io-devices-1 %u:%u ", ma, mi);
  assert_memory_equal(lines[1], mine, strlen(mine));
  assert_int_equal(unlink(cache_file), 0);
}

/* ---- io_uring --------------------------------------------------------- */

/* Moves values CPU -> file -> CPU through a scratch carrier with explicit
 * settings; returns the ring's requests, or -1 on a failed check. */
static long long ring_round_trip(sw_runtime_t* rt, const char* dir, bool direct, bool* ring) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = dir;
  d.direct_io = direct;
  d.chunk_bytes = MIB;
  d.requests_in_flight = 3;
  sw_file_carrier_io_t io;
  sw_io_queue_stats_t qs;
  if (!round_trip(rt, &d, 2 * MIB + 5, &io, &qs)) return -1;
  *ring = qs.io_uring;
  return (long long)qs.ring_requests;
}

/* 8 MiB + 20 bytes each way in 1 MiB requests: the write's eight whole
 * ones through the ring (its unaligned end is buffered), the read's nine
 * (its end read as whole blocks). */
static int ring_child(sw_runtime_t* rt, const char* dir) {
  int failures = 0;
  bool ring = false;
  const long long buffered = ring_round_trip(rt, dir, false, &ring);
  CHECK(buffered == 0); /* buffered requests stay on the thread pool */
  const long long direct = ring_round_trip(rt, dir, true, &ring);
  const char* mode = getenv("STRIDEWEAVE_IO");
  if (mode && strcmp(mode, "threads") == 0) {
    CHECK(!ring);
    CHECK(direct == 0);
  } else {
#ifdef SW_TEST_HAS_URING
    CHECK(ring);
#endif
    CHECK(direct == (ring ? 17 : 0));
    if (direct != (ring ? 17 : 0)) fprintf(stderr, "ring requests %lld\n", direct);
  }
  return failures;
}

static bool kernel_allows_uring(void) {
  FILE* fp = fopen("/proc/sys/kernel/io_uring_disabled", "r");
  if (!fp) return true; /* older kernels: no such switch */
  int disabled = 0;
  const int got = fscanf(fp, "%d", &disabled);
  fclose(fp);
  return got != 1 || disabled == 0;
}

static void direct_transfers_go_through_the_ring(void** state) {
  if (!direct_works) SW_SKIP("the test directory's file system refuses O_DIRECT");
#ifdef SW_TEST_HAS_URING
  if (!kernel_allows_uring()) SW_SKIP("the kernel refuses io_uring (kernel.io_uring_disabled)");
#else
  (void)kernel_allows_uring;
#endif
  fixture_t* f = FIXTURE(state);
  unsetenv("STRIDEWEAVE_IO");
  assert_int_equal(in_child(ring_child, f->dir), 0);
  setenv("STRIDEWEAVE_IO", "threads", 1);
  assert_int_equal(in_child(ring_child, f->dir), 0);
  unsetenv("STRIDEWEAVE_IO");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(io_of_refuses_bad_arguments),
      cmocka_unit_test(buffered_takes_the_defaults),
      cmocka_unit_test(probe_off_takes_the_defaults),
      cmocka_unit_test(small_file_is_not_measured),
      cmocka_unit_test(probe_measures_once_and_caches),
      cmocka_unit_test(damaged_or_foreign_lines_are_measured_anew),
      cmocka_unit_test(direct_transfers_go_through_the_ring),
  };
  return sw_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
