/*
 * bench_remote: the remote tier (docs/remote-tier.md) against a bare hiredis
 * client doing the same protocol work, with the same server, bytes, chunk
 * size and requests in flight, in the same process.
 *
 *   StrideWeave   a TiledEvictable (empty CPU primary) over a remote carrier
 *                 whose blocks are its tiles; each block is one
 *                 sw_tiled_promote (read: HGET crc, STRLEN, pipelined
 *                 GETRANGE chunks straight into the tile buffer, CRC-32C
 *                 check) or one sw_tiled_evict of a dirty tile (write:
 *                 SETRANGE chunks to the staging key committed by RENAME /
 *                 HSET crc in a MULTI / EXEC: a block of at most
 *                 --in-flight chunks in one transaction sent at once, a
 *                 larger one as DEL and pipelined chunks, then the commit),
 *                 timed around the call.
 *   peer          hiredis's asynchronous API on a bare libuv loop run by the
 *                 calling thread (hiredis/adapters/libuv.h): per block,
 *                 pipelined GETRANGE chunks copied from the replies into one
 *                 warm buffer, or pipelined SETRANGE chunks to a staging key
 *                 followed by RENAME over the block's key. No CRC.
 *
 * Two geometries: many 1 MiB blocks (--tiles of them) and one 112 MiB expert
 * as a single block; two transports: a unix socket and loopback TCP, each on
 * a redis-server the tool starts in a temporary directory (--save '',
 * --appendonly no) and stops at exit. The two clients take turns block by
 * block: a round dirties every tile (untimed), then both write block 0,
 * both write block 1, ..., then both read the blocks back the same way, who
 * goes first alternating from block to block and from round to round, so
 * that a burst of noise from other processes (or from the host of a virtual
 * machine) lands on both alike. After one warm-up round, each figure is the
 * median of --runs rounds: GB/s over the round's blocks (bytes over the
 * sum of the per-block times), and p50 / p99 of the per-block times of all
 * rounds. The ratio is StrideWeave's GB/s over the peer's, taken per round,
 * then the median; "best" compares the fastest rounds. Target
 * (tools/bench/README.md): >= 0.90 for promote and for evict.
 *
 * The CRC-32C the carrier computes per block (on every read and every write;
 * the peer computes none) is timed on its own, with the library's routine,
 * and printed beside the ratios: its share of a block's time, and the ratio
 * with that time taken out (a bound: a read folds the CRC into its copy of
 * each reply into the tile, and a write into its copy of each chunk into
 * the SETRANGE command, so not all of that time is on a block's path).
 *
 * Over loopback or a unix socket this measures the protocol's and the copies'
 * costs on the client and the server, not a network.
 *
 * Usage:
 *   build/tools/bench/bench_remote [--tiles 64] [--block-mib 1] [--expert-mib 112] [--runs 11]
 *                                  [--chunk-kib 1024] [--in-flight 4] [--transport unix|tcp|both]
 *
 * The last line is "SUMMARY_JSON {...}" for scripts.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_remote"
#include "bench_util.h"
#include "sw_redis_server.h"

#define MAX_RUNS 32
#define TARGET 0.90

/* The library's CRC-32C routine (runtime/base/crc32c.cpp), compiled in. */
uint32_t bench_crc32c(uint32_t crc, const void* data, size_t length);

static void die(const char* what) {
  fprintf(stderr, BENCH_NAME ": %s\n", what);
  exit(2);
}

/* ---- servers of our own -------------------------------------------------------- */

typedef struct server_t {
  pid_t pid;
  char dir[128];
  char socket[192];
  char endpoint[224]; /* unix:///...sock or redis://127.0.0.1:port */
  int port;           /* 0: unix socket */
} server_t;

static server_t* g_servers[2];

