/*
 * bench_vulkan: op throughput and submit latency on the Vulkan device present
 * (Mesa lavapipe on CI machines), beside the CPU carrier, in one run.
 *
 *   add          sw_add of two 4 Mi f32 tensors, GB/s (two reads, one write)
 *   add_bcast    sw_add of (1024, 4096) and (4096,) (a bias): GB/s of the
 *                tensor read and written
 *   mul_scalar   sw_mul_scalar on 4 Mi f32, GB/s (one read, one write)
 *   relu         sw_relu on 4 Mi f32, GB/s
 *   relu_t       sw_relu of a transposed (2048, 2048) view (strided), GB/s
 *   reduce_sum   sw_reduce_sum of 4 Mi f32 to one value, GB/s read
 *   reduce_rows  sw_reduce_sum over axis 0 of (2048, 2048), GB/s read
 *   matmul       sw_matmul 256x256x256 and 512x512x512 f32, GFLOP/s
 *   matmul_t     a^T @ b at 512 (a transposed view: no copy), GFLOP/s
 *   matmul_bf16  bf16 operands at 512 (bf16 result, rounded once from f32 sums), GFLOP/s
 *   project      a TiledEvictable projection of 8 resident experts of
 *                (1024, 1024) f32 out of 16, one expert per tile, from a
 *                primary tier of this carrier kind; GB/s of tile values read
 *                and compact values written (the experts interleave, expert
 *                mode fastest, as in the MoE demo)
 *   promote      promotion of those 8 experts from a host secondary tier
 *                into the primary tier (an upload on Vulkan), GB/s
 *   backward     sum(relu(a @ w + a)) backward at 256, ms per step
 *   submit       one 1-element op and a 1-element read: a submit and a fence
 *                wait on Vulkan, us
 *   roundtrip    a 1-element write then read, us
 *   batched      16 dependent 1-element ops and one read, us per op
 *   bare_submit  the peer of `submit`: a bare vkQueueSubmit of one recorded
 *                4-byte vkCmdFillBuffer, a fence wait and a read of the
 *                mapped result, on the first physical device (the one the
 *                runtime picks by default), through the Vulkan API alone
 *
 * Usage: build/tools/bench/bench_vulkan [--reps R]
 * Every figure is the best of R repetitions (robust when other processes
 * share the cores; the median is printed beside it); an op the carrier
 * refuses prints 0. Results are read back,
 * so the batched Vulkan work is included. Operands are made and written once,
 * outside the timing. The last line is "BENCH_JSON {...}".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#ifdef SW_BENCH_VULKAN_PEER
#include <vulkan/vulkan.h>
#endif

#define BENCH_NAME "bench_vulkan"
#include "bench_util.h"

static int reps = 9;

typedef struct {
  double best, median;
} timing_t;

static timing_t summarise(const double* v, int n) {
  timing_t t = {fastest(v, n), median(v, n)};
  return t;
}

static sw_tensor_t* make(sw_runtime_t* rt, sw_device_t* dev, sw_dtype_t dtype, const int64_t* shape, size_t rank) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  sw_carrier_t* c;
  if (dev)
    check(sw_carrier_create_vulkan(rt, dev, dtype, n, &c), "carrier");
  else
    check(sw_carrier_create_cpu(rt, dtype, n, &c), "carrier");
  size_t es = sw_dtype_size(dtype);
  unsigned char* x = malloc(n * es);
  for (size_t i = 0; i < n; ++i) {
    float v = (float)(i % 17) * 0.25f - 2.0f;
    if (dtype == SW_DTYPE_F32) {
      memcpy(x + i * 4, &v, 4);
    } else { /* bf16: the top half of the f32 bits */
      unsigned int bits;
      memcpy(&bits, &v, 4);
      unsigned short h = (unsigned short)(bits >> 16);
      memcpy(x + i * 2, &h, 2);
    }
  }
  check(sw_carrier_write(c, 0, n, x), "write");
  free(x);
  sw_layout_t* l;
  check(sw_layout_dense(shape, rank, &l), "layout");
  sw_tensor_t* t;
  check(sw_tensor_create(c, 0, l, &t), "tensor");
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

