/*
 * bench_file: promotion bandwidth from the file tier against plain reads of
 * the same file, in the same process so that the ratio survives this
 * machine's 10-30 % drift. Two modes.
 *
 * Page-cache mode (the default):
 *
 *   StrideWeave   sw_move_async of a dense f32 tensor on a read-only file
 *                 carrier (sw_carrier_open_file over the benchmark's file,
 *                 chunk_bytes = the chunk size, requests_in_flight = K) into
 *                 an empty CPU carrier, which the move allocates; timed from
 *                 sw_move_async to the end of sw_await_wait.
 *   peer          K pthreads taking chunk-sized pieces of the same file from a
 *                 shared counter and pread()ing them into a warm buffer.
 *
 * for K = 1 and 4. The file (default 512 MiB in 4 MiB chunks) is written once
 * and read once before timing, so both sides read from the page cache.
 *
 * Direct-I/O mode (--direct): the same move from a carrier opened with
 * direct_io and chunk_bytes = requests_in_flight = 0, so that the runtime
 * chooses both for the device, against
 *
 *   pread         Q pthreads taking C-sized pieces of the same file from a
 *                 shared counter and pread()ing them through an O_DIRECT
 *                 descriptor into a pre-touched buffer, aligned to and
 *                 advised to use huge pages as the move's destination, for
 *                 Q in {1, 2, 4, 8} and C in {1, 4} MiB; the peer's figure is
 *                 the configuration with the best median;
 *   fio           when `fio` is on the PATH: one fio run per repetition of
 *                 sequential O_DIRECT reads (io_uring, else libaio, else
 *                 psync) of the file's first 512 MiB at most, with bs in
 *                 {1M, 4M} and iodepth in {1, 2, 4, 8}, one stonewalled job
 *                 each; the rate fio reports (read bw_bytes). Informational:
 *                 fio times its own jobs, runs them back to back and reads
 *                 into buffers of small pages.
 *
 * The file (default 1024 MiB of pseudo-random non-zero words, fsync'ed, its
 * cached pages dropped) lives in a private directory under DIR, which must
 * be on a real disk: the tool prints a SKIP line and exits 0 on tmpfs or
 * when the file system refuses O_DIRECT. The page cache plays no part, so
 * nothing is warmed; one untimed warm-up of each side (which also checks the
 * bytes both read, and leaves the runtime's one-time measurement of the
 * device, if it makes one, out of the timed runs) precedes R repetitions,
 * each of which runs the pread grid, the move and the fio run, the move
 * always in the middle and the two peers' order swapped every repetition.
 * The runtime's buffer pool is sized to keep the move's destination, as the
 * peer's destination is kept, warm from one repetition to the next. After
 * every move the tool counts the file's pages in the page cache (mincore):
 * any there mean the move read through the page cache (O_DIRECT refused),
 * which it reports.
 *
 * Usage:
 *   build/tools/bench/bench_file [--mib 512] [--chunk-mib 4] [--reps 7] [--dir DIR]
 *   build/tools/bench/bench_file --direct [--mib 1024] [--reps 5] [--dir DIR] [--no-fio]
 *
 * Every figure is the median of R timed repetitions after a warm-up; the
 * StrideWeave move and its peers alternate within each repetition so that
 * noise from other processes (and the disk's drift) hits both alike. The
 * "best" ratio compares the fastest repetitions (in direct mode, against
 * the fastest of the best configuration), which stays meaningful when other
 * processes load the cores (the tool prints the load average). The move
 * reads straight into the CPU destination it allocates, as pread does.
 * Targets (tools/bench/README.md): a ratio of at least 0.80 from the page
 * cache, 0.95 against the best O_DIRECT pread. The last line is
 * "BENCH_JSON {...}" for scripts.
 *
 * While sw_move_async refuses read-only sources, each page-cache repetition
 * fills a scratch file carrier (untimed, then fdatasync'ed so both sides read
 * clean cached pages) and the peer reads that carrier's file; the move then
 * also removes the file, whose last close a worker does off the timed path.
 * Direct mode needs moves from read-only carriers and skips without them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_file"
#include "bench_util.h"

#define MAX_REPS 64

static void die(const char* what) {
  fprintf(stderr, "bench_file: %s: %s\n", what, strerror(errno));
  exit(2);
}

static float value_at(size_t i) { return (float)(i % 1000003) * 0.25f - 7.0f; }

/* ---- the peer: pthreads doing pread --------------------------------------- */

typedef struct {
  int fd;
  unsigned char* buffer;
  size_t bytes, chunk;
  atomic_size_t next;
} pread_job_t;

