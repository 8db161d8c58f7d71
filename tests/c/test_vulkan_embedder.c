/* An embedder's own Vulkan objects: the test creates the VkInstance, picks a
 * VkPhysicalDevice, creates the VkDevice (through counting allocation
 * callbacks) and takes its queue, hands them in through
 * sw_vulkan_device_desc_t, runs ops, copies and moves, releases the runtime,
 * then checks that every object the library made on the device is gone, that
 * the embedder's objects still work, and destroys them itself. f64 kernels
 * need the feature declared in enabled_features. Skips, saying why, without
 * an ICD. */
#include "sw_vulkan_test.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <time.h>
#include <vulkan/vulkan.h>

/* Allocation callbacks that count live allocations. Each block starts with a
 * header holding the raw pointer and size, so realloc can copy. */
typedef struct {
  _Atomic long live;  /* lavapipe frees some objects on its queue thread */
  _Atomic long total;
} alloc_count_t;

typedef struct {
  void* raw;
  size_t size;
} block_t;

static void* VKAPI_PTR count_alloc(void* user, size_t size, size_t alignment, VkSystemAllocationScope scope) {
  (void)scope;
  if (alignment < alignof(block_t)) alignment = alignof(block_t);
  unsigned char* raw = malloc(size + alignment + sizeof(block_t));
  if (!raw) return NULL;
  uintptr_t p = ((uintptr_t)raw + sizeof(block_t) + alignment - 1) & ~(uintptr_t)(alignment - 1);
  block_t* b = (block_t*)p - 1;
  b->raw = raw;
  b->size = size;
  alloc_count_t* c = user;
  atomic_fetch_add(&c->live, 1);
  atomic_fetch_add(&c->total, 1);
  return (void*)p;
}

static void VKAPI_PTR count_free(void* user, void* memory) {
  if (!memory) return;
  block_t* b = (block_t*)memory - 1;
  free(b->raw);
  atomic_fetch_sub(&((alloc_count_t*)user)->live, 1);
}

static void* VKAPI_PTR count_realloc(void* user, void* original, size_t size, size_t alignment,
                                     VkSystemAllocationScope scope) {
  if (!original) return count_alloc(user, size, alignment, scope);
  if (!size) {
    count_free(user, original);
    return NULL;
  }
  void* p = count_alloc(user, size, alignment, scope);
  if (!p) return NULL;
  size_t old = ((block_t*)original - 1)->size;
  memcpy(p, original, old < size ? old : size);
  count_free(user, original);
  return p;
}

typedef struct {
  VkInstance instance;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  alloc_count_t count;
  VkAllocationCallbacks callbacks;
} embedder_t;

/* The embedder's objects; false (and a message) when there is no ICD. */
static bool embedder_create(embedder_t* e, bool float64) {
  memset(e, 0, sizeof *e);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "test_vulkan_embedder";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  if (vkCreateInstance(&ici, NULL, &e->instance) != VK_SUCCESS) {
    fprintf(stderr, "no Vulkan ICD present (vkCreateInstance failed)\n");
    return false;
  }
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(e->instance, &n, NULL);
  VkPhysicalDevice devices[8];
  if (n > 8) n = 8;
  vkEnumeratePhysicalDevices(e->instance, &n, devices);
  for (uint32_t d = 0; d < n && !e->physical; ++d) {
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(devices[d], &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(devices[d], &nq, qf);
    for (uint32_t q = 0; q < nq; ++q)
      if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        e->physical = devices[d];
        e->family = q;
        break;
      }
  }
  if (!e->physical) {
    fprintf(stderr, "no Vulkan physical device with a compute queue\n");
    vkDestroyInstance(e->instance, NULL);
    return false;
  }
  VkPhysicalDeviceFeatures supported, enable;
  memset(&enable, 0, sizeof enable);
  vkGetPhysicalDeviceFeatures(e->physical, &supported);
  if (float64 && !supported.shaderFloat64) {
    fprintf(stderr, "the device has no shaderFloat64\n");
    vkDestroyInstance(e->instance, NULL);
    return false;
  }
  enable.shaderFloat64 = float64 ? VK_TRUE : VK_FALSE;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = e->family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.pEnabledFeatures = &enable;
  e->callbacks.pUserData = &e->count;
  e->callbacks.pfnAllocation = count_alloc;
  e->callbacks.pfnReallocation = count_realloc;
  e->callbacks.pfnFree = count_free;
  assert_int_equal(vkCreateDevice(e->physical, &dci, &e->callbacks, &e->device), VK_SUCCESS);
  vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
  return true;
}