static void read_one(sw_tensor_t* t) {
  sw_carrier_t* c;
  float one[2];
  check(sw_tensor_carrier(t, &c), "carrier");
  check(sw_carrier_read(c, 0, 1, one), "read");
  sw_carrier_release(c);
}

typedef enum { ADD, MUL_SCALAR, RELU, REDUCE_ALL, REDUCE_AXIS0, MATMUL } op_t;

/* Times `op` on (a, b), result read back; seconds. An op the carrier
 * refuses (an older build without a dtype, say) times as -1. */
static timing_t time_op(op_t op, sw_tensor_t* a, sw_tensor_t* b) {
  double t[64];
  for (int r = 0; r < reps; ++r) {
    double t0 = now_seconds();
    sw_tensor_t* s = NULL;
    int64_t axis = 0;
    sw_error_t* e = NULL;
    switch (op) {
      case ADD: e = sw_add(a, b, &s); break;
      case MUL_SCALAR: e = sw_mul_scalar(a, 1.5, &s); break;
      case RELU: e = sw_relu(a, &s); break;
      case REDUCE_ALL: e = sw_reduce_sum(a, NULL, 0, false, &s); break;
      case REDUCE_AXIS0: e = sw_reduce_sum(a, &axis, 1, false, &s); break;
      case MATMUL: e = sw_matmul(a, b, &s); break;
    }
    if (e) {
      fprintf(stderr, "bench_vulkan: op %d: %s: %s\n", (int)op, sw_error_code_name(sw_error_code(e)),
              sw_error_message(e));
      sw_error_free(e);
      timing_t none = {-1, -1};
      return none;
    }
    read_one(s);
    t[r] = now_seconds() - t0;
    sw_tensor_release(s);
  }
  return summarise(t, reps);
}

static sw_tensor_t* transposed(sw_tensor_t* t) {
  sw_tensor_t* v;
  check(sw_tensor_transpose(t, 0, 1, &v), "transpose");
  return v;
}

typedef struct {
  timing_t add, add_bcast, mul_scalar, relu, relu_t, reduce_sum, reduce_rows, matmul256, matmul512, matmul_t,
      matmul_bf16, project, promote, backward, submit, roundtrip, batched;
} figures_t;

#define EXPERTS 16
#define PICKED 8
#define EXPERT_DIM 1024

static sw_tile_set_t* picked_set(void) {
  int64_t c[PICKED * 3] = {0};
  for (int k = 0; k < PICKED; ++k) c[3 * k] = (k * 5 + 3) % EXPERTS;
  sw_tile_set_t* set;
  check(sw_tile_set_create(c, PICKED, 3, &set), "tile set");
  return set;
}

/* Projection and promotion of PICKED experts out of EXPERTS on a primary tier
 * of `dev`'s kind (CPU when NULL) over a host secondary tier. */