static void* pread_worker(void* arg) {
  pread_job_t* job = (pread_job_t*)arg;
  for (;;) {
    const size_t offset = atomic_fetch_add(&job->next, job->chunk);
    if (offset >= job->bytes) return NULL;
    size_t length = job->bytes - offset < job->chunk ? job->bytes - offset : job->chunk;
    for (size_t done = 0; done < length;) {
      ssize_t n = pread(job->fd, job->buffer + offset + done, length - done, (off_t)(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("pread");
      done += (size_t)n;
    }
  }
}

static double pread_seconds(int fd, unsigned char* buffer, size_t bytes, size_t chunk, int threads) {
  pread_job_t job = {fd, buffer, bytes, chunk, 0};
  pthread_t tid[16];
  const double t0 = now_seconds();
  for (int t = 0; t < threads; ++t) {
    const int failed = pthread_create(&tid[t], NULL, pread_worker, &job);
    if (failed) {
      errno = failed;
      die("pthread_create");
    }
  }
  for (int t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
  return now_seconds() - t0;
}

/* ---- StrideWeave: move a file-carrier tensor into an empty CPU carrier ---- */

typedef struct {
  sw_runtime_t* rt;
  const char* path;     /* the user file a read-only carrier opens */
  const char* scratch;  /* private directory for scratch carriers */
  const float* values;  /* the file's contents */
  size_t n, chunk;
  int read_only_source; /* else a scratch carrier filled before timing */
} bench_t;

static sw_tensor_t* dense_tensor(sw_carrier_t* carrier, size_t n) {
  const int64_t extent = (int64_t)n;
  sw_layout_t* layout = NULL;
  CHECK(sw_layout_dense(&extent, 1, &layout));
  sw_tensor_t* tensor = NULL;
  CHECK(sw_tensor_create(carrier, 0, layout, &tensor));
  sw_layout_release(layout);
  return tensor;
}

/* Moves the whole of `file` (n f32 elements) into a new CPU carrier and
 * waits: NULL, *seconds from sw_move_async to the end of the wait, the moved
 * bytes checked against `expect` when given; or sw_move_async's error, with
 * nothing moved. The destination is released (its buffer returns to the
 * runtime's pool, and the next repetition reuses it warm). */
static sw_error_t* timed_move(sw_runtime_t* rt, sw_carrier_t* file, size_t n, const void* expect, double* seconds) {
  sw_tensor_t* tensor = dense_tensor(file, n);
  sw_carrier_t* cpu = NULL;
  CHECK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* await = NULL;
  const double t0 = now_seconds();
  sw_error_t* refused = sw_move_async(tensor, cpu, &await);
  if (!refused) {
    CHECK(sw_await_wait(await, -1));
    *seconds = now_seconds() - t0;
    sw_tensor_t* result = NULL;
    CHECK(sw_await_result(await, &result));
    if (expect) {
      void* p = NULL;
      CHECK(sw_carrier_host_pointer(cpu, &p));
      const unsigned char *got = (const unsigned char*)p, *want = (const unsigned char*)expect;
      if (memcmp(got, want, n * sizeof(float)) != 0) {
        size_t at = 0;
        while (got[at] == want[at]) ++at;
        fprintf(stderr, "bench_file: moved byte %zu is 0x%02x, the file's is 0x%02x\n", at, got[at], want[at]);
        exit(2);
      }
    }
    sw_tensor_release(result);
    sw_await_release(await);
  }
  sw_tensor_release(tensor);
  sw_carrier_release(cpu);
  return refused;
}

/* Whether this build moves out of a read-only file carrier (the header allows
 * it; only moves into one are refused). */
static int moves_from_read_only(bench_t* b) {
  sw_carrier_t* file = NULL;
  CHECK(sw_carrier_open_file(b->rt, SW_DTYPE_F32, b->path, 0, 1, NULL, &file));
  sw_tensor_t* tensor = dense_tensor(file, 1);
  sw_carrier_t* cpu = NULL;
  CHECK(sw_carrier_create_cpu(b->rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* await = NULL;
  sw_error_t* refused = sw_move_async(tensor, cpu, &await);
  if (refused) {
    fprintf(stderr, "bench_file: sw_move_async refuses a read-only file source (%s: %s); each repetition fills "
                    "a scratch file carrier instead and the peer reads that carrier's file\n",
            sw_error_code_name(sw_error_code(refused)), sw_error_message(refused));
    sw_error_free(refused);
  } else {
    CHECK(sw_await_wait(await, -1));
    sw_await_release(await);
  }
  sw_tensor_release(tensor);
  sw_carrier_release(cpu);
  sw_carrier_release(file);
  return refused == NULL;
}

/* The only file in `dir` (a scratch carrier's), opened for the peer. */
static int open_scratch_file(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) die("opendir");
  struct dirent* e;
  int fd = -1;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, "strideweave-", 12) == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      fd = open(path, O_RDONLY | O_CLOEXEC);
    }
  closedir(d);
  if (fd < 0) die("open scratch file");
  return fd;
}

/* One repetition: the peer reads the source's file, then the move promotes
 * it. Both read clean pages from the page cache. */
static void repetition(bench_t* b, int in_flight, int verify, int user_fd, unsigned char* warm, double* sw_seconds,
                       double* peer_seconds) {
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.chunk_bytes = b->chunk;
  desc.requests_in_flight = (uint32_t)in_flight;
  sw_carrier_t* file = NULL;
  int fd = user_fd;
  if (b->read_only_source) {
    CHECK(sw_carrier_open_file(b->rt, SW_DTYPE_F32, b->path, 0, b->n, &desc, &file));
  } else {
    desc.directory = b->scratch;
    CHECK(sw_carrier_create_file(b->rt, SW_DTYPE_F32, b->n, &desc, &file));
    CHECK(sw_carrier_write(file, 0, b->n, b->values));
    fd = open_scratch_file(b->scratch);
    if (fdatasync(fd) != 0) die("fdatasync"); /* no writeback during the timed reads */
  }
  *peer_seconds = pread_seconds(fd, warm, b->n * sizeof(float), b->chunk, in_flight);
  if (fd != user_fd) close(fd);

  CHECK(timed_move(b->rt, file, b->n, verify ? b->values : NULL, sw_seconds));
  sw_carrier_release(file);
}

/* ---- direct-I/O mode -------------------------------------------------------- */

#define PREAD_THREADS 4 /* Q in {1, 2, 4, 8} */
#define PREAD_CHUNKS 2  /* C in {1, 4} MiB */
#define PREAD_CONFIGS (PREAD_THREADS * PREAD_CHUNKS)
#define FIO_CONFIGS 8   /* bs in {1, 4} MiB x iodepth in {1, 2, 4, 8} */
/* fio idles some 0.2-0.3 s between stonewalled jobs (its main loop polls in
 * 100 ms steps), so its jobs read at most the file's first 512 MiB, which
 * keeps the default run (1 GiB, 5 repetitions) to about a minute. */
#define FIO_JOB_BYTES ((size_t)512 << 20)
#define DIRECT_TARGET 0.95
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define TMPFS_MAGIC_ 0x01021994
#define RAMFS_MAGIC_ 0x858458f6

static const int kPreadThreads[PREAD_THREADS] = {1, 2, 4, 8};
static const size_t kPreadChunkMib[PREAD_CHUNKS] = {1, 4};
static const int kFioBsMib[2] = {1, 4};
static const int kFioDepths[4] = {1, 2, 4, 8};

/* The direct mode's file and its private directory, removed at exit, which
 * die() and CHECK reach too. Emptied once removed. */
static char g_direct_dir[PATH_MAX], g_direct_path[PATH_MAX + 16];

static void remove_direct_file(void) {
  if (g_direct_path[0] && unlink(g_direct_path) != 0)
    fprintf(stderr, "bench_file: unlink %s: %s\n", g_direct_path, strerror(errno));
  if (g_direct_dir[0] && rmdir(g_direct_dir) != 0)
    fprintf(stderr, "bench_file: rmdir %s: %s\n", g_direct_dir, strerror(errno));
  g_direct_path[0] = g_direct_dir[0] = '\0';
}

/* Prints the SKIP line (the benchmark cannot run here) and exits 0. */
static void skip(const char* format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void skip(const char* format, ...) {
  va_list args;
  va_start(args, format);
  printf("SKIP bench_file --direct: ");
  vprintf(format, args);
  printf("\n");
  va_end(args);
  exit(0);
}

/* Word i of the file: pseudo-random (splitmix64) and never zero, so that
 * nothing on the way (a sparse or deduplicating backing store, compression)
 * reads it faster than real data. */
static uint64_t content_word(uint64_t i) {
  uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1;
}

/* The offset of the first byte of `data` (the file from its start) that
 * differs from the content, or SIZE_MAX. */
static size_t first_mismatch(const unsigned char* data, size_t bytes) {
  for (size_t i = 0; i < bytes / 8; ++i) {
    const uint64_t want = content_word(i);
    if (memcmp(data + 8 * i, &want, 8) != 0)
      for (size_t b = 8 * i;; ++b)
        if (data[b] != ((const unsigned char*)&want)[b - 8 * i]) return b;
  }
  return SIZE_MAX;
}

/* Writes `bytes` of content to the new file `fd` and makes it durable. */
static void write_content(int fd, size_t bytes) {
  const size_t block = (size_t)4 << 20;
  uint64_t* words = (uint64_t*)malloc(block);
  if (!words) die("malloc");
  for (size_t off = 0; off < bytes; off += block) {
    const size_t len = bytes - off < block ? bytes - off : block;
    for (size_t i = 0; i < len / 8; ++i) words[i] = content_word(off / 8 + i);
    for (size_t done = 0; done < len;) {
      const ssize_t n = pwrite(fd, (const unsigned char*)words + done, len - done, (off_t)(off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("pwrite");
      done += (size_t)n;
    }
  }
  free(words);
  if (fsync(fd) != 0) die("fsync");
}

static void drop_cached_pages(int fd) {
  const int failed = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (failed) {
    errno = failed;
    die("posix_fadvise");
  }
}

/* The share of the file's pages that are in the page cache. */
static double cached_fraction(int fd, size_t bytes) {
  const long page_size = sysconf(_SC_PAGESIZE);
  if (page_size <= 0) die("sysconf(_SC_PAGESIZE)");
  const size_t page = (size_t)page_size, pages = (bytes + page - 1) / page;
  void* map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) die("mmap");
  unsigned char* resident = (unsigned char*)malloc(pages);
  if (!resident) die("malloc");
  if (mincore(map, bytes, resident) != 0) die("mincore");
  size_t count = 0;
  for (size_t i = 0; i < pages; ++i) count += resident[i] & 1;
  free(resident);
  if (munmap(map, bytes) != 0) die("munmap");
  return (double)count / (double)pages;
}

/* The process's anonymous memory in huge pages, in MiB, or -1 where
 * /proc/self/smaps_rollup is missing. */
static long anon_huge_mib(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib < 0 ? -1 : kib >> 10;
}

/* The file system's name for the usual magic numbers, else NULL. */
static const char* file_system_name(unsigned long magic) {
  switch (magic) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0xF2F52010: return "f2fs";
    case 0x2FC12FC1: return "zfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case TMPFS_MAGIC_: return "tmpfs";
    case RAMFS_MAGIC_: return "ramfs";
    default: return NULL;
  }
}

/* The block device holding a file (its name in /sys/dev/block, "vda" say),
 * or its major:minor when it is no block device (overlay, network). */
static void device_name(dev_t dev, char* out, size_t size) {
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(dev), minor(dev));
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) {
    snprintf(out, size, "%u:%u", major(dev), minor(dev));
    return;
  }
  target[n] = '\0';
  const char* base = strrchr(target, '/');
  snprintf(out, size, "%.*s", (int)size - 1, base ? base + 1 : target);
}

static void print_json_string(const char* s) {
  putchar('"');
  for (; *s; ++s) {
    const unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void forward_log(void* user_data, sw_log_level_t level, const char* message) {
  (void)user_data;
  fprintf(stderr, "bench_file: runtime %s: %s\n",
          level >= SW_LOG_ERROR ? "error" : level >= SW_LOG_WARNING ? "warning" : "info", message);
}

/* ---- direct mode, StrideWeave: the move from a direct-I/O carrier ----------- */

typedef struct {
  sw_runtime_t* rt;
  const char* path;
  size_t bytes;
  int fd; /* buffered descriptor of the file: page-cache checks only */
} direct_t;

/* One promotion of the whole file, from a read-only carrier opened with
 * direct_io whose chunk size and requests in flight the runtime chooses, into
 * an empty CPU carrier. *seconds runs from sw_move_async to the end of the
 * wait, *open_seconds from before the carrier opens. With `expect`, the moved
 * bytes must equal it. *cached is the share of the file's pages in the page
 * cache afterwards (dropped before). Returns 0, the reason in `refused`, when
 * `refused` is given and sw_move_async refuses the move. */
static int sw_direct(const direct_t* d, const unsigned char* expect, double* seconds, double* open_seconds,
                     double* cached, char* refused, size_t refused_size) {
  drop_cached_pages(d->fd);
  sw_file_carrier_desc_t desc;
  sw_file_carrier_desc_init(&desc);
  desc.direct_io = true;
  desc.chunk_bytes = 0;        /* the runtime's choice for the device */
  desc.requests_in_flight = 0; /* likewise */
  const size_t n = d->bytes / sizeof(float);
  const double t_open = now_seconds();
  sw_carrier_t* file = NULL;
  CHECK(sw_carrier_open_file(d->rt, SW_DTYPE_F32, d->path, 0, n, &desc, &file));
  const double t_move = now_seconds();
  sw_error_t* err = timed_move(d->rt, file, n, expect, seconds);
  if (err && refused) {
    snprintf(refused, refused_size, "%s: %s", sw_error_code_name(sw_error_code(err)), sw_error_message(err));
    sw_error_free(err);
    sw_carrier_release(file);
    return 0;
  }
  check(err, "sw_move_async");
  if (open_seconds) *open_seconds = t_move - t_open + *seconds;
  *cached = cached_fraction(d->fd, d->bytes);
  sw_carrier_release(file);
  return 1;
}

/* ---- direct mode, the fio peer ------------------------------------------------ */

typedef struct {
  bool available;
  char version[64];
  const char* engine;
  char reason[512]; /* why fio is not available */
  char passed[512]; /* why engines before `engine` were passed over ("" if none) */
  int configs;      /* FIO_CONFIGS, or 2 with psync (one request at a time) */
  int bs_mib[FIO_CONFIGS], depth[FIO_CONFIGS];
} fio_t;

/* Whether an executable `name` is on the PATH. */
static bool on_path(const char* name) {
  const char* path = getenv("PATH");
  if (!path || !*path) return false;
  for (const char* p = path;;) {
    const char* colon = strchr(p, ':');
    const int len = (int)(colon ? (size_t)(colon - p) : strlen(p));
    char candidate[PATH_MAX];
    snprintf(candidate, sizeof candidate, "%.*s/%s", len ? len : 1, len ? p : ".", name);
    if (access(candidate, X_OK) == 0) return true;
    if (!colon) return false;
    p = colon + 1;
  }
}

/* Runs argv (argv[0] looked up on the PATH) with its stdout and stderr into
 * *out (malloc'ed, NUL-terminated). Returns its exit status, -1 when it did
 * not exit normally, -2 (errno set, *out NULL) when it could not start. */
static int run_capture(char* const argv[], char** out) {
  *out = NULL;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) die("pipe2");
  posix_spawn_file_actions_t actions;
  int failed = posix_spawn_file_actions_init(&actions);
  if (!failed) failed = posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (!failed) failed = posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  if (failed) {
    errno = failed;
    die("posix_spawn_file_actions");
  }
  pid_t pid;
  failed = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (close(fds[1]) != 0) die("close");
  if (failed) {
    if (close(fds[0]) != 0) die("close");
    errno = failed;
    return -2;
  }
  size_t size = 0, capacity = 1 << 16;
  char* text = (char*)malloc(capacity);
  if (!text) die("malloc");
  for (;;) {
    if (capacity - size < 4096) {
      capacity *= 2;
      char* grown = (char*)realloc(text, capacity);
      if (!grown) die("realloc");
      text = grown;
    }
    const ssize_t n = read(fds[0], text + size, capacity - size - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("read");
    if (n == 0) break;
    size += (size_t)n;
  }
  text[size] = '\0';
  if (close(fds[0]) != 0) die("close");
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) die("waitpid");
  *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* In text [from, end): the position just after the colon that follows the
 * first key `key` (a quoted string followed by a colon), or NULL. */
static const char* json_find(const char* from, const char* end, const char* key) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  const size_t len = strlen(quoted);
  for (const char* p = from; (p = strstr(p, quoted)) != NULL && p < end; p += len) {
    const char* q = p + len;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') ++q;
    if (*q == ':' && q < end) return q + 1;
  }
  return NULL;
}

/* The first line of `text` (before any JSON) where fio names a problem, else
 * its first line, for messages. */
static void fio_complaint(const char* text, char* out, size_t size) {
  const char* pick = NULL;
  for (const char* line = text; *line && *line != '{' && !pick;) {
    const size_t len = strcspn(line, "\n");
    if (len && (strncmp(line, "fio:", 4) == 0 || memmem(line, len, "rror", 4) || memmem(line, len, "err=", 4)))
      pick = line;
    line += len + (line[len] == '\n');
  }
  if (!pick) pick = text;
  const size_t len = strcspn(pick, "\n");
  snprintf(out, size, "%.*s", (int)(len < 240 ? len : 240), pick);
}

/* Reads the file's first `job_bytes` with fio, one stonewalled job per
 * (bs_mib[j], depth[j]), in that order, with `engine`; rate[j] gets job j's
 * read bandwidth in bytes per second. Returns false, the reason in `why`,
 * when fio fails, a job reports an error or a job's figure is missing. */
static bool fio_run(const char* path, const char* engine, size_t job_bytes, int jobs, const int* bs_mib,
                    const int* depth, double* rate, char* why, size_t why_size) {
  char* argv[8 + 4 * FIO_CONFIGS + 1];
  int argc = 0;
  /* fio splits --filename at colons unless they are escaped. */
  char escaped[2 * PATH_MAX];
  size_t e = 0;
  for (const char* c = path; *c && e + 2 < sizeof escaped; ++c) {
    if (*c == ':') escaped[e++] = '\\';
    escaped[e++] = *c;
  }
  escaped[e] = '\0';
  const char* fixed[8] = {"fio", "--output-format=json", "--readonly", NULL, "--rw=read", "--direct=1", NULL, NULL};
  for (int i = 0; i < 8; ++i) {
    int made = 0;
    if (i == 3)
      made = asprintf(&argv[argc], "--filename=%s", escaped);
    else if (i == 6)
      made = asprintf(&argv[argc], "--ioengine=%s", engine);
    else if (i == 7)
      made = asprintf(&argv[argc], "--size=%zu", job_bytes);
    else
      argv[argc] = strdup(fixed[i]);
    if (made < 0 || !argv[argc]) die("asprintf");
    ++argc;
  }
  char names[FIO_CONFIGS][32];
  for (int j = 0; j < jobs; ++j) {
    snprintf(names[j], sizeof names[j], "bs%dM_qd%d", bs_mib[j], depth[j]);
    if (asprintf(&argv[argc++], "--name=%s", names[j]) < 0 || asprintf(&argv[argc++], "--bs=%dM", bs_mib[j]) < 0 ||
        asprintf(&argv[argc++], "--iodepth=%d", depth[j]) < 0 || !(argv[argc++] = strdup("--stonewall")))
      die("asprintf");
  }
  argv[argc] = NULL;
  char* text = NULL;
  const int status = run_capture(argv, &text);
  for (int i = 0; i < argc; ++i) free(argv[i]);
  if (status == -2) {
    snprintf(why, why_size, "cannot start fio: %s", strerror(errno));
    return false;
  }
  bool ok = true;
  const char* json = text[0] == '{' ? text : strstr(text, "\n{");
  if (status != 0 || !json) {
    char complaint[256];
    fio_complaint(text, complaint, sizeof complaint);
    snprintf(why, why_size, "fio exited with status %d: %s", status, complaint);
    ok = false;
  }
  const char* end = json ? json + strlen(json) : NULL;
  for (int j = 0; ok && j < jobs; ++j) {
    const size_t len = strlen(names[j]);
    const char* at = NULL;
    for (const char* p = json; !at && (p = json_find(p, end, "jobname")) != NULL;) {
      while (*p == ' ') ++p;
      if (*p == '"' && strncmp(p + 1, names[j], len) == 0 && p[1 + len] == '"') at = p;
    }
    const char* next = at ? json_find(at, end, "jobname") : NULL;
    const char* section_end = next ? next : end;
    const char* error = at ? json_find(at, section_end, "error") : NULL;
    const char* read = at ? json_find(at, section_end, "read") : NULL;
    const char* bw = read ? json_find(read, section_end, "bw_bytes") : NULL;
    const long code = error ? strtol(error, NULL, 10) : 0;
    rate[j] = bw ? strtod(bw, NULL) : 0;
    if (!bw || code != 0 || !(rate[j] > 0)) {
      snprintf(why, why_size, "fio job %s: %s", names[j],
               !at ? "missing from fio's JSON" : code ? "failed" : "no read bandwidth in fio's JSON");
      if (code) snprintf(why + strlen(why), why_size - strlen(why), " (error %ld, %s)", code, strerror((int)code));
      ok = false;
    }
  }
  free(text);
  return ok;
}

/* Whether fio runs here, its version, and the first engine of io_uring,
 * libaio and psync that reads the file with O_DIRECT (a short run, which
 * also warms fio up). */
static void fio_setup(fio_t* f, const char* path, size_t bytes) {
  memset(f, 0, sizeof *f);
  if (!on_path("fio")) {
    snprintf(f->reason, sizeof f->reason, "fio is not on the PATH");
    return;
  }
  char* version_argv[] = {"fio", "--version", NULL};
  char* text = NULL;
  if (run_capture(version_argv, &text) != 0 || !text) {
    snprintf(f->reason, sizeof f->reason, "fio --version fails");
    free(text);
    return;
  }
  snprintf(f->version, sizeof f->version, "%.*s", (int)strcspn(text, "\n"), text);
  free(text);
  static const char* engines[3] = {"io_uring", "libaio", "psync"};
  const size_t probe_bytes = bytes < ((size_t)16 << 20) ? bytes : (size_t)16 << 20;
  for (int e = 0; e < 3; ++e) {
    const int bs = 1, depth = e < 2 ? 2 : 1;
    double rate;
    char why[512];
    if (!fio_run(path, engines[e], probe_bytes, 1, &bs, &depth, &rate, why, sizeof why)) {
      const size_t used = strlen(f->passed);
      snprintf(f->passed + used, sizeof f->passed - used, "%s%s: %s", used ? "; " : "", engines[e], why);
      continue;
    }
    f->available = true;
    f->engine = engines[e];
    for (int b = 0; b < 2; ++b)
      for (int q = 0; q < (e < 2 ? 4 : 1); ++q) {
        f->bs_mib[f->configs] = kFioBsMib[b];
        f->depth[f->configs] = kFioDepths[q];
        ++f->configs;
      }
    return;
  }
  snprintf(f->reason, sizeof f->reason, "no fio engine reads the file with O_DIRECT: %s", f->passed);
}

/* ---- direct mode, the run ------------------------------------------------------ */

typedef struct {
  double gbps, fastest_gbps, slowest_gbps;
  int wins; /* repetitions in which this configuration was its peer's fastest */
} summary_t;

static summary_t summarize(const double* seconds, int reps, size_t bytes) {
  double slowest = seconds[0];
  for (int r = 1; r < reps; ++r)
    if (seconds[r] > slowest) slowest = seconds[r];
  const summary_t s = {(double)bytes / median(seconds, reps) / 1e9, (double)bytes / fastest(seconds, reps) / 1e9,
                       (double)bytes / slowest / 1e9, 0};
  return s;
}

/* The configuration with the best median of `n`; counts each one's wins. */
static int best_config(summary_t* s, int n, double seconds[][MAX_REPS], int reps) {
  for (int r = 0; r < reps; ++r) {
    int winner = 0;
    for (int k = 1; k < n; ++k)
      if (seconds[k][r] < seconds[winner][r]) winner = k;
    ++s[winner].wins;
  }
  int best = 0;
  for (int k = 1; k < n; ++k)
    if (s[k].gbps > s[best].gbps) best = k;
  return best;
}

static void pread_grid(int fd, unsigned char* buffer, size_t bytes, int rep, double seconds[][MAX_REPS]) {
  for (int i = 0; i < PREAD_CONFIGS; ++i) {
    const int k = rep % 2 ? PREAD_CONFIGS - 1 - i : i; /* reversed every other repetition */
    seconds[k][rep] = pread_seconds(fd, buffer, bytes, kPreadChunkMib[k % PREAD_CHUNKS] << 20,
                                    kPreadThreads[k / PREAD_CHUNKS]);
  }
}

/* One fio run over the grid (its order reversed every other repetition);
 * false, and fio no longer available, when it fails. */
static bool fio_grid(fio_t* f, const char* path, size_t bytes, int rep, double seconds[][MAX_REPS]) {
  int bs[FIO_CONFIGS], depth[FIO_CONFIGS], index[FIO_CONFIGS];
  for (int i = 0; i < f->configs; ++i) {
    index[i] = rep % 2 ? f->configs - 1 - i : i;
    bs[i] = f->bs_mib[index[i]];
    depth[i] = f->depth[index[i]];
  }
  double rate[FIO_CONFIGS];
  char why[512];
  const size_t job_bytes = bytes < FIO_JOB_BYTES ? bytes : FIO_JOB_BYTES;
  if (!fio_run(path, f->engine, job_bytes, f->configs, bs, depth, rate, why, sizeof why)) {
    f->available = false;
    snprintf(f->reason, sizeof f->reason, "fio failed in repetition %d: %.400s", rep + 1, why);
    fprintf(stderr, "bench_file: %s; the fio peer is left out\n", f->reason);
    return false;
  }
  /* As the time to read the whole file at that rate, like the other sides. */
  for (int i = 0; i < f->configs; ++i) seconds[index[i]][rep] = (double)bytes / rate[i];
  return true;
}

static int direct_main(size_t mib, int reps, const char* dir, bool use_fio) {
  const double t_start = now_seconds();
  /* Taken before the run: threads blocked in O_DIRECT reads count in the load
   * average, so the tool's own peers would raise it. */
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = -1;
  const size_t bytes = mib << 20;

  /* The directory must be on a real disk, with room for the file. */
  struct statfs fs;
  if (statfs(dir, &fs) != 0) die(dir);
  const unsigned long magic = (unsigned long)fs.f_type;
  const char* fs_known = file_system_name(magic);
  char fs_name[32];
  snprintf(fs_name, sizeof fs_name, "%s", fs_known ? fs_known : "");
  if (!fs_known) snprintf(fs_name, sizeof fs_name, "0x%lx", magic);
  if (magic == TMPFS_MAGIC_ || magic == RAMFS_MAGIC_)
    skip("%s is on %s (memory, not a disk): O_DIRECT would bypass no page cache; pass --dir on a disk", dir, fs_name);
  struct statvfs vfs;
  if (statvfs(dir, &vfs) != 0) die(dir);
  const uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
  if (free_bytes < (uint64_t)bytes + ((uint64_t)256 << 20))
    skip("%s has %llu MiB free, the file needs %zu MiB and 256 MiB to spare", dir,
         (unsigned long long)(free_bytes >> 20), mib);
  const long phys_pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (phys_pages > 0 && page_size > 0 && 2.0 * (double)bytes > 0.75 * (double)phys_pages * (double)page_size) {
    fprintf(stderr, "bench_file: --direct --mib %zu needs 2 x %zu MiB of memory (both destinations), more than "
                    "3/4 of this machine's\n", mib, mib);
    return 2;
  }

  /* The file, in a private directory removed at exit. */
  if (atexit(remove_direct_file) != 0) die("atexit");
  snprintf(g_direct_dir, sizeof g_direct_dir, "%s/bench_file_XXXXXX", dir);
  if (!mkdtemp(g_direct_dir)) {
    g_direct_dir[0] = '\0';
    die("mkdtemp");
  }
  snprintf(g_direct_path, sizeof g_direct_path, "%s/direct.bin", g_direct_dir);
  const char* path = g_direct_path;
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) die("open");
  const double t_write = now_seconds();
  write_content(fd, bytes);
  drop_cached_pages(fd);
  const double write_seconds = now_seconds() - t_write;
  struct stat st;
  if (fstat(fd, &st) != 0) die("fstat");
  char device[64];
  device_name(st.st_dev, device, sizeof device);

  /* O_DIRECT must work on it: the open and an aligned read. */
  const int dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (dfd < 0 && errno == EINVAL) skip("%s (%s) refuses O_DIRECT: open fails with EINVAL", dir, fs_name);
  if (dfd < 0) die("open O_DIRECT");
  /* The peer's destination is laid out as the runtime's host buffers of 2 MiB
   * and more are: aligned to a huge page and advised to use huge pages. An
   * O_DIRECT read into 4 KiB pages carries a segment per page, and on a
   * virtio disk that alone costs a fifth to a third of the rate. */
  unsigned char* peer = NULL;
  const int no_memory = posix_memalign((void**)&peer, HUGE_PAGE_BYTES, bytes);
  if (no_memory) {
    errno = no_memory;
    die("posix_memalign");
  }
  if (madvise(peer, bytes, MADV_HUGEPAGE) != 0 && errno != EINVAL) die("madvise"); /* EINVAL: no huge pages */
  memset(peer, 0x5a, bytes); /* pre-touched */
  const size_t probe = bytes < ((size_t)1 << 20) ? bytes : (size_t)1 << 20;
  if (pread(dfd, peer, probe, 0) < 0) {
    if (errno == EINVAL) skip("%s (%s) refuses O_DIRECT: an aligned read fails with EINVAL", dir, fs_name);
    die("pread O_DIRECT");
  }

  sw_runtime_desc_t rdesc;
  sw_runtime_desc_init(&rdesc);
  rdesc.log = forward_log;
  rdesc.log_level = SW_LOG_INFO;
  /* The pool keeps the move's destination for the next repetition. */
  if (2 * bytes > ((size_t)1 << 30)) rdesc.pool_limit_bytes = 2 * bytes;
  direct_t d = {NULL, path, bytes, fd};
  CHECK(sw_runtime_create(&rdesc, &d.rt));

  /* Warm-ups, untimed: the peer's bytes are checked against the ones written
   * and the move's against the peer's; fio chooses its engine. */
  pread_seconds(dfd, peer, bytes, (size_t)1 << 20, 2);
  const size_t bad = first_mismatch(peer, bytes);
  if (bad != SIZE_MAX) {
    fprintf(stderr, "bench_file: byte %zu read back with O_DIRECT differs from the one written\n", bad);
    exit(2);
  }
  char refused[512];
  double first_move, first_open, cached;
  if (!sw_direct(&d, peer, &first_move, &first_open, &cached, refused, sizeof refused)) {
    sw_runtime_release(d.rt);
    skip("this build refuses sw_move_async out of a read-only file carrier (%s)", refused);
  }
  double cached_max = cached;
  /* Both destinations are mapped now (the move's kept by the pool). */
  const long huge_mib = anon_huge_mib();
  fio_t fio;
  memset(&fio, 0, sizeof fio);
  if (use_fio)
    fio_setup(&fio, path, bytes);
  else
    snprintf(fio.reason, sizeof fio.reason, "left out (--no-fio)");

  /* R repetitions: the move between the two peers, which swap places every
   * other repetition. */
  double sw_s[MAX_REPS], pread_s[PREAD_CONFIGS][MAX_REPS], fio_s[FIO_CONFIGS][MAX_REPS];
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0)
      pread_grid(dfd, peer, bytes, r, pread_s);
    else if (fio.available)
      fio_grid(&fio, path, bytes, r, fio_s);
    sw_direct(&d, NULL, &sw_s[r], NULL, &cached, NULL, 0);
    if (cached > cached_max) cached_max = cached;
    if (r % 2 == 1)
      pread_grid(dfd, peer, bytes, r, pread_s);
    else if (fio.available)
      fio_grid(&fio, path, bytes, r, fio_s);
  }

  const summary_t sw = summarize(sw_s, reps, bytes);
  summary_t pr[PREAD_CONFIGS], fr[FIO_CONFIGS];
  for (int k = 0; k < PREAD_CONFIGS; ++k) pr[k] = summarize(pread_s[k], reps, bytes);
  const int pbest = best_config(pr, PREAD_CONFIGS, pread_s, reps);
  const double ratio = sw.gbps / pr[pbest].gbps, ratio_best = sw.fastest_gbps / pr[pbest].fastest_gbps;
  int fbest = 0;
  double fio_ratio = 0, fio_ratio_best = 0;
  if (fio.available) {
    for (int k = 0; k < fio.configs; ++k) fr[k] = summarize(fio_s[k], reps, bytes);
    fbest = best_config(fr, fio.configs, fio_s, reps);
    fio_ratio = sw.gbps / fr[fbest].gbps;
    fio_ratio_best = sw.fastest_gbps / fr[fbest].fastest_gbps;
  }
  const double total_seconds = now_seconds() - t_start;

  printf("promotion of %zu MiB from the file tier with O_DIRECT: read-only carrier over the user's file on %s (%s), "
         "chunk size and requests in flight chosen by the runtime; load average %.1f before the run\n",
         mib, device, fs_name, load[0]);
  printf("file written and synced at %.2f GB/s; first move, opening the carrier included (and the runtime's "
         "measure of the device if it made one): %.2f s, %.2f GB/s\n",
         (double)bytes / write_seconds / 1e9, first_open, (double)bytes / first_open / 1e9);
  if (huge_mib >= 0)
    printf("anonymous memory in huge pages: %ld MiB (the two destinations take %zu MiB)\n", huge_mib, 2 * mib);
  printf("\n");
  printf("%-34s %10s %10s %10s %8s\n", "peer configuration", "median", "fastest", "slowest", "wins");
  for (int k = 0; k < PREAD_CONFIGS; ++k) {
    char name[64];
    snprintf(name, sizeof name, "pread %d thread%s x %zu MiB", kPreadThreads[k / PREAD_CHUNKS],
             kPreadThreads[k / PREAD_CHUNKS] > 1 ? "s" : "", kPreadChunkMib[k % PREAD_CHUNKS]);
    printf("%-34s %10.2f %10.2f %10.2f %5d/%d%s\n", name, pr[k].gbps, pr[k].fastest_gbps, pr[k].slowest_gbps,
           pr[k].wins, reps, k == pbest ? "  <- best" : "");
  }
  for (int k = 0; fio.available && k < fio.configs; ++k) {
    char name[64];
    snprintf(name, sizeof name, "fio %s bs %dM iodepth %d", fio.engine, fio.bs_mib[k], fio.depth[k]);
    printf("%-34s %10.2f %10.2f %10.2f %5d/%d%s\n", name, fr[k].gbps, fr[k].fastest_gbps, fr[k].slowest_gbps,
           fr[k].wins, reps, k == fbest ? "  <- best" : "");
  }
  const size_t fio_job_mib = (bytes < FIO_JOB_BYTES ? bytes : FIO_JOB_BYTES) >> 20;
  printf("(GB/s over %d repetitions; wins: repetitions in which the configuration was its peer's fastest", reps);
  if (fio.available) printf("; each fio job reads the file's first %zu MiB", fio_job_mib);
  printf(")\n\n");

  char pread_best[64], fio_best[96];
  snprintf(pread_best, sizeof pread_best, "pread, best: %d thread%s x %zu MiB", kPreadThreads[pbest / PREAD_CHUNKS],
           kPreadThreads[pbest / PREAD_CHUNKS] > 1 ? "s" : "", kPreadChunkMib[pbest % PREAD_CHUNKS]);
  printf("%-40s %10s %10s %8s %8s\n", "", "GB/s", "fastest", "ratio", "best");
  printf("%-40s %10.2f %10.2f\n", "StrideWeave promotion", sw.gbps, sw.fastest_gbps);
  printf("%-40s %10.2f %10.2f %8.3f %8.3f\n", pread_best, pr[pbest].gbps, pr[pbest].fastest_gbps, ratio, ratio_best);
  if (fio.available) {
    snprintf(fio_best, sizeof fio_best, "fio %s, best: bs %dM iodepth %d", fio.engine, fio.bs_mib[fbest],
             fio.depth[fbest]);
    printf("%-40s %10.2f %10.2f %8.3f %8.3f  (informational)\n", fio_best, fr[fbest].gbps, fr[fbest].fastest_gbps,
           fio_ratio, fio_ratio_best);
    if (fio.passed[0]) printf("fio engines passed over: %s\n", fio.passed);
  } else {
    printf("fio peer: not available (%s)\n", fio.reason);
  }
  const int met = ratio >= DIRECT_TARGET, met_best = ratio_best >= DIRECT_TARGET;
  printf("target: promotion >= %.0f %% of the best O_DIRECT pread: %s (medians), %s (best)%s\n", 100 * DIRECT_TARGET,
         met ? "ok" : "MISS", met_best ? "ok" : "MISS",
         load[0] > 1.5 ? "; the machine is loaded, rerun when idle" : "");
  if (cached_max > 0.01)
    printf("WARNING: after a move, %.0f %% of the file was in the page cache: the move did not read with O_DIRECT\n",
           100 * cached_max);
  printf("run time %.0f s\n", total_seconds);

  printf("\nBENCH_JSON {\"bench\": \"file_direct\", \"mib\": %zu, \"reps\": %d, \"dir\": ", mib, reps);
  print_json_string(dir);
  printf(", \"fs\": ");
  print_json_string(fs_name);
  printf(", \"device\": ");
  print_json_string(device);
  printf(", \"load\": %.2f, \"seconds\": %.1f, \"anon_huge_mib\": %ld, \"sw\": {\"gbps\": %.3f, "
         "\"gbps_fastest\": %.3f, \"first_open_seconds\": %.3f, \"cached_fraction\": %.4f}, ",
         load[0], total_seconds, huge_mib, sw.gbps, sw.fastest_gbps, first_open, cached_max);
  printf("\"pread\": {\"best\": {\"threads\": %d, \"chunk_mib\": %zu}, \"gbps\": %.3f, \"gbps_fastest\": %.3f, "
         "\"ratio\": %.4f, \"ratio_best\": %.4f, \"configs\": [",
         kPreadThreads[pbest / PREAD_CHUNKS], kPreadChunkMib[pbest % PREAD_CHUNKS], pr[pbest].gbps,
         pr[pbest].fastest_gbps, ratio, ratio_best);
  for (int k = 0; k < PREAD_CONFIGS; ++k)
    printf("%s{\"threads\": %d, \"chunk_mib\": %zu, \"gbps\": %.3f, \"gbps_fastest\": %.3f, \"gbps_slowest\": %.3f, "
           "\"wins\": %d}",
           k ? ", " : "", kPreadThreads[k / PREAD_CHUNKS], kPreadChunkMib[k % PREAD_CHUNKS], pr[k].gbps,
           pr[k].fastest_gbps, pr[k].slowest_gbps, pr[k].wins);
  printf("]}, \"fio\": {\"available\": %s", fio.available ? "true" : "false");
  if (fio.available) {
    printf(", \"version\": ");
    print_json_string(fio.version);
    printf(", \"engine\": \"%s\", \"job_mib\": %zu, \"passed_over\": ", fio.engine, fio_job_mib);
    print_json_string(fio.passed);
    printf(", \"best\": {\"bs_mib\": %d, \"iodepth\": %d}, \"gbps\": %.3f, \"gbps_fastest\": %.3f, \"ratio\": %.4f, "
           "\"ratio_best\": %.4f, \"configs\": [",
           fio.bs_mib[fbest], fio.depth[fbest], fr[fbest].gbps, fr[fbest].fastest_gbps, fio_ratio, fio_ratio_best);
    for (int k = 0; k < fio.configs; ++k)
      printf("%s{\"bs_mib\": %d, \"iodepth\": %d, \"gbps\": %.3f, \"gbps_fastest\": %.3f, \"gbps_slowest\": %.3f, "
             "\"wins\": %d}",
             k ? ", " : "", fio.bs_mib[k], fio.depth[k], fr[k].gbps, fr[k].fastest_gbps, fr[k].slowest_gbps,
             fr[k].wins);
    printf("]");
  } else {
    printf(", \"reason\": ");
    print_json_string(fio.reason);
  }
  printf("}, \"target\": %.2f, \"target_met\": %s, \"target_met_best\": %s}\n", DIRECT_TARGET,
         met ? "true" : "false", met_best ? "true" : "false");

  sw_runtime_release(d.rt);
  free(peer);
  if (close(dfd) != 0) die("close");
  if (close(fd) != 0) die("close");
  remove_direct_file();
  return 0;
}