static void server_stop(server_t* s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 1000; ++i) {
      int status;
      if (waitpid(s->pid, &status, WNOHANG) != 0) break;
      usleep(10000);
      if (i == 999) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
      }
    }
    s->pid = 0;
  }
  if (s->dir[0]) {
    char path[256];
    const char* names[] = {"redis.sock", "redis.log", "dump.rdb"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
      snprintf(path, sizeof path, "%s/%s", s->dir, names[i]);
      unlink(path);
    }
    rmdir(s->dir);
    s->dir[0] = '\0';
  }
}

static void stop_all_servers(void) {
  for (int i = 0; i < 2; ++i)
    if (g_servers[i]) server_stop(g_servers[i]);
}

static void on_signal(int sig) {
  for (int i = 0; i < 2; ++i)
    if (g_servers[i] && g_servers[i]->pid > 0) kill(g_servers[i]->pid, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int free_port(void) {
  const int port = sw_redis_free_port();
  if (port < 0) die("cannot bind a loopback port");
  return port;
}

static redisContext* sync_connect(const server_t* s) {
  struct timeval tv = {5, 0};
  return s->port ? redisConnectWithTimeout("127.0.0.1", s->port, tv) : redisConnectUnixWithTimeout(s->socket, tv);
}

/* Starts redis-server on a unix socket in a new directory (tcp: on a free
 * loopback port instead) and waits until it answers PING. */
static void server_start(server_t* s, bool tcp) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/sw-bench-remote-XXXXXX");
  if (!mkdtemp(s->dir)) die("mkdtemp failed");
  snprintf(s->socket, sizeof s->socket, "%s/redis.sock", s->dir);
  char log[200];
  if (tcp) {
    s->port = free_port();
    snprintf(s->endpoint, sizeof s->endpoint, "redis://127.0.0.1:%d", s->port);
  } else {
    snprintf(s->endpoint, sizeof s->endpoint, "unix://%s", s->socket);
  }
  snprintf(log, sizeof log, "%s/redis.log", s->dir);
  const sw_redis_spec_t spec = {"redis-server", s->dir, log, tcp ? NULL : s->socket, s->port, NULL, 0};
  const pid_t pid = sw_redis_spawn(&spec);
  if (pid < 0) die("fork failed");
  s->pid = pid;
  for (int i = 0; i < 1000; ++i) {
    redisContext* c = sync_connect(s);
    if (c && !c->err) {
      redisReply* r = redisCommand(c, "PING");
      const bool ok = r && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (ok) return;
    } else if (c) {
      redisFree(c);
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      fprintf(stderr, BENCH_NAME ": redis-server exited at start (is it installed? see %s)\n", log);
      exit(2);
    }
    usleep(10000);
  }
  die("redis-server did not answer within 10 s");
}

/* ---- the peer: hiredis async on a bare libuv loop -------------------------------- */

typedef struct raw_op_t raw_op_t;

typedef struct raw_cmd_t {
  raw_op_t* op;
  size_t offset, length;
} raw_cmd_t;

struct raw_op_t {
  redisAsyncContext* ac;
  bool write;
  const char* key;     /* read: the block; write: the staging key */
  const char* target;  /* write: the block's key */
  unsigned char* buf;  /* read: where the bytes land; write: where they come from */
  size_t bytes, chunk;
  uint32_t in_flight;
  size_t next, outstanding, done;
  raw_cmd_t* cmds;
  bool renaming, finished;
  char error[256];
};

static void raw_issue(raw_op_t* op);

static void raw_fail(raw_op_t* op, const char* text) {
  if (!op->error[0]) snprintf(op->error, sizeof op->error, "%s", text);
}

static void raw_on_rename(redisAsyncContext* ac, void* reply, void* privdata) {
  (void)ac;
  raw_op_t* op = (raw_op_t*)privdata;
  redisReply* r = (redisReply*)reply;
  if (!r) raw_fail(op, "the connection was lost");
  else if (r->type == REDIS_REPLY_ERROR) raw_fail(op, r->str);
  op->finished = true;
}

static void raw_on_chunk(redisAsyncContext* ac, void* reply, void* privdata) {
  (void)ac;
  raw_cmd_t* cmd = (raw_cmd_t*)privdata;
  raw_op_t* op = cmd->op;
  redisReply* r = (redisReply*)reply;
  --op->outstanding;
  if (!r) {
    raw_fail(op, "the connection was lost");
  } else if (r->type == REDIS_REPLY_ERROR) {
    raw_fail(op, r->str);
  } else if (!op->write) {
    if (r->type != REDIS_REPLY_STRING || (size_t)r->len != cmd->length) raw_fail(op, "short GETRANGE reply");
    else memcpy(op->buf + cmd->offset, r->str, cmd->length);
  }
  op->done += cmd->length;
  raw_issue(op);
}

static void raw_issue(raw_op_t* op) {
  if (op->error[0]) {
    if (op->outstanding == 0) op->finished = true;
    return;
  }
  while (op->outstanding < op->in_flight && op->next < op->bytes) {
    raw_cmd_t* cmd = &op->cmds[op->next / op->chunk];
    cmd->op = op;
    cmd->offset = op->next;
    cmd->length = op->bytes - op->next < op->chunk ? op->bytes - op->next : op->chunk;
    op->next += cmd->length;
    char from[32], to[32];
    snprintf(from, sizeof from, "%zu", cmd->offset);
    int rc;
    if (op->write) {
      const char* argv[4] = {"SETRANGE", op->key, from, (const char*)op->buf + cmd->offset};
      const size_t lengths[4] = {8, strlen(op->key), strlen(from), cmd->length};
      rc = redisAsyncCommandArgv(op->ac, raw_on_chunk, cmd, 4, argv, lengths);
    } else {
      snprintf(to, sizeof to, "%zu", cmd->offset + cmd->length - 1);
      const char* argv[4] = {"GETRANGE", op->key, from, to};
      const size_t lengths[4] = {8, strlen(op->key), strlen(from), strlen(to)};
      rc = redisAsyncCommandArgv(op->ac, raw_on_chunk, cmd, 4, argv, lengths);
    }
    if (rc != REDIS_OK) die("redisAsyncCommandArgv failed");
    ++op->outstanding;
  }
  if (op->outstanding == 0 && op->next >= op->bytes) {
    if (!op->write) {
      op->finished = true;
    } else if (!op->renaming) {
      op->renaming = true;
      const char* argv[3] = {"RENAME", op->key, op->target};
      const size_t lengths[3] = {6, strlen(op->key), strlen(op->target)};
      if (redisAsyncCommandArgv(op->ac, raw_on_rename, op, 3, argv, lengths) != REDIS_OK)
        die("redisAsyncCommandArgv failed");
    }
  }
}

typedef struct raw_client_t {
  uv_loop_t loop;
  redisAsyncContext* ac;
  raw_cmd_t* cmds;
} raw_client_t;

static void raw_connect(raw_client_t* c, const server_t* s, size_t max_chunks) {
  if (uv_loop_init(&c->loop) != 0) die("uv_loop_init failed");
  c->ac = s->port ? redisAsyncConnect("127.0.0.1", s->port) : redisAsyncConnectUnix(s->socket);
  if (!c->ac || c->ac->err) die("the peer cannot connect");
  if (redisLibuvAttach(c->ac, &c->loop) != REDIS_OK) die("redisLibuvAttach failed");
  c->cmds = (raw_cmd_t*)calloc(max_chunks, sizeof(raw_cmd_t));
  if (!c->cmds) die("out of memory");
}

static void raw_close(raw_client_t* c) {
  redisAsyncFree(c->ac);
  while (uv_run(&c->loop, UV_RUN_NOWAIT) != 0) {
  }
  uv_loop_close(&c->loop);
  free(c->cmds);
}

/* One block, read into `buf` or written from it (then renamed over `key`). */
static void raw_block(raw_client_t* c, bool write, const char* key, const char* staging, unsigned char* buf,
                      size_t bytes, size_t chunk, uint32_t in_flight) {
  raw_op_t op;
  memset(&op, 0, sizeof op);
  op.ac = c->ac;
  op.write = write;
  op.key = write ? staging : key;
  op.target = key;
  op.buf = buf;
  op.bytes = bytes;
  op.chunk = chunk;
  op.in_flight = in_flight;
  op.cmds = c->cmds;
  raw_issue(&op);
  while (!op.finished) uv_run(&c->loop, UV_RUN_ONCE);
  if (op.error[0]) {
    fprintf(stderr, BENCH_NAME ": the peer's %s of %s failed: %s\n", write ? "write" : "read", key, op.error);
    exit(2);
  }
}

/* ---- the measurements ------------------------------------------------------------ */

typedef struct figures_t {
  double gbs[MAX_RUNS];  /* per round */
  double* lat;           /* per block, every round, seconds */
  size_t nlat;
} figures_t;

typedef struct result_t {
  const char* transport;
  const char* geometry;
  const char* op; /* "promote" or "evict" */
  size_t block_bytes, blocks;
  double sw_gbs, raw_gbs, sw_best, raw_best, ratio, ratio_best;
  double sw_p50_ms, sw_p99_ms, raw_p50_ms, raw_p99_ms;
  double crc_ms, crc_share, ratio_without_crc;
} result_t;

static double percentile(double* v, size_t n, double p) {
  qsort(v, n, sizeof(double), compare_doubles);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static double best_of(const double* v, int n) {
  double b = v[0];
  for (int i = 1; i < n; ++i)
    if (v[i] > b) b = v[i];
  return b;
}

static float value_at(size_t i, unsigned salt) { return (float)((i * 2654435761u + salt) % 1000003) * 0.25f - 3.0f; }

typedef struct options_t {
  size_t tiles, block_mib, expert_mib, chunk_bytes;
  uint32_t in_flight;
  int runs;
  bool unix_socket, tcp;
} options_t;

/* Seconds the library's CRC-32C takes over `bytes` bytes (the best of 5). */
static double crc_seconds(const unsigned char* data, size_t bytes) {
  double best = 1e9;
  volatile uint32_t sink = 0;
  for (int i = 0; i < 5; ++i) {
    const double t0 = now_seconds();
    sink ^= bench_crc32c(0, data, bytes);
    const double t = now_seconds() - t0;
    if (t < best) best = t;
  }
  (void)sink;
  return best;
}

/* Runs one geometry on one server: every round, both clients evict (write)
 * every block, then promote (read) every block back, one block at a time,
 * taking turns on each block. */
static void run_geometry(sw_runtime_t* rt, const server_t* s, const char* transport, const char* geometry,
                         size_t tiles, size_t tile_bytes, const options_t* o, result_t out[2]) {
  const size_t T = tile_bytes / sizeof(float), n = tiles * T, bytes = n * sizeof(float);
  float* values = (float*)malloc(bytes);
  unsigned char* raw_buf = (unsigned char*)malloc(bytes);
  if (!values || !raw_buf) die("out of memory");
  for (size_t i = 0; i < n; ++i) values[i] = value_at(i, 7);
  memset(raw_buf, 0, bytes);

  /* StrideWeave: the remote carrier, one block per tile, under a TiledEvictable. */
  char ns[64];
  snprintf(ns, sizeof ns, "bench:%s", geometry);
  const char* endpoints[1] = {s->endpoint};
  sw_remote_carrier_desc_t desc;
  sw_remote_carrier_desc_init(&desc);
  desc.endpoints = endpoints;
  desc.endpoint_count = 1;
  desc.key_namespace = ns;
  desc.block_elements = T;
  desc.chunk_bytes = o->chunk_bytes;
  desc.requests_in_flight = o->in_flight;
  desc.deadline_ms = 60000;
  sw_carrier_t *secondary = NULL, *primary = NULL, *te = NULL;
  CHECK(sw_carrier_create_remote(rt, SW_DTYPE_F32, n, &desc, &secondary));
  CHECK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &primary));
  const int64_t grid[1] = {(int64_t)tiles}, tile[1] = {(int64_t)T};
  CHECK(sw_tiled_create(primary, secondary, grid, tile, 1, NULL, &te));
  sw_tile_set_t** one = (sw_tile_set_t**)calloc(tiles, sizeof(sw_tile_set_t*));
  for (size_t k = 0; k < tiles; ++k) {
    const int64_t coord[1] = {(int64_t)k};
    CHECK(sw_tile_set_create(coord, 1, 1, &one[k]));
  }
  sw_tile_set_t* all = NULL;
  CHECK(sw_tiled_tiles(te, SW_TILES_VALID, &all));

  /* The peer: its own keys on the same server. */
  raw_client_t raw;
  raw_connect(&raw, s, tile_bytes / o->chunk_bytes + 2);
  char (*keys)[64] = malloc(tiles * 64), (*staging)[64] = malloc(tiles * 64);
  for (size_t k = 0; k < tiles; ++k) {
    snprintf(keys[k], 64, "peer:%s:b:%zu", geometry, k);
    snprintf(staging[k], 64, "peer:%s:s:%zu", geometry, k);
  }

  figures_t f[2][2];  /* [op: 0 promote, 1 evict][client: 0 StrideWeave, 1 peer] */
  const size_t max_lat = (size_t)o->runs * tiles;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      f[a][b].lat = (double*)malloc(max_lat * sizeof(double));
      f[a][b].nlat = 0;
    }

  for (int round = -1; round < o->runs; ++round) {  /* round -1: warm-up, untimed */
    const bool record = round >= 0;
    /* Dirty every tile (untimed); then both clients evict (write) each
     * block in turn, then promote (read) each back, taking turns on each
     * block (see the top of the file). */
    CHECK(sw_carrier_write(te, 0, n, values));
    for (int op = 1; op >= 0; --op) {
      double sum[2] = {0, 0};
      for (size_t k = 0; k < tiles; ++k) {
        const int first = (int)((k + (size_t)round + 1) & 1);
        for (int turn = 0; turn < 2; ++turn) {
          const int client = turn == 0 ? first : 1 - first;
          const double t0 = now_seconds();
          if (client == 0)
            CHECK(op == 1 ? sw_tiled_evict(te, one[k]) : sw_tiled_promote(te, one[k]));
          else
            raw_block(&raw, op == 1, keys[k], staging[k],
                      (op == 1 ? (unsigned char*)values : raw_buf) + k * tile_bytes, tile_bytes, o->chunk_bytes,
                      o->in_flight);
          const double t = now_seconds() - t0;
          sum[client] += t;
          if (record) f[op][client].lat[f[op][client].nlat++] = t;
        }
      }
      if (record)
        for (int client = 0; client < 2; ++client) f[op][client].gbs[round] = (double)bytes / sum[client] * 1e-9;
    }
    if (round == -1) {
      float* back = (float*)malloc(bytes);
      CHECK(sw_carrier_read(te, 0, n, back));
      if (memcmp(back, values, bytes) != 0) die("the promoted tiles differ from the evicted values");
      free(back);
      if (memcmp(raw_buf, values, bytes) != 0) die("the peer read back other bytes than it wrote");
      memset(raw_buf, 0, bytes);
    }
    CHECK(sw_tiled_evict(te, all)); /* clean: dropped, nothing written */
  }

  const double crc_s = crc_seconds((const unsigned char*)values, tile_bytes);
  for (int op = 0; op < 2; ++op) {
    result_t* r = &out[op];
    memset(r, 0, sizeof *r);
    r->transport = transport;
    r->geometry = geometry;
    r->op = op == 0 ? "promote" : "evict";
    r->block_bytes = tile_bytes;
    r->blocks = tiles;
    double ratios[MAX_RUNS], without_crc[MAX_RUNS];
    for (int i = 0; i < o->runs; ++i) {
      ratios[i] = f[op][0].gbs[i] / f[op][1].gbs[i];
      /* Per block: the peer's time over StrideWeave's less one CRC of the block. */
      const double sw_block = (double)tile_bytes / (f[op][0].gbs[i] * 1e9);
      const double raw_block = (double)tile_bytes / (f[op][1].gbs[i] * 1e9);
      without_crc[i] = raw_block / (sw_block - crc_s);
    }
    r->sw_gbs = median(f[op][0].gbs, o->runs);
    r->raw_gbs = median(f[op][1].gbs, o->runs);
    r->sw_best = best_of(f[op][0].gbs, o->runs);
    r->raw_best = best_of(f[op][1].gbs, o->runs);
    r->ratio = median(ratios, o->runs);
    r->ratio_best = r->sw_best / r->raw_best;
    r->sw_p50_ms = 1e3 * percentile(f[op][0].lat, f[op][0].nlat, 0.50);
    r->sw_p99_ms = 1e3 * percentile(f[op][0].lat, f[op][0].nlat, 0.99);
    r->raw_p50_ms = 1e3 * percentile(f[op][1].lat, f[op][1].nlat, 0.50);
    r->raw_p99_ms = 1e3 * percentile(f[op][1].lat, f[op][1].nlat, 0.99);
    r->crc_ms = 1e3 * crc_s;
    r->crc_share = crc_s / ((double)tile_bytes / (r->sw_gbs * 1e9));
    r->ratio_without_crc = median(without_crc, o->runs);
  }

  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) free(f[a][b].lat);
  raw_close(&raw);
  /* The peer's keys go; the carrier deletes its own when released. */
  redisContext* c = sync_connect(s);
  for (size_t k = 0; c && !c->err && k < tiles; ++k) {
    redisReply* r = redisCommand(c, "UNLINK %s %s", keys[k], staging[k]);
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  free(keys);
  free(staging);
  for (size_t k = 0; k < tiles; ++k) sw_tile_set_release(one[k]);
  free(one);
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(primary);
  sw_carrier_release(secondary);
  free(values);
  free(raw_buf);
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--tiles N] [--block-mib M] [--expert-mib M] [--runs R] [--chunk-kib K] [--in-flight F] "
          "[--transport unix|tcp|both]\n",
          argv0);
  exit(2);
}

