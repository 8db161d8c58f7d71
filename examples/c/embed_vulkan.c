/*
 * Embedding StrideWeave in an application that already has a Vulkan device.
 *
 * The application creates its VkInstance, picks a VkPhysicalDevice, creates a
 * VkDevice with a compute queue family, and hands the four objects to
 * sw_device_create_vulkan. StrideWeave then allocates its buffers on that
 * device and submits its compute work to the queue it was given; it never
 * destroys the handed-in objects. Here the device gets two queues when the
 * family has them, one for the application and one for StrideWeave, because a
 * VkQueue must not be used by two threads at once and StrideWeave submits
 * from threads of its own.
 *
 * It computes relu(x @ w) on the Vulkan carrier, reads the result back, moves
 * it to a CPU carrier, and checks both against values computed by hand. Exits
 * 77 (a skipped test) when no Vulkan driver is present. docs/embedding-vulkan.md
 * walks through it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <vulkan/vulkan.h>

#include "strideweave/strideweave.h"

#define CHECK(expr)                                                                                  \
  do {                                                                                               \
    sw_error_t* e_ = (expr);                                                                         \
    if (e_) {                                                                                        \
      fprintf(stderr, "embed_vulkan: %s failed: %s: %s\n", #expr, sw_error_code_name(sw_error_code(e_)), \
              sw_error_message(e_));                                                                 \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

/* The application's Vulkan objects. */
typedef struct app_vulkan {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  uint32_t family;
  VkQueue app_queue;         /* the application's own submissions */
  VkQueue strideweave_queue; /* handed to StrideWeave (app_queue if the family has one queue) */
} app_vulkan;

/* Returns 0, or 77 when there is no Vulkan driver or compute-capable device. */
static int app_vulkan_create(app_vulkan* v) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "embed_vulkan";
  app.apiVersion = VK_API_VERSION_1_1; /* StrideWeave's shaders target Vulkan 1.1 */
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  if (vkCreateInstance(&ici, NULL, &v->instance) != VK_SUCCESS) return 77;
  uint32_t count = 1;
  VkResult r = vkEnumeratePhysicalDevices(v->instance, &count, &v->physical_device);
  if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
    vkDestroyInstance(v->instance, NULL);
    return 77;
  }
  VkQueueFamilyProperties families[16];
  uint32_t nf = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(v->physical_device, &nf, families);
  v->family = UINT32_MAX;
  for (uint32_t i = 0; i < nf && v->family == UINT32_MAX; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) v->family = i;
  if (v->family == UINT32_MAX) {
    vkDestroyInstance(v->instance, NULL);
    return 77;
  }
  const uint32_t queues = families[v->family].queueCount >= 2 ? 2 : 1;
  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = v->family;
  qci.queueCount = queues;
  qci.pQueuePriorities = priorities;
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  if (vkCreateDevice(v->physical_device, &dci, NULL, &v->device) != VK_SUCCESS) {
    vkDestroyInstance(v->instance, NULL);
    return 77;
  }
  vkGetDeviceQueue(v->device, v->family, 0, &v->app_queue);
  vkGetDeviceQueue(v->device, v->family, queues - 1, &v->strideweave_queue);
  return 0;
}

static void app_vulkan_destroy(app_vulkan* v) {
  vkDestroyDevice(v->device, NULL);
  vkDestroyInstance(v->instance, NULL);
}

/* A dense f32 tensor of `shape` on a new Vulkan carrier, holding `values`. */
static sw_tensor_t* vulkan_tensor(sw_runtime_t* rt, sw_device_t* dev, const int64_t* shape, size_t rank,
                                  const float* values) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  sw_carrier_t* carrier = NULL;
  CHECK(sw_carrier_create_vulkan(rt, dev, SW_DTYPE_F32, n, &carrier));
  CHECK(sw_carrier_write(carrier, 0, n, values)); /* first mode fastest */
  sw_layout_t* layout = NULL;
  CHECK(sw_layout_dense(shape, rank, &layout));
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_create(carrier, 0, layout, &t));
  sw_layout_release(layout);
  sw_carrier_release(carrier); /* the tensor keeps it */
  return t;
}

int main(void) {
  app_vulkan v;
  if (app_vulkan_create(&v) != 0) {
    fprintf(stderr, "embed_vulkan: no Vulkan driver or compute-capable device; skipped\n");
    return 77;
  }

  /* Hand the application's objects to StrideWeave. */
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  sw_vulkan_device_desc_t desc;
  sw_vulkan_device_desc_init(&desc);
  desc.instance = v.instance;
  desc.physical_device = v.physical_device;
  desc.device = v.device;
  desc.queue = v.strideweave_queue;
  desc.queue_family_index = v.family;
  desc.enabled_features = 0; /* created without shaderFloat64: no f64 kernels */
  sw_device_t* dev = NULL;
  CHECK(sw_device_create_vulkan(rt, &desc, &dev));

  /* relu(x @ w) with x (2, 3) and w (3, 2), values first mode fastest:
   * x = [[1, -2, 3], [-4, 5, -6]], w = [[1, 0], [0, 1], [1, 1]]. */
  const float xv[6] = {1, -4, -2, 5, 3, -6}, wv[6] = {1, 0, 1, 0, 1, 1};
  const int64_t xs[2] = {2, 3}, ws[2] = {3, 2};
  sw_tensor_t* x = vulkan_tensor(rt, dev, xs, 2, xv);
  sw_tensor_t* w = vulkan_tensor(rt, dev, ws, 2, wv);
  sw_tensor_t *y = NULL, *z = NULL;
  CHECK(sw_matmul(x, w, &y)); /* recorded into a batch, not yet submitted */
  CHECK(sw_relu(y, &z));      /* z stays on the Vulkan carrier */

  /* Reading submits the batch to StrideWeave's queue and waits for it. */
  float got[4];
  CHECK(sw_tensor_read(z, got, sizeof got));
  /* x @ w = [[4, 1], [-10, -1]] -> relu, first mode fastest: 4, 0, 1, 0. */
  const float want[4] = {4, 0, 1, 0};

  /* Or move the result to a CPU carrier (an empty one: the move sizes it). */
  sw_carrier_t* cpu = NULL;
  CHECK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* moving = NULL;
  CHECK(sw_move_async(z, cpu, &moving));
  CHECK(sw_await_wait(moving, -1));
  sw_tensor_t* on_cpu = NULL;
  CHECK(sw_await_result(moving, &on_cpu));
  float moved[4];
  CHECK(sw_tensor_read(on_cpu, moved, sizeof moved));

  int ok = 1;
  for (int i = 0; i < 4; ++i) ok &= got[i] == want[i] && moved[i] == want[i];
  printf("relu(x @ w) on the application's Vulkan device: [[%g, %g], [%g, %g]] %s\n", got[0], got[2], got[1],
         got[3], ok ? "(as expected)" : "(WRONG)");

  /* Release every StrideWeave object on the device, shut the runtime down
   * (no work in flight any more), then drop the device: its last reference
   * waits for the VkDevice to go idle and frees StrideWeave's buffers and
   * pipelines. Only then may the application destroy its objects. */
  sw_tensor_release(on_cpu);
  sw_await_release(moving);
  sw_carrier_release(cpu);
  sw_tensor_release(z);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(x);
  CHECK(sw_runtime_shutdown(rt));
  sw_device_release(dev);
  sw_runtime_release(rt);
  app_vulkan_destroy(&v);
  return ok ? 0 : 1;
}
