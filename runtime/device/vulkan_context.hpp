// One Vulkan device shared by the bridge backend and the compute carrier:
// buffers, a batch of recorded commands, submissions and cached pipelines.
// Every member is called with mutex() held (it is recursive).
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/object.hpp"
#include "strideweave/strideweave.h"

namespace sw {
class ComputeBackend;
}

namespace sw::vk {

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // persistently mapped when host visible
  VkDeviceSize size = 0;
};

enum class Kernel { kBinary = 0, kUnary = 1, kReduceSum = 2, kMatmul = 3, kCount = 4 };

struct Push {
  uint32_t n = 0, op = 0;
  float scalar = 0;
  uint32_t meta_a = 0, meta_b = 0, out_offset = 0, p0 = 0, p1 = 0;
};

// A submitted batch: its fence and what it keeps alive until complete.
struct Submission {
  VkFence fence = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  std::vector<Buffer> buffers;        // destroyed after completion
  std::vector<Ref<Object>> keep;      // released after completion
};

// Throws DEVICE_LOST / OUT_OF_MEMORY / IO for a failed VkResult.
void check(VkResult r, const char* what);

class Context {
 public:
  // UNSUPPORTED when no Vulkan driver is present.
  explicit Context(const sw_vulkan_device_desc_t* desc);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  std::recursive_mutex& mutex() { return mutex_; }
  const char* device_name() const { return name_; }

  // Device-local storage buffer (mapped if that memory is host visible), zero-filled.
  Buffer create_buffer(VkDeviceSize size);
  // Host-visible staging buffer.
  Buffer create_staging(VkDeviceSize size);
  // Destroys now, or after the batch that may use it completes.
  void destroy_buffer(Buffer& b);

  // Records into the open batch (opening one if needed).
  void copy(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset, VkDeviceSize bytes);
  void fill_zero(VkBuffer b, VkDeviceSize size);
  // `push.meta_a` / `meta_b` index into `meta`, which is appended to the
  // batch's meta buffer; `groups` workgroups of 256 invocations.
  void dispatch(Kernel k, VkBuffer out, VkBuffer a, VkBuffer b, const std::vector<int32_t>& meta, Push push);
  void keep_until_flushed(Ref<Object> o);

  // Submits the open batch (if any) and waits for it.
  void flush();
  // Submits the open batch; the caller waits with wait() and then finishes it.
  std::unique_ptr<Submission> submit();
  void wait(Submission& s);       // without the mutex
  void finish(std::unique_ptr<Submission> s);  // with the mutex
  void wait_idle();

  // The compute backend of this device (built by the Vulkan carrier).
  std::unique_ptr<ComputeBackend> compute;

 private:
  void open_batch();
  VkPipeline pipeline(Kernel k);
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback);
  Buffer make_buffer(VkDeviceSize size, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback);
  void free_buffer(Buffer& b);

  std::recursive_mutex mutex_;
  bool own_instance_ = false, own_device_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  char name_[256] = {0};
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipeline pipelines_[static_cast<int>(Kernel::kCount)] = {};
  VkShaderModule modules_[static_cast<int>(Kernel::kCount)] = {};

  // The open batch.
  std::unique_ptr<Submission> batch_;
  Buffer meta_;
  size_t meta_used_ = 0;
  uint32_t batch_sets_ = 0;
};

}  // namespace sw::vk
