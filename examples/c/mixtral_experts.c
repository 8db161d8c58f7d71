/*
 * mixtral_experts: a Hugging Face Mixtral checkpoint's experts as one
 * TiledEvictable whose secondary tier is the .safetensors file itself.
 *
 *   mixtral_experts [--file PATH] [--layer L] [--experts E] [--matrix w1|w2|w3]
 *
 * A Mixtral checkpoint stores each expert's matrices as their own tensors,
 *   model.layers.{L}.block_sparse_moe.experts.{e}.w1.weight   shape (O, I)
 * row-major. sw_carrier_open_safetensors_stack opens the E tensors of layer
 * L as one read-only File carrier over their E file regions: the stack
 * (E, O, I), which, as it lies in the file, is the first-mode-fastest tensor
 * (I, O, E). The geometry it returns, grid (1, 1, E) and tile (I, O, 1),
 * makes tile e exactly tensor e's bytes, so promoting or projecting an expert
 * is one contiguous read of the file, and the projection of S experts is the
 * compact (I, O, S) a matmul takes directly (docs/matmul.md). Permuted by
 * info.permutation it indexes as the checkpoint does: [s, o, i].
 *
 * Without --file the program first writes a small synthetic checkpoint of
 * that layout (sw_save_safetensors) to a temporary directory. It projects
 * experts 1 and E - 1, checks every value against the checkpoint's own
 * tensors opened one by one, and exits non-zero on any difference, so it is
 * a test as well as an example. See docs/model-files.md.
 */
/* mkdtemp */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strideweave/strideweave.h"

static void check(sw_error_t* error, const char* call, int line) {
  if (!error) return;
  fprintf(stderr, "mixtral_experts.c:%d: %s failed: %s (%s)\n", line, call, sw_error_message(error),
          sw_error_code_name(sw_error_code(error)));
  sw_error_free(error);
  exit(1);
}
#define CHECK(call) check((call), #call, __LINE__)

enum { kOut = 8, kIn = 6, kMaxExperts = 64 };

static void expert_name(char* out, size_t n, int layer, int expert, const char* matrix) {
  snprintf(out, n, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", layer, expert, matrix);
}

/* A synthetic weight: distinct for every (layer, expert, o, i). */
static float synthetic(int layer, int e, int o, int i) { return (float)(layer * 1000000 + e * 10000 + o * 100 + i); }

/* Writes layers 0 and 1 of a checkpoint with `experts` experts (w1, w2, w3
 * each (kOut, kIn)) to `path`. */
static void write_checkpoint(sw_runtime_t* rt, const char* path, int experts) {
  const size_t count = (size_t)2 * (size_t)experts * 3;
  char(*names)[96] = calloc(count, sizeof *names);
  const char** name_ptrs = calloc(count, sizeof *name_ptrs);
  sw_tensor_t** tensors = calloc(count, sizeof *tensors);
  if (!names || !name_ptrs || !tensors) exit(1);
  static const char* const matrices[3] = {"w1", "w2", "w3"};
  size_t k = 0;
  for (int layer = 0; layer < 2; ++layer)
    for (int e = 0; e < experts; ++e)
      for (int m = 0; m < 3; ++m, ++k) {
        /* A (kOut, kIn) tensor: element (o, i) at data[o + kOut * i] (first
         * mode fastest); it saves as the (O, I) tensor it indexes as. */
        float data[kOut * kIn];
        for (int o = 0; o < kOut; ++o)
          for (int i = 0; i < kIn; ++i) data[o + kOut * i] = synthetic(layer, e, o, i) + (float)m * 0.25f;
        const int64_t extents[2] = {kOut, kIn};
        CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, extents, 2, data, &tensors[k]));
        expert_name(names[k], sizeof names[k], layer, e, matrices[m]);
        name_ptrs[k] = names[k];
      }
  sw_safetensors_save_desc_t desc;
  sw_safetensors_save_desc_init(&desc);
  const char* keys[1] = {"format"};
  const char* values[1] = {"pt"};
  desc.metadata_keys = keys;
  desc.metadata_values = values;
  desc.metadata_count = 1;
  CHECK(sw_save_safetensors(path, name_ptrs, tensors, count, &desc));
  for (size_t j = 0; j < count; ++j) sw_tensor_release(tensors[j]);
  free(tensors);
  free(name_ptrs);
  free(names);
}