static void time_tiled(sw_runtime_t* rt, sw_device_t* dev, timing_t* project, timing_t* promote) {
  const int64_t grid[3] = {EXPERTS, 1, 1}, tile[3] = {1, EXPERT_DIM, EXPERT_DIM};
  const int64_t n = (int64_t)EXPERTS * EXPERT_DIM * EXPERT_DIM;
  sw_tensor_t* seed = make(rt, NULL, SW_DTYPE_F32, &n, 1);
  sw_carrier_t *secondary, *primary, *te;
  check(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &secondary), "host carrier");
  sw_await_t* moved;
  check(sw_move_async(seed, secondary, &moved), "move");
  check(sw_await_wait(moved, -1), "move");
  sw_await_release(moved);
  sw_tensor_release(seed);
  if (dev)
    check(sw_carrier_create_vulkan(rt, dev, SW_DTYPE_F32, 0, &primary), "carrier");
  else
    check(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &primary), "carrier");
  check(sw_tiled_create(primary, secondary, grid, tile, 3, NULL, &te), "tiled");
  sw_tensor_t* full;
  check(sw_tiled_full_tensor(te, &full), "full tensor");
  sw_tile_set_t* set = picked_set();
  int64_t picks[PICKED];
  for (int k = 0; k < PICKED; ++k) picks[k] = (k * 5 + 3) % EXPERTS;
  const int64_t zero = 0;
  const int64_t* axes[3] = {picks, &zero, &zero};
  const size_t counts[3] = {PICKED, 1, 1};
  sw_tile_selection_t* sel;
  check(sw_tile_selection_create(axes, counts, 3, &sel), "selection");
  double t[64];
  for (int r = 0; r < reps; ++r) {
    double t0 = now_seconds();
    check(sw_tiled_promote(te, set), "promote");
    t[r] = now_seconds() - t0;
    if (r + 1 < reps) check(sw_tiled_evict(te, set), "evict");
  }
  *promote = summarise(t, reps);
  for (int r = 0; r < reps; ++r) {
    double t0 = now_seconds();
    sw_await_t* a;
    sw_tensor_t* c;
    check(sw_tiled_project(te, full, sel, NULL, &a), "project");
    check(sw_await_wait(a, -1), "wait");
    check(sw_await_result(a, &c), "result");
    read_one(c);
    t[r] = now_seconds() - t0;
    sw_tensor_release(c);
    sw_await_release(a);
  }
  *project = summarise(t, reps);
  sw_tile_selection_release(sel);
  sw_tile_set_release(set);
  sw_tensor_release(full);
  check(sw_carrier_dispose(te), "dispose");
  sw_carrier_release(te);
  sw_carrier_release(primary);
  sw_carrier_release(secondary);
}

static timing_t time_backward(sw_runtime_t* rt, sw_device_t* dev) {
  int64_t s[2] = {256, 256};
  sw_tensor_t* a = make(rt, dev, SW_DTYPE_F32, s, 2);
  sw_tensor_t* w = make(rt, dev, SW_DTYPE_F32, s, 2);
  check(sw_tensor_set_requires_grad(w, true), "requires_grad");
  double t[64];
  for (int r = 0; r < reps; ++r) {
    double t0 = now_seconds();
    sw_tensor_t *p, *q, *y, *z, *g;
    check(sw_matmul(a, w, &p), "matmul");
    check(sw_add(p, a, &q), "add");
    check(sw_relu(q, &y), "relu");
    check(sw_reduce_sum(y, NULL, 0, false, &z), "reduce_sum");
    check(sw_backward(z, NULL, false), "backward");
    check(sw_tensor_grad(w, &g), "grad");
    read_one(g);
    t[r] = now_seconds() - t0;
    check(sw_tensor_clear_grad(w), "clear_grad");
    sw_tensor_t* all[] = {p, q, y, z, g};
    for (int i = 0; i < 5; ++i) sw_tensor_release(all[i]);
  }
  sw_tensor_release(a);
  sw_tensor_release(w);
  return summarise(t, reps);
}