static void usage(FILE* to, const char* argv0) {
  fprintf(to,
          "usage: %s [--mib M] [--chunk-mib C] [--reps R] [--dir DIR]\n"
          "       %s --direct [--mib M] [--reps R] [--dir DIR] [--no-fio]\n"
          "\n"
          "Promotion from the file tier (a move of a file carrier's tensor into a CPU carrier) against\n"
          "plain reads of the same file, in one process; the last line is BENCH_JSON {...}.\n"
          "\n"
          "  (default)       from the page cache, against pread with the same threads and chunks, for\n"
          "                  1 and 4 requests in flight; M = 512, C = 4, R = 7\n"
          "  --direct        with O_DIRECT, chunk size and requests in flight chosen by the runtime,\n"
          "                  against O_DIRECT pread at its best of 1, 2, 4, 8 threads x 1, 4 MiB and\n"
          "                  fio (when on the PATH) at its best of bs 1M, 4M x iodepth 1, 2, 4, 8;\n"
          "                  M = 1024, R = 5. DIR must be on a disk: prints a SKIP line on tmpfs or\n"
          "                  when O_DIRECT is refused. Needs 2 x M MiB of memory\n"
          "  --mib M         file size in MiB\n"
          "  --chunk-mib C   request size of both sides in MiB (page-cache mode only)\n"
          "  --reps R        timed repetitions, 1 to %d; figures are their medians\n"
          "  --dir DIR       where the private directory for the file goes (default $TMPDIR, else /tmp)\n"
          "  --no-fio        leave out the fio peer (direct mode)\n",
          argv0, argv0, MAX_REPS);
}