int main(int argc, char** argv) {
  const char* file = NULL;
  const char* matrix = "w1";
  int layer = 1, experts = 8;
  for (int a = 1; a < argc; ++a) {
    if (!strcmp(argv[a], "--file") && a + 1 < argc) file = argv[++a];
    else if (!strcmp(argv[a], "--layer") && a + 1 < argc) layer = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--experts") && a + 1 < argc) experts = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--matrix") && a + 1 < argc) matrix = argv[++a];
    else {
      fprintf(stderr, "usage: %s [--file PATH] [--layer L] [--experts E] [--matrix w1|w2|w3]\n", argv[0]);
      return 2;
    }
  }
  if (strcmp(matrix, "w1") && strcmp(matrix, "w2") && strcmp(matrix, "w3")) {
    fprintf(stderr, "mixtral_experts: --matrix is w1, w2 or w3\n");
    return 2;
  }
  if (experts < 2 || experts > kMaxExperts || layer < 0 || (!file && layer > 1)) {
    fprintf(stderr, "mixtral_experts: need 2 <= experts <= %d and a layer the checkpoint has\n", kMaxExperts);
    return 2;
  }

  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  char dir[] = "/tmp/sw_mixtral_XXXXXX";
  char path[128];
  if (!file) {
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      return 1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_checkpoint(rt, path, experts);
    file = path;
  }

  /* 1. The names of layer L's experts, in expert order: tile e is names[e]. */
  char names[kMaxExperts][96];
  const char* name_ptrs[kMaxExperts];
  for (int e = 0; e < experts; ++e) {
    expert_name(names[e], sizeof names[e], layer, e, matrix);
    name_ptrs[e] = names[e];
  }

  /* 2. One File carrier over the E tensors, and the geometry to use it with. */
  sw_file_tensor_info_t info;
  sw_file_tensor_info_init(&info);
  sw_carrier_t* weights = NULL;
  CHECK(sw_carrier_open_safetensors_stack(rt, file, name_ptrs, (size_t)experts, NULL, &info, &weights));
  printf("layer %d %s: %zu experts of (%lld, %lld) %s, file-order shape (%lld, %lld, %lld)\n", layer, matrix,
         info.segments, (long long)info.shape[1], (long long)info.shape[2], sw_dtype_name(info.dtype),
         (long long)info.shape[0], (long long)info.shape[1], (long long)info.shape[2]);
  printf("full tensor (%lld, %lld, %lld), grid (%lld, %lld, %lld), tile (%lld, %lld, %lld)\n",
         (long long)info.logical_shape[0], (long long)info.logical_shape[1], (long long)info.logical_shape[2],
         (long long)info.grid_shape[0], (long long)info.grid_shape[1], (long long)info.grid_shape[2],
         (long long)info.tile_shape[0], (long long)info.tile_shape[1], (long long)info.tile_shape[2]);

  /* 3. A TiledEvictable: an empty CPU primary, the file as the secondary. */
  sw_carrier_t* cpu = NULL;
  sw_carrier_t* tiled = NULL;
  CHECK(sw_carrier_create_cpu(rt, info.dtype, 0, &cpu));
  CHECK(sw_tiled_create(cpu, weights, info.grid_shape, info.tile_shape, info.rank, NULL, &tiled));
  sw_tensor_t* full = NULL; /* (I, O, E): for project, scatter and ops */
  CHECK(sw_tiled_full_tensor(tiled, &full));

  /* 4. Project two experts: the compact (I, O, 2), one block copy each. */
  const int64_t chosen[2] = {1, experts - 1};
  const int64_t zero = 0;
  const int64_t* axes[3] = {&zero, &zero, chosen};
  const size_t counts[3] = {1, 1, 2};
  sw_tile_selection_t* selection = NULL;
  CHECK(sw_tile_selection_create(axes, counts, 3, &selection));
  sw_await_t* await = NULL;
  CHECK(sw_tiled_project(tiled, full, selection, NULL, &await));
  CHECK(sw_await_wait(await, -1));
  sw_tensor_t* compact = NULL;
  CHECK(sw_await_result(await, &compact));
  /* Indexed as the checkpoint does: (2, O, I). */
  sw_tensor_t* experts_view = NULL;
  CHECK(sw_tensor_permute(compact, info.permutation, info.rank, &experts_view));

  /* 5. Check every value against the expert's own tensor, opened alone. */
  long long checked = 0, wrong = 0;
  for (int s = 0; s < 2; ++s) {
    sw_file_tensor_info_t one;
    sw_file_tensor_info_init(&one);
    sw_carrier_t* alone = NULL;
    CHECK(sw_carrier_open_safetensors(rt, file, name_ptrs[chosen[s]], NULL, &one, &alone));
    sw_carrier_t* cpu1 = NULL;
    sw_carrier_t* tiled1 = NULL;
    CHECK(sw_carrier_create_cpu(rt, one.dtype, 0, &cpu1));
    CHECK(sw_tiled_create(cpu1, alone, one.grid_shape, one.tile_shape, one.rank, NULL, &tiled1));
    sw_tensor_t* full1 = NULL;
    sw_tensor_t* view1 = NULL; /* (O, I) as the file indexes it */
    CHECK(sw_tiled_full_tensor(tiled1, &full1));
    CHECK(sw_file_tensor_view(full1, &one, &view1));
    for (int64_t o = 0; o < info.shape[1]; ++o)
      for (int64_t i = 0; i < info.shape[2]; ++i) {
        const int64_t c3[3] = {s, o, i}, c2[2] = {o, i};
        double got = 0, want = 0;
        CHECK(sw_tensor_get(experts_view, c3, 3, &got));
        CHECK(sw_tensor_get(view1, c2, 2, &want));
        if (file == path && want != synthetic(layer, (int)chosen[s], (int)o, (int)i) + (float)(matrix[1] - '1') * 0.25f)
          ++wrong;
        if (got != want) ++wrong;
        ++checked;
      }
    sw_tensor_release(view1);
    sw_tensor_release(full1);
    sw_carrier_release(tiled1);
    sw_carrier_release(cpu1);
    sw_carrier_release(alone);
  }
  printf("projected experts %lld and %lld: compact (%lld, %lld, 2), %lld values checked, %lld wrong\n",
         (long long)chosen[0], (long long)chosen[1], (long long)info.tile_shape[0], (long long)info.tile_shape[1],
         checked, wrong);

  sw_tensor_release(experts_view);
  sw_tensor_release(compact);
  sw_await_release(await);
  sw_tile_selection_release(selection);
  sw_tensor_release(full);
  sw_carrier_release(tiled);
  sw_carrier_release(cpu);
  sw_carrier_release(weights);
  CHECK(sw_runtime_shutdown(rt));
  sw_runtime_release(rt);
  if (file == path) {
    unlink(path);
    rmdir(dir);
  }
  return wrong ? 1 : 0;
}