static figures_t run(sw_runtime_t* rt, sw_device_t* dev) {
  figures_t f;
  const int64_t n = 4 << 20;
  int64_t sq[2] = {2048, 2048}, rows[2] = {1024, 4096}, bias[1] = {4096};
  int64_t m256[2] = {256, 256}, m512[2] = {512, 512}, one[1] = {1};
  sw_tensor_t* a = make(rt, dev, SW_DTYPE_F32, &n, 1);
  sw_tensor_t* b = make(rt, dev, SW_DTYPE_F32, &n, 1);
  sw_tensor_t* r = make(rt, dev, SW_DTYPE_F32, rows, 2);
  sw_tensor_t* v = make(rt, dev, SW_DTYPE_F32, bias, 1);
  sw_tensor_t* q = make(rt, dev, SW_DTYPE_F32, sq, 2);
  sw_tensor_t* qt = transposed(q);
  sw_tensor_t* p = make(rt, dev, SW_DTYPE_F32, m256, 2);
  sw_tensor_t* p5 = make(rt, dev, SW_DTYPE_F32, m512, 2);
  sw_tensor_t* p5t = transposed(p5);
  sw_tensor_t* h5 = make(rt, dev, SW_DTYPE_BF16, m512, 2);
  sw_tensor_t* e = make(rt, dev, SW_DTYPE_F32, one, 1);
  f.add = time_op(ADD, a, b);
  f.add_bcast = time_op(ADD, r, v);
  f.mul_scalar = time_op(MUL_SCALAR, a, NULL);
  f.relu = time_op(RELU, a, NULL);
  f.relu_t = time_op(RELU, qt, NULL);
  f.reduce_sum = time_op(REDUCE_ALL, a, NULL);
  f.reduce_rows = time_op(REDUCE_AXIS0, q, NULL);
  f.matmul256 = time_op(MATMUL, p, p);
  f.matmul512 = time_op(MATMUL, p5, p5);
  f.matmul_t = time_op(MATMUL, p5t, p5);
  f.matmul_bf16 = time_op(MATMUL, h5, h5);
  time_tiled(rt, dev, &f.project, &f.promote);
  f.backward = time_backward(rt, dev);
  f.submit = time_op(MUL_SCALAR, e, NULL);
  double t[64];
  sw_carrier_t* c;
  check(sw_tensor_carrier(e, &c), "carrier");
  float x = 1.0f;
  for (int k = 0; k < reps; ++k) {
    double t0 = now_seconds();
    check(sw_carrier_write(c, 0, 1, &x), "write");
    check(sw_carrier_read(c, 0, 1, &x), "read");
    t[k] = now_seconds() - t0;
  }
  f.roundtrip = summarise(t, reps);
  sw_carrier_release(c);
  for (int k = 0; k < reps; ++k) {
    double t0 = now_seconds();
    sw_tensor_t* s = e;
    sw_tensor_retain(s);
    for (int i = 0; i < 16; ++i) {
      sw_tensor_t* next;
      check(sw_mul_scalar(s, 1.0, &next), "mul_scalar");
      sw_tensor_release(s);
      s = next;
    }
    read_one(s);
    sw_tensor_release(s);
    t[k] = (now_seconds() - t0) / 16;
  }
  f.batched = summarise(t, reps);
  sw_tensor_t* all[] = {a, b, r, v, q, qt, p, p5, p5t, h5, e};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) sw_tensor_release(all[i]);
  return f;
}

#ifdef SW_BENCH_VULKAN_PEER
static void fail(const char* what) {
  fprintf(stderr, "%s\n", what);
  exit(1);
}

static void check_vk(VkResult r, const char* what) {
  if (r != VK_SUCCESS) {
    fprintf(stderr, "bench_vulkan: bare peer: %s returned %d\n", what, (int)r);
    exit(1);
  }
}

/* The bare peer of `submit`: what any Vulkan program pays for one tiny
 * command buffer's submit, fence wait and host read, with nothing of this
 * runtime in the way. Returns {-1, -1} when Vulkan cannot be set up. */