static sw_vulkan_device_desc_t embedder_desc(const embedder_t* e, uint32_t features) {
  sw_vulkan_device_desc_t d;
  sw_vulkan_device_desc_init(&d);
  d.instance = e->instance;
  d.physical_device = e->physical;
  d.device = e->device;
  d.queue = e->queue;
  d.queue_family_index = e->family;
  d.enabled_features = features;
  return d;
}

/* The embedder's device and queue still work: a buffer, its memory, and a
 * fenced (empty) submission. */
static void embedder_still_works(embedder_t* e) {
  VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 256;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer b;
  assert_int_equal(vkCreateBuffer(e->device, &bci, NULL, &b), VK_SUCCESS);
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  assert_int_equal(vkCreateFence(e->device, &fci, NULL, &fence), VK_SUCCESS);
  assert_int_equal(vkQueueSubmit(e->queue, 0, NULL, fence), VK_SUCCESS);
  assert_int_equal(vkWaitForFences(e->device, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
  vkDestroyFence(e->device, fence, NULL);
  vkDestroyBuffer(e->device, b, NULL);
  assert_int_equal(vkDeviceWaitIdle(e->device), VK_SUCCESS);
}

/* Live allocations once the device's queue has settled: lavapipe frees
 * destroyed pipelines on its queue thread at the next submission. Polls
 * until the count is `expect` (or, with expect < 0, stops changing). */
static long settled_live(embedder_t* e, long expect) {
  long live = atomic_load(&e->count.live), last = -1;
  for (int i = 0; i < 200 && (expect < 0 ? live != last : live != expect); ++i) {
    last = live;
    embedder_still_works(e);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    live = atomic_load(&e->count.live);
  }
  return live;
}

static void embedder_destroy(embedder_t* e) {
  vkDestroyDevice(e->device, &e->callbacks);
  vkDestroyInstance(e->instance, NULL);
}

/* Ops, moves and bridge copies on a handed-in device. */
static void exercise(sw_runtime_t* rt, sw_device_t* dev) {
  int64_t sa[2] = {70, 33}, sb[2] = {33, 45};
  float xa[70 * 33], xb[33 * 45], r_cpu[70 * 45], r_vk[70 * 45];
  vk_fill_ints(xa, 70 * 33, 1);
  vk_fill_ints(xb, 33 * 45, 2);
  vk_fixture_t f = {rt, dev};
  vk_pair_t a = vk_pair(&f, SW_DTYPE_F32, sa, 2, xa), b = vk_pair(&f, SW_DTYPE_F32, sb, 2, xb);
  SW_OK_(sw_tensor_set_requires_grad(a.vk, true));
  sw_tensor_t *mc, *mv, *rc, *rv, *s;
  SW_OK_(sw_matmul(a.cpu, b.cpu, &mc));
  SW_OK_(sw_matmul(a.vk, b.vk, &mv));
  SW_OK_(sw_relu(mc, &rc));
  SW_OK_(sw_relu(mv, &rv));
  SW_OK_(sw_tensor_read(rc, r_cpu, sizeof r_cpu));
  SW_OK_(sw_tensor_read(rv, r_vk, sizeof r_vk));
  assert_memory_equal(r_cpu, r_vk, sizeof r_cpu);
  SW_OK_(sw_reduce_sum(rv, NULL, 0, false, &s));
  SW_OK_(sw_backward(s, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(a.vk, &g));
  assert_non_null(g);
  /* A move back to a CPU carrier. */
  sw_carrier_t* cc = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &cc));
  sw_await_t* aw = NULL;
  SW_OK_(sw_move_async(rv, cc, &aw));
  SW_OK_(sw_await_wait(aw, -1));
  sw_tensor_t* back = NULL;
  SW_OK_(sw_await_result(aw, &back));
  SW_OK_(sw_tensor_read(back, r_vk, sizeof r_vk));
  assert_memory_equal(r_cpu, r_vk, sizeof r_cpu);
  /* Bridge copies, synchronous and asynchronous. */
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.dtype = SW_DTYPE_U8;
  spec.rank = 1;
  spec.shape[0] = 512;
  sw_device_allocation_t* al = NULL;
  SW_OK_(sw_device_alloc(dev, &spec, 512, &al));
  uint8_t in[100], out[100];
  for (int i = 0; i < 100; ++i) in[i] = (uint8_t)(i * 3 + 1);
  SW_OK_(sw_device_host_to_device(al, 17, in, 100, false, NULL));
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_device_to_host(al, 17, out, 100, true, &ev));
  SW_OK_(sw_device_event_wait(dev, &ev, -1));
  assert_memory_equal(in, out, 100);
  SW_OK_(sw_device_free(al));
  sw_device_allocation_release(al);
  sw_tensor_t* all[] = {mc, mv, rc, rv, s, g, back};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) sw_tensor_release(all[i]);
  sw_await_release(aw);
  sw_carrier_release(cc);
  vk_pair_release(a);
  vk_pair_release(b);
}

