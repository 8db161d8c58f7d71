/*
 * bench_zstd: the zstd carrier against raw libzstd, measured in the same
 * process so that the ratios survive this machine's 10-30 % drift.
 *
 * Data is weight-like: f32 values from a normal distribution (mean 0, std
 * 0.02), and the same values rounded to bf16. For each dtype, with and
 * without the byte shuffle:
 *
 *   ratio         raw bytes / sw_carrier_stored_bytes.
 *   sync          sw_carrier_read of the whole carrier on one thread vs
 *                 ZSTD_decompressDCtx of the same frames on one thread into
 *                 the same warm buffer; GB/s of decompressed bytes. The tool
 *                 builds the frames itself (same level, checksum, shuffle)
 *                 and checks that their total size equals the carrier's
 *                 stored bytes, so both sides decompress the same frames.
 *   move          (shuffle on, the default) sw_move_async of a tensor on the
 *                 zstd carrier into an empty CPU carrier, spread over the
 *                 runtime's W workers, vs W threads each running
 *                 ZSTD_decompressDCtx over its share of the same frames.
 *                 The move decompresses straight into the destination it
 *                 allocates. Its CPU seconds also include freeing the source's
 *                 frames (on a worker), which the raw peer has no part of.
 *
 * Target (tools/bench/README.md): decompression >= 80 % of raw zstd speed per
 * core. Every figure is the median of R repetitions after a warm-up; the
 * carrier and its peer alternate within each repetition. The "best" ratios
 * compare the fastest repetitions instead, which stay meaningful when other
 * processes load the cores (the tool prints the load average; rerun when it
 * is high). The last line is "BENCH_JSON {...}" for scripts.
 *
 * Usage:
 *   build/tools/bench/bench_zstd [--mib M] [--reps R] [--workers W]
 *                                [--frame-elements N] [--level L]
 * Defaults: 64 MiB of f32 (and half that of bf16), 7 reps, 2 workers,
 * 1 Mi elements per frame (the carrier's default), level 1.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_zstd"
#include "bench_util.h"

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "bench_zstd: out of memory\n");
    exit(2);
  }
  return p;
}

/* ---- data ------------------------------------------------------------------ */