/* A positive decimal count, or 0 when `text` is not one. */
static size_t parse_count(const char* text) {
  char* end = NULL;
  errno = 0;
  const long long value = strtoll(text, &end, 10);
  return errno || end == text || *end || value <= 0 ? 0 : (size_t)value;
}

int main(int argc, char** argv) {
  size_t mib = 0, chunk_mib = 0, reps_arg = 0; /* 0: the mode's default */
  bool direct = false, use_fio = true;
  const char* dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    size_t* count = strcmp(argv[i], "--mib") == 0         ? &mib
                    : strcmp(argv[i], "--chunk-mib") == 0 ? &chunk_mib
                    : strcmp(argv[i], "--reps") == 0      ? &reps_arg
                                                          : NULL;
    if (count && i + 1 < argc) {
      if ((*count = parse_count(argv[++i])) == 0) {
        fprintf(stderr, "bench_file: %s needs a positive number, not '%s'\n", argv[i - 1], argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--direct") == 0) {
      direct = true;
    } else if (strcmp(argv[i], "--no-fio") == 0) {
      use_fio = false;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, argv[0]);
      return 0;
    } else {
      usage(stderr, argv[0]);
      return 2;
    }
  }
  if (reps_arg > MAX_REPS || mib > ((size_t)1 << 24)) {
    fprintf(stderr, "bench_file: need 1 <= reps <= %d and at most %d MiB\n", MAX_REPS, 1 << 24);
    return 2;
  }
  if (direct) {
    if (chunk_mib) {
      fprintf(stderr, "bench_file: --chunk-mib is for the page-cache mode; --direct measures its own grid\n");
      return 2;
    }
    return direct_main(mib ? mib : 1024, reps_arg ? (int)reps_arg : 5, dir, use_fio);
  }
  if (!use_fio) {
    fprintf(stderr, "bench_file: --no-fio is for --direct\n");
    return 2;
  }
  if (!mib) mib = 512;
  if (!chunk_mib) chunk_mib = 4;
  const int reps = reps_arg ? (int)reps_arg : 7;
  const size_t bytes = mib << 20, chunk = chunk_mib << 20, n = bytes / sizeof(float);

  /* A private directory holds the user file and any scratch carriers. */
  char scratch[4096], path[4200];
  snprintf(scratch, sizeof scratch, "%s/bench_file_XXXXXX", dir);
  if (!mkdtemp(scratch)) die("mkdtemp");
  snprintf(path, sizeof path, "%s/weights.bin", scratch);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) die("open");
  float* block = (float*)malloc(chunk);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = bytes - off < chunk ? bytes - off : chunk;
    for (size_t i = 0; i < len / sizeof(float); ++i) block[i] = value_at(off / sizeof(float) + i);
    if (pwrite(fd, block, len, (off_t)off) != (ssize_t)len) die("pwrite");
  }
  free(block);
  if (fdatasync(fd) != 0) die("fdatasync");
  /* Read once: the file sits in the page cache, and `warm` holds its values. */
  unsigned char* warm = NULL;
  if (posix_memalign((void**)&warm, 4096, bytes) != 0) die("posix_memalign");
  memset(warm, 0, bytes);
  pread_seconds(fd, warm, bytes, chunk, 1);
  float* values = (float*)malloc(bytes);
  memcpy(values, warm, bytes);

  bench_t b = {NULL, path, scratch, values, n, chunk, 1};
  CHECK(sw_runtime_create(NULL, &b.rt));
  b.read_only_source = moves_from_read_only(&b);

  const int in_flight[2] = {1, 4};
  double sw_gbps[2], peer_gbps[2], ratio[2], ratio_best[2];
  for (int k = 0; k < 2; ++k) {
    double sw_s[MAX_REPS], peer_s[MAX_REPS], unused;
    repetition(&b, in_flight[k], k == 0, fd, warm, &unused, &unused); /* warm-up; checks every value once */
    for (int r = 0; r < reps; ++r) repetition(&b, in_flight[k], 0, fd, warm, &sw_s[r], &peer_s[r]);
    sw_gbps[k] = (double)bytes / median(sw_s, reps) / 1e9;
    peer_gbps[k] = (double)bytes / median(peer_s, reps) / 1e9;
    ratio[k] = sw_gbps[k] / peer_gbps[k];
    ratio_best[k] = fastest(peer_s, reps) / fastest(sw_s, reps);
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);

  printf("promotion of %zu MiB from the page cache (%s), %zu MiB requests; load average %.1f\n", mib,
         b.read_only_source ? "read-only carrier over the user's file" : "scratch carrier, the peer reads its file",
         chunk_mib, load[0]);
  printf("%-10s %12s %12s %8s %8s\n", "in flight", "move GB/s", "pread GB/s", "ratio", "best");
  for (int k = 0; k < 2; ++k)
    printf("%-10d %12.2f %12.2f %8.3f %8.3f\n", in_flight[k], sw_gbps[k], peer_gbps[k], ratio[k], ratio_best[k]);
  const int met = ratio[0] >= 0.8 && ratio[1] >= 0.8, met_best = ratio_best[0] >= 0.8 && ratio_best[1] >= 0.8;
  printf("target: promotion >= 80 %% of pread with the same threads: %s (medians), %s (best)%s\n",
         met ? "ok" : "MISS", met_best ? "ok" : "MISS", load[0] > 1.5 ? "; the machine is loaded, rerun when idle" : "");

  printf("\nBENCH_JSON {\"bench\": \"file\", \"mib\": %zu, \"chunk_mib\": %zu, \"reps\": %d, \"source\": \"%s\", "
         "\"load\": %.2f, \"promotion\": [",
         mib, chunk_mib, reps, b.read_only_source ? "read_only_user_file" : "scratch_file", load[0]);
  for (int k = 0; k < 2; ++k)
    printf("%s{\"in_flight\": %d, \"sw_gbps\": %.3f, \"pread_gbps\": %.3f, \"ratio\": %.4f, \"ratio_best\": %.4f}",
           k ? ", " : "", in_flight[k], sw_gbps[k], peer_gbps[k], ratio[k], ratio_best[k]);
  printf("], \"target_met\": %s, \"target_met_best\": %s}\n", met ? "true" : "false", met_best ? "true" : "false");

  sw_runtime_release(b.rt);
  free(values);
  free(warm);
  close(fd);
  unlink(path);
  rmdir(scratch);
  return 0;
}