static void f64_relu(sw_runtime_t* rt, sw_device_t* dev, sw_error_code_t expect) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_vulkan(rt, dev, SW_DTYPE_F64, 4, &c));
  int64_t n = 4;
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&n, 1, &l));
  sw_tensor_t *t = NULL, *r = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  if (expect == SW_OK) {
    double x[4] = {-1.5, 2.25, 0, 3}, y[4];
    SW_OK_(sw_tensor_write(t, x, sizeof x));
    SW_OK_(sw_relu(t, &r));
    SW_OK_(sw_tensor_read(r, y, sizeof y));
    assert_true(y[0] == 0 && y[1] == 2.25 && y[2] == 0 && y[3] == 3);
    sw_tensor_release(r);
  } else {
    SW_FAILS(sw_relu(t, &r), expect, "shaderFloat64");
  }
  sw_tensor_release(t);
  sw_layout_release(l);
  sw_carrier_release(c);
}

static void test_handed_in_device(void** state) {
  (void)state;
  embedder_t e;
  if (!embedder_create(&e, false)) SW_SKIP("no Vulkan device to hand in");
  embedder_still_works(&e);
  const long before = settled_live(&e, -1);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  sw_vulkan_device_desc_t desc = embedder_desc(&e, 0);
  sw_device_t* dev = NULL;
  SW_OK_(sw_device_create_vulkan(rt, &desc, &dev));
  exercise(rt, dev);
  f64_relu(rt, dev, SW_ERROR_UNSUPPORTED); /* the device was made without shaderFloat64 */
  sw_device_release(dev);
  sw_runtime_release(rt);
  /* The embedder's objects still work; and every pipeline, layout, pool,
   * fence and buffer the library made through the device's allocator is
   * freed (lavapipe frees destroyed pipelines at the queue's next submission,
   * which embedder_still_works makes). */
  assert_true(atomic_load(&e.count.total) > before);
  embedder_still_works(&e);
  const long after = settled_live(&e, before);
  if (after != before) fail_msg("%ld objects the library made on the device are still live", after - before);
  embedder_destroy(&e);
}

static void test_handed_in_features(void** state) {
  (void)state;
  embedder_t e;
  if (!embedder_create(&e, true)) SW_SKIP("no Vulkan device with shaderFloat64 to hand in");
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  sw_vulkan_device_desc_t desc = embedder_desc(&e, SW_VULKAN_FEATURE_SHADER_FLOAT64);
  sw_device_t* dev = NULL;
  SW_OK_(sw_device_create_vulkan(rt, &desc, &dev));
  f64_relu(rt, dev, SW_OK);
  sw_device_release(dev);
  sw_runtime_release(rt);
  embedder_still_works(&e);
  embedder_destroy(&e);
}

static void test_handed_in_device_needs_its_queue(void** state) {
  (void)state;
  embedder_t e;
  if (!embedder_create(&e, false)) SW_SKIP("no Vulkan device to hand in");
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  sw_vulkan_device_desc_t desc = embedder_desc(&e, 0);
  desc.queue = NULL;
  sw_device_t* dev = NULL;
  SW_FAILS(sw_device_create_vulkan(rt, &desc, &dev), SW_ERROR_VALUE, "queue");
  desc = embedder_desc(&e, 0);
  desc.struct_size = 3;
  SW_FAILS(sw_device_create_vulkan(rt, &desc, &dev), SW_ERROR_VALUE, "struct_size");
  sw_runtime_release(rt);
  embedder_still_works(&e);
  embedder_destroy(&e);
}

int main(void) {
  sw_vulkan_test_keep_driver();
  if (!sw_vulkan_test_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handed_in_device),
      cmocka_unit_test(test_handed_in_features),
      cmocka_unit_test(test_handed_in_device_needs_its_queue),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