static uint64_t rng_state = 0x853c49e6748fea9bull;
static double uniform01(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return ((double)(rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static void normal_f32(float* out, size_t n, double std) {
  for (size_t i = 0; i < n; i += 2) {
    const double r = sqrt(-2.0 * log(uniform01())), a = 6.283185307179586 * uniform01();
    out[i] = (float)(std * r * cos(a));
    if (i + 1 < n) out[i + 1] = (float)(std * r * sin(a));
  }
}

static uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest even; no NaNs here */
  return (uint16_t)(bits >> 16);
}

/* ---- the peer's frames ------------------------------------------------------ */

typedef struct {
  size_t count;
  void** data;
  size_t* size;          /* compressed bytes */
  size_t* content;       /* decompressed bytes */
  size_t total_compressed;
} frames_t;

/* The frames the carrier builds: one per frame_elements chunk, bytes
 * transposed into planes when shuffled, level `level`, content checksum. */
static frames_t build_frames(const unsigned char* values, size_t n, size_t es, size_t frame_elements, int level,
                             int shuffle) {
  frames_t f;
  f.count = (n + frame_elements - 1) / frame_elements;
  f.data = (void**)xmalloc(f.count * sizeof(void*));
  f.size = (size_t*)xmalloc(f.count * sizeof(size_t));
  f.content = (size_t*)xmalloc(f.count * sizeof(size_t));
  f.total_compressed = 0;
  unsigned char* planes = (unsigned char*)xmalloc(frame_elements * es);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  for (size_t k = 0; k < f.count; ++k) {
    const size_t begin = k * frame_elements;
    const size_t len = n - begin < frame_elements ? n - begin : frame_elements;
    const unsigned char* src = values + begin * es;
    if (shuffle) {
      for (size_t i = 0; i < len; ++i)
        for (size_t b = 0; b < es; ++b) planes[b * len + i] = src[i * es + b];
      src = planes;
    }
    const size_t bound = ZSTD_compressBound(len * es);
    f.data[k] = xmalloc(bound);
    f.size[k] = ZSTD_compress2(cctx, f.data[k], bound, src, len * es);
    if (ZSTD_isError(f.size[k])) {
      fprintf(stderr, "bench_zstd: ZSTD_compress2: %s\n", ZSTD_getErrorName(f.size[k]));
      exit(2);
    }
    f.content[k] = len * es;
    f.total_compressed += f.size[k];
  }
  ZSTD_freeCCtx(cctx);
  free(planes);
  return f;
}

static void free_frames(frames_t* f) {
  for (size_t k = 0; k < f->count; ++k) free(f->data[k]);
  free(f->data);
  free(f->size);
  free(f->content);
}

/* Raw decompression of frames [lo, hi) into `out` (the whole carrier's bytes). */
typedef struct {
  const frames_t* frames;
  size_t lo, hi;
  unsigned char* out;
  ZSTD_DCtx* dctx;
} raw_job_t;

static void* raw_decompress(void* arg) {
  raw_job_t* j = (raw_job_t*)arg;
  size_t offset = 0;
  for (size_t k = 0; k < j->lo; ++k) offset += j->frames->content[k];
  for (size_t k = j->lo; k < j->hi; ++k) {
    const size_t r = ZSTD_decompressDCtx(j->dctx, j->out + offset, j->frames->content[k], j->frames->data[k],
                                         j->frames->size[k]);
    if (ZSTD_isError(r) || r != j->frames->content[k]) {
      fprintf(stderr, "bench_zstd: raw decompression failed\n");
      exit(2);
    }
    offset += r;
  }
  return NULL;
}

/* Seconds for `threads` threads decompressing all frames, split evenly; the
 * CPU seconds they used go to *cpu. */
static double time_raw(const frames_t* frames, unsigned char* out, int threads, ZSTD_DCtx** dctx, double* cpu) {
  raw_job_t jobs[64];
  pthread_t tid[64];
  const double c0 = cpu_seconds();
  const double t0 = now_seconds();
  for (int t = 0; t < threads; ++t) {
    jobs[t] = (raw_job_t){frames, frames->count * (size_t)t / (size_t)threads,
                          frames->count * (size_t)(t + 1) / (size_t)threads, out, dctx[t]};
    if (t > 0) pthread_create(&tid[t], NULL, raw_decompress, &jobs[t]);
  }
  raw_decompress(&jobs[0]);
  for (int t = 1; t < threads; ++t) pthread_join(tid[t], NULL);
  const double seconds = now_seconds() - t0;
  *cpu = cpu_seconds() - c0;
  return seconds;
}

/* ---- one configuration ------------------------------------------------------ */

typedef struct {
  const char* dtype_name;
  int shuffle;
  double ratio;
  double sync_gbs, raw1_gbs, sync_vs_raw, sync_vs_raw_best;
  double move_gbs, rawn_gbs, move_vs_raw, move_vs_raw_best; /* shuffle on only; 0 otherwise */
  double move_in_gbs;                     /* CPU -> zstd (compression), for information */
  double sync_cpu_vs_raw, move_cpu_vs_raw; /* raw CPU seconds / carrier CPU seconds, median of per-rep ratios */
} result_t;

typedef struct {
  int reps, workers, level;
  size_t frame_elements;
} options_t;

static sw_carrier_t* make_zstd(sw_runtime_t* rt, sw_dtype_t dtype, size_t size, const options_t* o, int shuffle) {
  sw_zstd_carrier_desc_t desc;
  sw_zstd_carrier_desc_init(&desc);
  desc.level = o->level;
  desc.frame_elements = o->frame_elements;
  desc.shuffle = shuffle;
  sw_carrier_t* c = NULL;
  CHECK(sw_carrier_create_zstd(rt, dtype, size, &desc, &c));
  return c;
}

static sw_tensor_t* whole_tensor(sw_carrier_t* c, size_t n) {
  int64_t extent = (int64_t)n;
  sw_layout_t* l = NULL;
  CHECK(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_create(c, 0, l, &t));
  sw_layout_release(l);
  return t;
}

static double move_and_wait(sw_tensor_t* t, sw_carrier_t* destination, sw_tensor_t** out_result, double* cpu) {
  sw_await_t* a = NULL;
  const double c0 = cpu_seconds();
  const double t0 = now_seconds();
  CHECK(sw_move_async(t, destination, &a));
  CHECK(sw_await_wait(a, -1));
  const double dt = now_seconds() - t0;
  *cpu = cpu_seconds() - c0;
  CHECK(sw_await_result(a, out_result));
  sw_await_release(a);
  return dt;
}

static result_t run_config(sw_runtime_t* rt, sw_dtype_t dtype, const char* name, const void* values, size_t n,
                           int shuffle, const options_t* o) {
  result_t res;
  memset(&res, 0, sizeof res);
  res.dtype_name = name;
  res.shuffle = shuffle;
  const size_t es = sw_dtype_size(dtype), bytes = n * es;
  const double gb = (double)bytes / 1e9;

  sw_carrier_t* z = make_zstd(rt, dtype, n, o, shuffle);
  CHECK(sw_carrier_write(z, 0, n, values));
  uint64_t stored = 0;
  CHECK(sw_carrier_stored_bytes(z, &stored));
  res.ratio = (double)bytes / (double)stored;

  frames_t frames = build_frames((const unsigned char*)values, n, es, o->frame_elements, o->level, shuffle);
  if (frames.total_compressed != stored)
    fprintf(stderr, "bench_zstd: warning: the peer's frames hold %zu bytes, the carrier %llu: not the same frames\n",
            frames.total_compressed, (unsigned long long)stored);

  ZSTD_DCtx* dctx[64];
  for (int t = 0; t < o->workers; ++t) dctx[t] = ZSTD_createDCtx();
  unsigned char* out = (unsigned char*)xmalloc(bytes);
  memset(out, 0, bytes); /* warm */

  /* Sync, one thread: carrier read vs raw, alternating. */
  double* t_sync = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
  double* t_raw1 = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
  double* cpu_ratio = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
  for (int r = -1; r < o->reps; ++r) {
    const double c0 = cpu_seconds();
    const double t0 = now_seconds();
    CHECK(sw_carrier_read(z, 0, n, out));
    const double ts = now_seconds() - t0;
    const double cs = cpu_seconds() - c0;
    if (r == -1 && memcmp(out, values, bytes) != 0) {
      fprintf(stderr, "bench_zstd: the carrier read wrong values\n");
      exit(2);
    }
    double cr;
    const double tr = time_raw(&frames, out, 1, dctx, &cr);
    if (r >= 0) {
      t_sync[r] = ts;
      t_raw1[r] = tr;
      cpu_ratio[r] = cr / cs;
    }
  }
  res.sync_cpu_vs_raw = median(cpu_ratio, o->reps);
  res.sync_vs_raw_best = fastest(t_raw1, o->reps) / fastest(t_sync, o->reps);
  res.sync_gbs = gb / median(t_sync, o->reps);
  res.raw1_gbs = gb / median(t_raw1, o->reps);
  res.sync_vs_raw = res.sync_gbs / res.raw1_gbs;
  sw_carrier_release(z);

  if (shuffle) {
    /* Moves, with the workers: CPU -> zstd builds the source (a move disposes
     * its source, so each repetition needs a fresh one), zstd -> CPU is the
     * figure; raw decompression with as many threads alternates with it. */
    double* t_move = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
    double* t_in = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
    double* t_rawn = (double*)xmalloc(sizeof(double) * (size_t)o->reps);
    for (int r = -1; r < o->reps; ++r) {
      sw_carrier_t* cpu = NULL;
      CHECK(sw_carrier_create_cpu_from(rt, dtype, values, n, &cpu));
      sw_tensor_t* t = whole_tensor(cpu, n);
      sw_carrier_t* zs = make_zstd(rt, dtype, 0, o, shuffle);
      sw_tensor_t* on_zstd = NULL;
      double cin, cm, cr;
      const double tin = move_and_wait(t, zs, &on_zstd, &cin);
      sw_carrier_t* back = NULL;
      CHECK(sw_carrier_create_cpu(rt, dtype, 0, &back));
      sw_tensor_t* on_cpu = NULL;
      const double tm = move_and_wait(on_zstd, back, &on_cpu, &cm);
      if (r == -1) {
        CHECK(sw_tensor_read(on_cpu, out, bytes));
        if (memcmp(out, values, bytes) != 0) {
          fprintf(stderr, "bench_zstd: the move produced wrong values\n");
          exit(2);
        }
      }
      sw_tensor_release(on_cpu);
      sw_tensor_release(on_zstd);
      sw_tensor_release(t);
      sw_carrier_release(back);
      sw_carrier_release(zs);
      sw_carrier_release(cpu);
      const double tr = time_raw(&frames, out, o->workers, dctx, &cr);
      if (r >= 0) {
        t_move[r] = tm;
        t_in[r] = tin;
        t_rawn[r] = tr;
        cpu_ratio[r] = cr / cm;
      }
    }
    res.move_vs_raw_best = fastest(t_rawn, o->reps) / fastest(t_move, o->reps);
    res.move_gbs = gb / median(t_move, o->reps);
    res.move_in_gbs = gb / median(t_in, o->reps);
    res.rawn_gbs = gb / median(t_rawn, o->reps);
    res.move_vs_raw = res.move_gbs / res.rawn_gbs;
    res.move_cpu_vs_raw = median(cpu_ratio, o->reps);
    free(t_move);
    free(t_in);
    free(t_rawn);
  }

  free(cpu_ratio);
  free(t_sync);
  free(t_raw1);
  free(out);
  for (int t = 0; t < o->workers; ++t) ZSTD_freeDCtx(dctx[t]);
  free_frames(&frames);
  return res;
}

int main(int argc, char** argv) {
  options_t o = {7, 2, 1, (size_t)1 << 20};
  size_t mib = 64;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--mib") == 0) mib = (size_t)atol(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) o.reps = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--workers") == 0) o.workers = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--level") == 0) o.level = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--frame-elements") == 0) o.frame_elements = (size_t)atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--mib M] [--reps R] [--workers W] [--frame-elements N] [--level L]\n", argv[0]);
      return 1;
    }
  }
  if (o.reps < 1 || o.reps > 256 || o.workers < 1 || o.workers > 64 || o.frame_elements == 0 || mib == 0) {
    fprintf(stderr, "bench_zstd: reps must be 1..256, workers 1..64, frame elements and MiB positive\n");
    return 1;
  }

  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.worker_threads = (uint32_t)o.workers;
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(&desc, &rt));

  const size_t n = mib * ((size_t)1 << 20) / 4;
  float* f32 = (float*)xmalloc(n * sizeof(float));
  normal_f32(f32, n, 0.02);
  uint16_t* bf16 = (uint16_t*)xmalloc(n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) bf16[i] = f32_to_bf16(f32[i]);

  printf("bench_zstd: %zu Mi elements of N(0, 0.02) weights, level %d, %zu elements per frame, %d workers, "
         "median of %d\n",
         n >> 20, o.level, o.frame_elements, o.workers, o.reps);
  result_t results[4];
  int count = 0;
  for (int shuffle = 1; shuffle >= 0; --shuffle) {
    results[count++] = run_config(rt, SW_DTYPE_F32, "f32", f32, n, shuffle, &o);
    results[count++] = run_config(rt, SW_DTYPE_BF16, "bf16", bf16, n, shuffle, &o);
  }

  printf("%-5s %-7s %6s | %9s %9s %6s %5s | %9s %9s %6s %5s %9s | %9s\n", "dtype", "shuffle", "ratio", "sync GB/s",
         "raw 1T", "ratio", "best", "move GB/s", "raw WT", "ratio", "best", "per core", "CPU->zstd");
  for (int i = 0; i < count; ++i) {
    const result_t* r = &results[i];
    printf("%-5s %-7s %6.3f | %9.2f %9.2f %5.0f%% %4.0f%% |", r->dtype_name, r->shuffle ? "on" : "off", r->ratio,
           r->sync_gbs, r->raw1_gbs, 100 * r->sync_vs_raw, 100 * r->sync_vs_raw_best);
    if (r->shuffle)
      printf(" %9.2f %9.2f %5.0f%% %4.0f%% %9.2f | %9.2f\n", r->move_gbs, r->rawn_gbs, 100 * r->move_vs_raw,
             100 * r->move_vs_raw_best, r->move_gbs / o.workers, r->move_in_gbs);
    else
      printf(" %9s %9s %6s %5s %9s | %9s\n", "-", "-", "-", "-", "-", "-");
  }
  int met = 1, met_best = 1, met_cpu = 1;
  for (int i = 0; i < count; ++i) {
    if (results[i].sync_vs_raw < 0.8) met = 0;
    if (results[i].shuffle && results[i].move_vs_raw < 0.8) met = 0;
    if (results[i].sync_vs_raw_best < 0.8) met_best = 0;
    if (results[i].shuffle && results[i].move_vs_raw_best < 0.8) met_best = 0;
    if (results[i].sync_cpu_vs_raw < 0.8) met_cpu = 0;
    if (results[i].shuffle && results[i].move_cpu_vs_raw < 0.8) met_cpu = 0;
  }
  printf("\nper core, from CPU seconds (raw / carrier; robust under load; the move's include freeing its\n"
         "source):\n");
  for (int i = 0; i < count; ++i) {
    printf("  %-5s shuffle %-3s  sync read %5.0f%%", results[i].dtype_name, results[i].shuffle ? "on" : "off",
           100 * results[i].sync_cpu_vs_raw);
    if (results[i].shuffle) printf("   move %5.0f%%", 100 * results[i].move_cpu_vs_raw);
    printf("\n");
  }
  double load[3] = {0, 0, 0};
  const int have_load = getloadavg(load, 3) == 3;
  printf("target: carrier decompression >= 80 %% of raw zstd per core: %s (medians), %s (best), %s (CPU seconds)\n",
         met ? "ok" : "MISS", met_best ? "ok" : "MISS", met_cpu ? "ok" : "MISS");
  if (have_load) printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);

  printf("BENCH_JSON {\"tool\":\"bench_zstd\",\"elements\":%zu,\"level\":%d,\"frame_elements\":%zu,\"workers\":%d,"
         "\"reps\":%d,\"results\":[",
         n, o.level, o.frame_elements, o.workers, o.reps);
  for (int i = 0; i < count; ++i) {
    const result_t* r = &results[i];
    printf("%s{\"dtype\":\"%s\",\"shuffle\":%s,\"compression_ratio\":%.4f,\"sync_gbs\":%.3f,\"raw_1t_gbs\":%.3f,"
           "\"sync_vs_raw\":%.3f,\"sync_vs_raw_best\":%.3f,\"sync_cpu_vs_raw\":%.3f",
           i ? "," : "", r->dtype_name, r->shuffle ? "true" : "false", r->ratio, r->sync_gbs, r->raw1_gbs,
           r->sync_vs_raw, r->sync_vs_raw_best, r->sync_cpu_vs_raw);
    if (r->shuffle)
      printf(",\"move_gbs\":%.3f,\"raw_workers_gbs\":%.3f,\"move_vs_raw\":%.3f,\"move_vs_raw_best\":%.3f,"
             "\"move_per_core_gbs\":%.3f,\"cpu_to_zstd_gbs\":%.3f,\"move_cpu_vs_raw\":%.3f",
             r->move_gbs, r->rawn_gbs, r->move_vs_raw, r->move_vs_raw_best, r->move_gbs / o.workers,
             r->move_in_gbs, r->move_cpu_vs_raw);
    printf("}");
  }
  printf("],\"target_met\":%s,\"target_met_best\":%s,\"target_met_cpu\":%s,\"load_average\":%.2f}\n",
         met ? "true" : "false", met_best ? "true" : "false", met_cpu ? "true" : "false", have_load ? load[0] : -1.0);

  free(bf16);
  free(f32);
  CHECK(sw_runtime_shutdown(rt));
  sw_runtime_release(rt);
  return 0;
}