int main(int argc, char** argv) {
  options_t o = {64, 1, 112, 1u << 20, 4, 11, true, true};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (i + 1 >= argc) usage(argv[0]);
    const char* v = argv[++i];
    if (!strcmp(a, "--tiles")) o.tiles = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--block-mib")) o.block_mib = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--expert-mib")) o.expert_mib = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--runs")) o.runs = atoi(v);
    else if (!strcmp(a, "--chunk-kib")) o.chunk_bytes = strtoull(v, NULL, 10) << 10;
    else if (!strcmp(a, "--in-flight")) o.in_flight = (uint32_t)atoi(v);
    else if (!strcmp(a, "--transport")) {
      o.unix_socket = !strcmp(v, "unix") || !strcmp(v, "both");
      o.tcp = !strcmp(v, "tcp") || !strcmp(v, "both");
      if (!o.unix_socket && !o.tcp) usage(argv[0]);
    } else usage(argv[0]);
  }
  if (o.runs < 1 || o.runs > MAX_RUNS || !o.tiles || !o.block_mib || !o.expert_mib || !o.chunk_bytes ||
      !o.in_flight || o.chunk_bytes % sizeof(float))
    die("need 1 <= runs <= 32 and non-zero sizes (the chunk a multiple of 4 bytes)");

  atexit(stop_all_servers);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);

  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  const double load0 = load_average(), t_start = now_seconds();
  printf("bench_remote: promote (read) and dirty evict (write + commit) of the remote tier vs a bare hiredis "
         "client on a libuv loop\n");
  printf("chunk %zu KiB, %u requests in flight, %d rounds after a warm-up, clients taking turns block by block; load average %.2f\n",
         o.chunk_bytes >> 10, o.in_flight, o.runs, load0);
  printf("Over a unix socket or loopback TCP this measures the protocol's and the copies' costs, not a network.\n\n");

  result_t results[8];
  int nres = 0;
  for (int t = 0; t < 2; ++t) {
    const bool tcp = t == 1;
    if (tcp ? !o.tcp : !o.unix_socket) continue;
    server_t server;
    g_servers[t] = &server;
    server_start(&server, tcp);
    const char* transport = tcp ? "tcp" : "unix";
    char blocks_name[32], expert_name[32];
    snprintf(blocks_name, sizeof blocks_name, "%zux%zuMiB", o.tiles, o.block_mib);
    snprintf(expert_name, sizeof expert_name, "1x%zuMiB", o.expert_mib);
    run_geometry(rt, &server, transport, blocks_name, o.tiles, o.block_mib << 20, &o, results + nres);
    nres += 2;
    run_geometry(rt, &server, transport, expert_name, 1, o.expert_mib << 20, &o, results + nres);
    nres += 2;
    server_stop(&server);
    g_servers[t] = NULL;
  }

  printf("%-9s %-5s %-8s %9s %9s %7s %7s %10s %10s %10s %10s %8s %7s %8s\n", "geometry", "via", "op", "SW GB/s",
         "peer GB/s", "ratio", "best", "SW p50 ms", "SW p99 ms", "peer p50", "peer p99", "CRC ms", "CRC %",
         "w/o CRC");
  bool met = true;
  for (int i = 0; i < nres; ++i) {
    const result_t* r = &results[i];
    met = met && r->ratio >= TARGET;
    printf("%-9s %-5s %-8s %9.2f %9.2f %7.3f %7.3f %10.3f %10.3f %10.3f %10.3f %8.3f %6.1f%% %8.3f\n", r->geometry,
           r->transport, r->op, r->sw_gbs, r->raw_gbs, r->ratio, r->ratio_best, r->sw_p50_ms, r->sw_p99_ms,
           r->raw_p50_ms, r->raw_p99_ms, r->crc_ms, 100 * r->crc_share, r->ratio_without_crc);
  }
  const double load1 = load_average();
  printf("\nratio: StrideWeave's GB/s over the peer's, per round, median; best: fastest rounds. CRC: the carrier's "
         "CRC-32C of one block (the peer computes none), its share of StrideWeave's time per block, and the ratio "
         "with all of it taken out (a bound: part of it overlaps the server's work).\n");
  printf("target: promote and evict >= %.2fx the peer: %s; load average %.2f -> %.2f%s; %.0f s\n", TARGET,
         met ? "ok" : "MISS", load0, load1, load0 > 1.5 ? " (the machine is loaded: figures are noisy)" : "",
         now_seconds() - t_start);

  printf("\nSUMMARY_JSON {\"bench\": \"remote\", \"chunk_bytes\": %zu, \"requests_in_flight\": %u, \"runs\": %d, "
         "\"load_start\": %.2f, \"load_end\": %.2f, \"target\": %.2f, \"results\": [",
         o.chunk_bytes, o.in_flight, o.runs, load0, load1, TARGET);
  for (int i = 0; i < nres; ++i) {
    const result_t* r = &results[i];
    printf("%s{\"transport\": \"%s\", \"geometry\": \"%s\", \"op\": \"%s\", \"block_bytes\": %zu, \"blocks\": %zu, "
           "\"sw_gbs\": %.4f, \"raw_gbs\": %.4f, \"ratio\": %.4f, \"ratio_best\": %.4f, \"sw_p50_ms\": %.4f, "
           "\"sw_p99_ms\": %.4f, \"raw_p50_ms\": %.4f, \"raw_p99_ms\": %.4f, \"crc_ms\": %.4f, \"crc_share\": %.4f, "
           "\"ratio_without_crc\": %.4f}",
           i ? ", " : "", r->transport, r->geometry, r->op, r->block_bytes, r->blocks, r->sw_gbs, r->raw_gbs, r->ratio,
           r->ratio_best, r->sw_p50_ms, r->sw_p99_ms, r->raw_p50_ms, r->raw_p99_ms, r->crc_ms, r->crc_share,
           r->ratio_without_crc);
  }
  printf("], \"target_met\": %s}\n", met ? "true" : "false");
  sw_runtime_release(rt);
  return 0;
}