static timing_t time_bare_submit(void) {
  timing_t none = {-1, -1};
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  VkInstance inst;
  if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS) return none;
  uint32_t ndev = 1;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkResult pr = vkEnumeratePhysicalDevices(inst, &ndev, &phys);
  if ((pr != VK_SUCCESS && pr != VK_INCOMPLETE) || ndev == 0) {
    vkDestroyInstance(inst, NULL);
    return none;
  }
  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, NULL);
  VkQueueFamilyProperties fams[16];
  if (nfam > 16) nfam = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, fams);
  uint32_t family = UINT32_MAX;
  for (uint32_t i = 0; i < nfam && family == UINT32_MAX; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
  if (family == UINT32_MAX) {
    vkDestroyInstance(inst, NULL);
    return none;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  VkDevice dev;
  if (vkCreateDevice(phys, &dci, NULL, &dev) != VK_SUCCESS) {
    vkDestroyInstance(inst, NULL);
    return none;
  }
  VkQueue queue;
  vkGetDeviceQueue(dev, family, 0, &queue);
  VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 256,
                            .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer buf;
  check_vk(vkCreateBuffer(dev, &bci, NULL, &buf), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buf, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) type = i;
  if (type == UINT32_MAX) fail("bench_vulkan: bare peer: no host-visible coherent memory type");
  VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                              .memoryTypeIndex = type};
  VkDeviceMemory mem;
  check_vk(vkAllocateMemory(dev, &mai, NULL, &mem), "vkAllocateMemory");
  check_vk(vkBindBufferMemory(dev, buf, mem, 0), "vkBindBufferMemory");
  void* mapped;
  check_vk(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = family};
  VkCommandPool pool;
  check_vk(vkCreateCommandPool(dev, &pci, NULL, &pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkCommandBuffer cb;
  check_vk(vkAllocateCommandBuffers(dev, &cai, &cb), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check_vk(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
  float value = 1.5f;
  uint32_t bits;
  memcpy(&bits, &value, 4);
  vkCmdFillBuffer(cb, buf, 0, 4, bits);
  VkMemoryBarrier to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0,
                       NULL);
  check_vk(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  check_vk(vkCreateFence(dev, &fci, NULL, &fence), "vkCreateFence");
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  double t[64];
  /* A warm-up round, as `submit`'s op has run before it is timed. */
  for (int round = 0; round < 2; ++round)
    for (int r = 0; r < reps; ++r) {
      double t0 = now_seconds();
      check_vk(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
      check_vk(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
      float got;
      memcpy(&got, mapped, 4);
      t[r] = now_seconds() - t0;
      if (got != value) fail("bench_vulkan: bare peer read a wrong value");
      check_vk(vkResetFences(dev, 1, &fence), "vkResetFences");
    }
  vkDestroyFence(dev, fence, NULL);
  vkDestroyCommandPool(dev, pool, NULL);
  vkUnmapMemory(dev, mem);
  vkDestroyBuffer(dev, buf, NULL);
  vkFreeMemory(dev, mem, NULL);
  vkDestroyDevice(dev, NULL);
  vkDestroyInstance(inst, NULL);
  return summarise(t, reps);
}
#endif

/* Rates; 0 for an op that did not run. */
static double gbs(double bytes, timing_t t) { return t.best > 0 ? bytes / t.best / 1e9 : 0; }
static double gbs_med(double bytes, timing_t t) { return t.median > 0 ? bytes / t.median / 1e9 : 0; }

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "--reps")) reps = atoi(argv[2]);
  if (reps < 1 || reps > 64) reps = 9;
  sw_runtime_t* rt;
  check(sw_runtime_create(NULL, &rt), "runtime");
  sw_device_t* dev = NULL;
  sw_error_t* e = sw_device_create_vulkan(rt, NULL, &dev);
  if (e) {
    fprintf(stderr, "bench_vulkan: no Vulkan device: %s\n", sw_error_message(e));
    sw_error_free(e);
    sw_runtime_release(rt);
    return 0;
  }
  figures_t cpu = run(rt, NULL), vk = run(rt, dev);
#ifdef SW_BENCH_VULKAN_PEER
  timing_t bare = time_bare_submit();
#else
  timing_t bare = {-1, -1};
#endif
  const double n4 = 4.0 * (4 << 20), sq4 = 4.0 * 2048 * 2048, tiles4 = 4.0 * PICKED * EXPERT_DIM * EXPERT_DIM;
  struct {
    const char* name;
    const char* unit;
    double bytes_or_flops;
    timing_t cpu, vk;
  } rows[] = {
      {"add", "GB/s", 3 * n4, cpu.add, vk.add},
      {"add_bcast", "GB/s", 2 * 4.0 * 1024 * 4096, cpu.add_bcast, vk.add_bcast},
      {"mul_scalar", "GB/s", 2 * n4, cpu.mul_scalar, vk.mul_scalar},
      {"relu", "GB/s", 2 * n4, cpu.relu, vk.relu},
      {"relu_t", "GB/s", 2 * sq4, cpu.relu_t, vk.relu_t},
      {"reduce_sum", "GB/s", n4, cpu.reduce_sum, vk.reduce_sum},
      {"reduce_rows", "GB/s", sq4, cpu.reduce_rows, vk.reduce_rows},
      {"matmul256", "GFLOP/s", 2.0 * 256 * 256 * 256, cpu.matmul256, vk.matmul256},
      {"matmul512", "GFLOP/s", 2.0 * 512 * 512 * 512, cpu.matmul512, vk.matmul512},
      {"matmul_t", "GFLOP/s", 2.0 * 512 * 512 * 512, cpu.matmul_t, vk.matmul_t},
      {"matmul_bf16", "GFLOP/s", 2.0 * 512 * 512 * 512, cpu.matmul_bf16, vk.matmul_bf16},
      {"project", "GB/s", 2 * tiles4, cpu.project, vk.project},
      {"promote", "GB/s", tiles4, cpu.promote, vk.promote},
  };
  const size_t nrows = sizeof rows / sizeof *rows;
  printf("%-12s %8s %18s %18s   (best; median)\n", "op", "unit", "cpu", "vulkan");
  for (size_t i = 0; i < nrows; ++i)
    printf("%-12s %8s %8.2f (%7.2f) %8.2f (%7.2f)\n", rows[i].name, rows[i].unit, gbs(rows[i].bytes_or_flops, rows[i].cpu),
           gbs_med(rows[i].bytes_or_flops, rows[i].cpu), gbs(rows[i].bytes_or_flops, rows[i].vk),
           gbs_med(rows[i].bytes_or_flops, rows[i].vk));
  struct {
    const char* name;
    const char* unit;
    double scale;
    timing_t cpu, vk;
  } lat[] = {
      {"backward", "ms", 1e3, cpu.backward, vk.backward},
      {"submit", "us", 1e6, cpu.submit, vk.submit},
      {"roundtrip", "us", 1e6, cpu.roundtrip, vk.roundtrip},
      {"batched", "us/op", 1e6, cpu.batched, vk.batched},
  };
  const size_t nlat = sizeof lat / sizeof *lat;
  for (size_t i = 0; i < nlat; ++i)
    printf("%-12s %8s %8.2f (%7.2f) %8.2f (%7.2f)\n", lat[i].name, lat[i].unit, lat[i].cpu.best * lat[i].scale,
           lat[i].cpu.median * lat[i].scale, lat[i].vk.best * lat[i].scale, lat[i].vk.median * lat[i].scale);
  if (bare.best > 0)
    printf("%-12s %8s %19s %8.2f (%7.2f)   submit / bare = %.2f\n", "bare_submit", "us", "", bare.best * 1e6,
           bare.median * 1e6, vk.submit.best / bare.best);
  else
    printf("bare_submit: not measured (this build has no Vulkan headers, or Vulkan could not be set up)\n");
  printf("BENCH_JSON {\"bench\":\"vulkan\",\"reps\":%d,\"statistic\":\"best\"", reps);
  for (int side = 0; side < 2; ++side) {
    printf(",\"%s\":{", side ? "vulkan" : "cpu");
    for (size_t i = 0; i < nrows; ++i)
      printf("%s\"%s_%s\":%.3f", i ? "," : "", rows[i].name, strcmp(rows[i].unit, "GB/s") ? "gflops" : "gbs",
             gbs(rows[i].bytes_or_flops, side ? rows[i].vk : rows[i].cpu));
    for (size_t i = 0; i < nlat; ++i)
      printf(",\"%s_%s\":%.2f", lat[i].name, lat[i].scale == 1e3 ? "ms" : "us",
             (side ? lat[i].vk.best : lat[i].cpu.best) * lat[i].scale);
    if (side && bare.best > 0) printf(",\"bare_submit_us\":%.2f", bare.best * 1e6);
    printf("}");
  }
  printf("}\n");
  sw_device_release(dev);
  sw_runtime_release(rt);
  return 0;
}
