// One Vulkan device shared by the bridge backend and the compute carrier.
// Its jobs, one file each: bring-up (vulkan_context.cpp: the instance, device,
// queue and the dispatch binding convention), memory (vulkan_memory.cpp:
// buffers and the pool that reuses them) and submission
// (vulkan_submission.cpp: batches of recorded commands, fences). The compute
// shaders and their pipelines belong to the Vulkan carrier
// (carriers/vulkan/vulkan_pipelines.*). Every member is called with mutex()
// held (it is recursive).
#pragma once

#include <vulkan/vulkan.h>

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "strideweave/strideweave.h"

namespace sw::vk {

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // persistently mapped when host visible
  VkDeviceSize size = 0;   // bytes bound (the pool's size class)
  bool staging = false;
};

// Push constants are at most 128 bytes (the guaranteed minimum). Word 0 is
// reserved: the meta base, 0 since each dispatch's meta words are bound as
// their own uniform window.
struct Push {
  uint32_t words[32] = {};
  uint32_t used = 1;  // words pushed
  void set(uint32_t i, uint32_t v) {
    words[i] = v;
    if (i + 1 > used) used = i + 1;
  }
  void set_int(uint32_t i, int64_t v) { set(i, static_cast<uint32_t>(static_cast<int32_t>(v))); }
  void set_float(uint32_t i, float v);
};

// Counters for tests and benchmarks.
struct Counters {
  uint64_t submits = 0, dispatches = 0, copies = 0, host_reads = 0, host_writes = 0, pipelines = 0;
  uint64_t buffers_made = 0, buffers_reused = 0;  // device buffers created fresh / taken from the pool
};

// A batch of commands: its fence and the buffers it keeps until complete
// (those destroyed while it may use them). It holds no references to
// carriers or tensors, so an unread batch never keeps a device alive.
// Shells (command buffer, fence, descriptor pool, meta buffer) are reused.
struct Submission {
  VkFence fence = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  Buffer meta;                     // host-visible words the dispatches read (uniform windows)
  size_t meta_used = 0;            // words
  uint32_t sets = 0;               // descriptor sets allocated from `pool`
  bool submitted = false;
  std::vector<Buffer> buffers;     // back to the pool after completion
};

// Throws DEVICE_LOST / OUT_OF_MEMORY / IO for a failed VkResult.
void check(VkResult r, const char* what);

class Context {
 public:
  // UNSUPPORTED when no Vulkan driver is present. Freed buffers are kept for
  // reuse up to `pool_limit_bytes`.
  Context(const sw_vulkan_device_desc_t* desc, size_t pool_limit_bytes);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  std::recursive_mutex& mutex() { return mutex_; }
  VkDevice device() const { return device_; }
  // The layout every dispatch binds: out, a, b as storage buffers and the
  // dispatch's meta words as a uniform window, plus 128 bytes of push
  // constants (common.glsl). Pipelines are made with it.
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  const char* device_name() const { return name_; }
  bool handed_in() const { return !own_device_; }
  // A CPU implementation (lavapipe): a hint for kernel shapes.
  bool is_cpu() const { return cpu_; }
  // shaderFloat64 enabled on the device (f64 kernels).
  bool has_float64() const { return float64_; }
  const Counters& counters() const { return counters_; }
  Counters& counters() { return counters_; }

  // Device-local storage buffer (mapped if that memory is host visible),
  // zero-filled when `zero` (else its contents are unspecified).
  Buffer create_buffer(VkDeviceSize size, bool zero = true);
  // Host-visible staging buffer.
  Buffer create_staging(VkDeviceSize size);
  // Back to the pool now, or once the work that may use it completed.
  void destroy_buffer(Buffer& b);

  // Record into the open batch (opening one if needed).
  void copy(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset, VkDeviceSize bytes);
  void fill_zero(VkBuffer b, VkDeviceSize offset, VkDeviceSize size);
  // Binds out / a / b (storage) and `meta` (at most 4096 words, copied into
  // the batch's meta buffer and bound as a uniform window) and runs
  // gx x gy x gz workgroups of `pipeline` (made with pipeline_layout()).
  void dispatch(VkPipeline pipeline, VkBuffer out, VkBuffer a, VkBuffer b, const std::vector<int32_t>& meta,
                Push push, uint32_t gx, uint32_t gy, uint32_t gz);
  // Records a small host write (at most 65536 bytes, offset and size
  // multiples of 4) in stream order: nothing waits.
  void update(VkBuffer b, VkDeviceSize offset, const void* src, VkDeviceSize bytes);
  // Whether commands are recorded or submitted and not yet finished.
  bool busy() const { return batch_ || !in_flight_.empty(); }
  // Host access to a mapped buffer: waits for every recorded command first.
  void host_read(const Buffer& b, VkDeviceSize offset, void* dst, VkDeviceSize bytes);
  void host_write(const Buffer& b, VkDeviceSize offset, const void* src, VkDeviceSize bytes);

  // Submits the open batch (if any) and waits for everything submitted.
  void flush();
  // Submits the open batch; the caller waits with wait() and then finishes it.
  std::unique_ptr<Submission> submit();
  void wait(Submission& s);                    // without the mutex
  void finish(std::unique_ptr<Submission> s);  // with the mutex
  void wait_idle();

  // What the layer above keeps per device (the Vulkan carrier's pipelines
  // and kernels): made on first use, destroyed first when the device goes.
  // Opaque here.
  std::shared_ptr<void> attachment;

 private:
  void open_batch();
  void submit_open_batch();  // into in_flight_, without waiting
  std::unique_ptr<Submission> new_shell();
  void recycle(std::unique_ptr<Submission> s);
  void destroy_submission(std::unique_ptr<Submission>& s);
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback);
  Buffer make_buffer(VkDeviceSize size, bool staging);
  Buffer take_buffer(VkDeviceSize size, bool staging);
  void free_buffer(Buffer& b);
  void release_buffer(Buffer& b);  // to the pool, or freed past its limit

  std::recursive_mutex mutex_;
  bool own_instance_ = false, own_device_ = false;
  bool float64_ = false;
  bool cpu_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  size_t meta_align_ = 64;  // words: minUniformBufferOffsetAlignment
  char name_[256] = {0};
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;

  // Buffer pool: free buffers by (size class, staging).
  size_t pool_limit_ = 0, pool_bytes_ = 0;
  std::unordered_map<VkDeviceSize, std::vector<Buffer>> free_buffers_[2];

  std::unique_ptr<Submission> batch_;              // the open batch
  std::deque<std::unique_ptr<Submission>> in_flight_;  // submitted, oldest first
  std::vector<std::unique_ptr<Submission>> spare_;     // reset shells
  Counters counters_;
};

}  // namespace sw::vk
