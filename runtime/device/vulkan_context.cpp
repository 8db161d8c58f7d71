#include "device/vulkan_context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "base/status.hpp"
#include "core/buffer_pool.hpp"
#include "ops/backend.hpp"

namespace sw::vk {
namespace {

// Each kernel as SPIR-V words, built from shaders/*.comp by glslc; the f64
// variants are compiled with SW_F64 (double arithmetic).
const uint32_t kBinarySpv[] = {
#include "binary.spv.inc"
};
const uint32_t kUnarySpv[] = {
#include "unary.spv.inc"
};
const uint32_t kCopySpv[] = {
#include "copy.spv.inc"
};
const uint32_t kReduceSumSpv[] = {
#include "reduce_sum.spv.inc"
};
const uint32_t kMatmulSpv[] = {
#include "matmul.spv.inc"
};
const uint32_t kBinary64Spv[] = {
#include "binary_f64.spv.inc"
};
const uint32_t kUnary64Spv[] = {
#include "unary_f64.spv.inc"
};
const uint32_t kCopy64Spv[] = {
#include "copy_f64.spv.inc"
};
const uint32_t kReduceSum64Spv[] = {
#include "reduce_sum_f64.spv.inc"
};
const uint32_t kMatmul64Spv[] = {
#include "matmul_f64.spv.inc"
};

struct Code {
  const uint32_t* words;
  size_t bytes;
};
Code code_of(Kernel k, bool f64) {
  switch (k) {
    case Kernel::kBinary: return f64 ? Code{kBinary64Spv, sizeof kBinary64Spv} : Code{kBinarySpv, sizeof kBinarySpv};
    case Kernel::kUnary: return f64 ? Code{kUnary64Spv, sizeof kUnary64Spv} : Code{kUnarySpv, sizeof kUnarySpv};
    case Kernel::kCopy: return f64 ? Code{kCopy64Spv, sizeof kCopy64Spv} : Code{kCopySpv, sizeof kCopySpv};
    case Kernel::kReduceSum:
      return f64 ? Code{kReduceSum64Spv, sizeof kReduceSum64Spv} : Code{kReduceSumSpv, sizeof kReduceSumSpv};
    default: return f64 ? Code{kMatmul64Spv, sizeof kMatmul64Spv} : Code{kMatmulSpv, sizeof kMatmulSpv};
  }
}

constexpr size_t kMetaInts = 1 << 16;    // meta words per batch
constexpr size_t kMetaWindow = 4096;     // words one dispatch sees (common.glsl's Meta)
constexpr uint32_t kSetsPerBatch = 1024;  // dispatches per batch

}  // namespace

bool PipelineKey::operator<(const PipelineKey& o) const {
  if (kernel != o.kernel) return kernel < o.kernel;
  if (f64 != o.f64) return f64 < o.f64;
  return spec < o.spec;
}

void Push::set_float(uint32_t i, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  set(i, bits);
}

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  const std::string m = std::string("vulkan: ") + what + " failed (VkResult " + std::to_string(r) + ")";
  if (r == VK_ERROR_DEVICE_LOST) throw_error(SW_ERROR_DEVICE_LOST, m);
  if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) throw_error(SW_ERROR_OUT_OF_MEMORY, m);
  throw_error(SW_ERROR_IO, m);
}

Context::Context(const sw_vulkan_device_desc_t* desc, size_t pool_limit_bytes) : pool_limit_(pool_limit_bytes) {
  if (desc && desc->device) {
    if (!desc->physical_device || !desc->queue)
      value_error("sw_vulkan_device_desc_t: a handed-in device needs its physical_device and queue too");
    instance_ = static_cast<VkInstance>(desc->instance);
    physical_ = static_cast<VkPhysicalDevice>(desc->physical_device);
    device_ = static_cast<VkDevice>(desc->device);
    queue_ = static_cast<VkQueue>(desc->queue);
    family_ = desc->queue_family_index;
    // The embedder says which features it enabled: they cannot be queried.
    float64_ = (desc->enabled_features & SW_VULKAN_FEATURE_SHADER_FLOAT64) != 0;
  } else {
    if (desc && desc->instance) {
      instance_ = static_cast<VkInstance>(desc->instance);
    } else {
      VkApplicationInfo app{};
      app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
      app.pApplicationName = "strideweave";
      app.apiVersion = VK_API_VERSION_1_1;
      VkInstanceCreateInfo ci{};
      ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
      ci.pApplicationInfo = &app;
      VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
      if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        unsupported_error("sw_device_create_vulkan: no Vulkan driver (ICD) is installed");
      check(r, "vkCreateInstance");
      own_instance_ = true;
    }
    if (desc && desc->physical_device) {
      physical_ = static_cast<VkPhysicalDevice>(desc->physical_device);
    } else {
      uint32_t count = 0;
      vkEnumeratePhysicalDevices(instance_, &count, nullptr);
      if (count == 0) {
        if (own_instance_) vkDestroyInstance(instance_, nullptr);
        unsupported_error("sw_device_create_vulkan: no Vulkan physical device (ICD) is present");
      }
      std::vector<VkPhysicalDevice> devs(count);
      vkEnumeratePhysicalDevices(instance_, &count, devs.data());
      physical_ = devs[0];
    }
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, qf.data());
    family_ = UINT32_MAX;
    for (uint32_t i = 0; i < nq; ++i)
      if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        family_ = i;
        break;
      }
    if (family_ == UINT32_MAX) {
      if (own_instance_) vkDestroyInstance(instance_, nullptr);
      unsupported_error("sw_device_create_vulkan: the physical device has no compute queue");
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    // Enable what the f64 kernels need when the device has it.
    VkPhysicalDeviceFeatures supported{}, enable{};
    vkGetPhysicalDeviceFeatures(physical_, &supported);
    enable.shaderFloat64 = supported.shaderFloat64;
    float64_ = supported.shaderFloat64 == VK_TRUE;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.pEnabledFeatures = &enable;
    VkResult r = vkCreateDevice(physical_, &dci, nullptr, &device_);
    if (r != VK_SUCCESS && own_instance_) vkDestroyInstance(instance_, nullptr);
    check(r, "vkCreateDevice");
    own_device_ = true;
    vkGetDeviceQueue(device_, family_, 0, &queue_);
  }
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_props_);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  std::snprintf(name_, sizeof name_, "%s", props.deviceName);

  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = family_;
  check(vkCreateCommandPool(device_, &pci, nullptr, &cmd_pool_), "vkCreateCommandPool");
  meta_align_ = std::max<size_t>(1, props.limits.minUniformBufferOffsetAlignment / 4);
  cpu_ = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  // out, a, b as storage buffers; the dispatch's meta words as a uniform window.
  VkDescriptorSetLayoutBinding bindings[4];
  for (uint32_t i = 0; i < 4; ++i)
    bindings[i] = {i, i < 3 ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1,
                   VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo lci{};
  lci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  lci.bindingCount = 4;
  lci.pBindings = bindings;
  check(vkCreateDescriptorSetLayout(device_, &lci, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push::words)};
  VkPipelineLayoutCreateInfo plci{};
  plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &set_layout_;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &range;
  check(vkCreatePipelineLayout(device_, &plci, nullptr, &pipeline_layout_), "vkCreatePipelineLayout");
}

Context::~Context() {
  compute.reset();
  if (device_) vkDeviceWaitIdle(device_);
  // Whatever was recorded or submitted is finished or abandoned now.
  auto drop = [&](std::unique_ptr<Submission>& s) {
    if (!s) return;
    for (auto& b : s->buffers) free_buffer(b);
    free_buffer(s->meta);
    if (s->pool) vkDestroyDescriptorPool(device_, s->pool, nullptr);
    if (s->fence) vkDestroyFence(device_, s->fence, nullptr);
    if (s->cmd) vkFreeCommandBuffers(device_, cmd_pool_, 1, &s->cmd);
    s.reset();
  };
  drop(batch_);
  for (auto& s : in_flight_) drop(s);
  for (auto& s : spare_) drop(s);
  for (auto& list : free_buffers_)
    for (auto& [size, buffers] : list)
      for (auto& b : buffers) free_buffer(b);
  for (auto& [key, p] : pipelines_) vkDestroyPipeline(device_, p, nullptr);
  for (auto& variant : modules_)
    for (VkShaderModule m : variant)
      if (m) vkDestroyShaderModule(device_, m, nullptr);
  if (pipeline_layout_) vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
  if (cmd_pool_) vkDestroyCommandPool(device_, cmd_pool_, nullptr);
  if (own_device_) vkDestroyDevice(device_, nullptr);
  if (own_instance_) vkDestroyInstance(instance_, nullptr);
}

uint32_t Context::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) {
  for (VkMemoryPropertyFlags flags : {want, fallback})
    for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (memory_props_.memoryTypes[i].propertyFlags & flags) == flags) return i;
  throw_error(SW_ERROR_OUT_OF_MEMORY, "vulkan: no suitable memory type");
}

Buffer Context::make_buffer(VkDeviceSize size, bool staging) {
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags want = staging ? host : VkMemoryPropertyFlags{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT};
  const VkMemoryPropertyFlags fallback = staging ? host : 0;
  Buffer b;
  b.size = size;
  b.staging = staging;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = b.size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (staging) bci.usage |= VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT;  // meta words
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &bci, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  try {
    mai.memoryTypeIndex = memory_type(req.memoryTypeBits, want, fallback);
    check(vkAllocateMemory(device_, &mai, nullptr, &b.memory), "vkAllocateMemory");
  } catch (...) {
    vkDestroyBuffer(device_, b.buffer, nullptr);
    throw;
  }
  vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  const auto flags = memory_props_.memoryTypes[mai.memoryTypeIndex].propertyFlags;
  if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  return b;
}

// Fresh device memory costs page faults on first touch (lavapipe) or a
// driver allocation: freed buffers are reused by size class.
Buffer Context::take_buffer(VkDeviceSize size, bool staging) {
  const VkDeviceSize cls = BufferPool::size_class(static_cast<size_t>(std::max<VkDeviceSize>(size, 4)));
  auto& list = free_buffers_[staging][cls];
  if (!list.empty()) {
    Buffer b = list.back();
    list.pop_back();
    pool_bytes_ -= b.size;
    return b;
  }
  return make_buffer(cls, staging);
}

Buffer Context::create_buffer(VkDeviceSize size, bool zero) {
  Buffer b = take_buffer(size, false);
  if (zero) {
    if (b.mapped)
      std::memset(b.mapped, 0, b.size);  // not in use: pooled buffers are idle
    else
      fill_zero(b.buffer, 0, b.size);
  }
  return b;
}

Buffer Context::create_staging(VkDeviceSize size) { return take_buffer(size, true); }

void Context::free_buffer(Buffer& b) {
  if (b.mapped) vkUnmapMemory(device_, b.memory);
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

void Context::release_buffer(Buffer& b) {
  if (!b.buffer) return;
  if (pool_bytes_ + b.size > pool_limit_) return free_buffer(b);
  pool_bytes_ += b.size;
  free_buffers_[b.staging][b.size].push_back(b);
  b = Buffer{};
}

void Context::destroy_buffer(Buffer& b) {
  if (!b.buffer) return;
  // Submissions complete in order: the newest one covers every use.
  Submission* last = batch_ ? batch_.get() : in_flight_.empty() ? nullptr : in_flight_.back().get();
  if (last) {
    last->buffers.push_back(b);
    b = Buffer{};
  } else {
    release_buffer(b);
  }
}

std::unique_ptr<Submission> Context::new_shell() {
  if (!spare_.empty()) {
    auto s = std::move(spare_.back());
    spare_.pop_back();
    return s;
  }
  auto s = std::make_unique<Submission>();
  try {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = cmd_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &ai, &s->cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(vkCreateFence(device_, &fci, nullptr, &s->fence), "vkCreateFence");
  } catch (...) {
    if (s->cmd) vkFreeCommandBuffers(device_, cmd_pool_, 1, &s->cmd);
    throw;
  }
  return s;
}

void Context::recycle(std::unique_ptr<Submission> s) {
  // Keep the shell only if it can be reset; else drop its parts.
  bool ok = vkResetFences(device_, 1, &s->fence) == VK_SUCCESS &&
            vkResetCommandBuffer(s->cmd, 0) == VK_SUCCESS;
  if (ok && s->pool) ok = vkResetDescriptorPool(device_, s->pool, 0) == VK_SUCCESS;
  s->meta_used = 0;
  s->sets = 0;
  s->submitted = false;
  if (ok && spare_.size() < 4) {
    spare_.push_back(std::move(s));
    return;
  }
  free_buffer(s->meta);
  if (s->pool) vkDestroyDescriptorPool(device_, s->pool, nullptr);
  vkDestroyFence(device_, s->fence, nullptr);
  vkFreeCommandBuffers(device_, cmd_pool_, 1, &s->cmd);
}

void Context::open_batch() {
  if (batch_) return;
  auto s = new_shell();
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vkBeginCommandBuffer(s->cmd, &bi);
  if (r != VK_SUCCESS) {
    recycle(std::move(s));
    check(r, "vkBeginCommandBuffer");
  }
  batch_ = std::move(s);
}

// Every command is followed by this barrier: a later command (in this batch
// or a later submission on the queue) sees its writes, and the host does
// once the fence signalled.
static void barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                           VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Context::copy(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset, VkDeviceSize bytes) {
  open_batch();
  VkBufferCopy region{from_offset, to_offset, bytes};
  vkCmdCopyBuffer(batch_->cmd, from, to, 1, &region);
  barrier(batch_->cmd);
  ++counters_.copies;
}

void Context::fill_zero(VkBuffer b, VkDeviceSize offset, VkDeviceSize size) {
  open_batch();
  vkCmdFillBuffer(batch_->cmd, b, offset, size, 0);
  barrier(batch_->cmd);
}

void Context::update(VkBuffer b, VkDeviceSize offset, const void* src, VkDeviceSize bytes) {
  open_batch();
  vkCmdUpdateBuffer(batch_->cmd, b, offset, bytes, src);
  barrier(batch_->cmd);
  ++counters_.host_writes;
}

void Context::host_read(const Buffer& b, VkDeviceSize offset, void* dst, VkDeviceSize bytes) {
  flush();
  std::memcpy(dst, static_cast<const std::byte*>(b.mapped) + offset, bytes);
  ++counters_.host_reads;
}

void Context::host_write(const Buffer& b, VkDeviceSize offset, const void* src, VkDeviceSize bytes) {
  flush();
  std::memcpy(static_cast<std::byte*>(b.mapped) + offset, src, bytes);
  ++counters_.host_writes;
}

VkShaderModule Context::module(Kernel k, bool f64) {
  VkShaderModule& m = modules_[f64][static_cast<int>(k)];
  if (m) return m;
  Code code = code_of(k, f64);
  VkShaderModuleCreateInfo mci{};
  mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mci.codeSize = code.bytes;
  mci.pCode = code.words;
  check(vkCreateShaderModule(device_, &mci, nullptr, &m), "vkCreateShaderModule");
  return m;
}

VkPipeline Context::pipeline(const PipelineKey& key) {
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  std::vector<VkSpecializationMapEntry> entries(key.spec.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4};
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = key.spec.size() * 4;
  si.pData = key.spec.data();
  VkComputePipelineCreateInfo cci{};
  cci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = module(key.kernel, key.f64);
  cci.stage.pName = "main";
  cci.stage.pSpecializationInfo = key.spec.empty() ? nullptr : &si;
  cci.layout = pipeline_layout_;
  VkPipeline p = VK_NULL_HANDLE;
  check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cci, nullptr, &p), "vkCreateComputePipelines");
  pipelines_.emplace(key, p);
  ++counters_.pipelines;
  return p;
}

void Context::dispatch(const PipelineKey& key, VkBuffer out, VkBuffer a, VkBuffer b, const std::vector<int32_t>& meta,
                       Push push, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (meta.size() > kMetaWindow) unsupported_error("vulkan: a kernel description above 4096 words");
  VkPipeline p = pipeline(key);
  auto meta_base = [&](const Submission& s) { return (s.meta_used + meta_align_ - 1) / meta_align_ * meta_align_; };
  // A full batch goes to the queue without waiting; recording continues.
  if (batch_ && (meta_base(*batch_) + meta.size() > kMetaInts || batch_->sets >= kSetsPerBatch)) submit_open_batch();
  open_batch();
  Submission& s = *batch_;
  if (!s.meta.buffer) s.meta = make_buffer((kMetaInts + kMetaWindow) * sizeof(int32_t), true);
  if (!s.pool) {
    VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * kSetsPerBatch},
                                     {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kSetsPerBatch}};
    VkDescriptorPoolCreateInfo dpci{};
    dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpci.maxSets = kSetsPerBatch;
    dpci.poolSizeCount = 2;
    dpci.pPoolSizes = sizes;
    check(vkCreateDescriptorPool(device_, &dpci, nullptr, &s.pool), "vkCreateDescriptorPool");
  }
  const size_t base = meta_base(s);
  if (!meta.empty()) std::memcpy(static_cast<int32_t*>(s.meta.mapped) + base, meta.data(), meta.size() * sizeof(int32_t));
  s.meta_used = base + meta.size();
  push.words[0] = 0;  // the window starts at the dispatch's words
  // Only the words written: some drivers copy a bound uniform range.
  const VkDeviceSize window = std::max<VkDeviceSize>(16, (meta.size() * sizeof(int32_t) + 15) / 16 * 16);
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = s.pool;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &set_layout_;
  VkDescriptorSet set;
  check(vkAllocateDescriptorSets(device_, &dsai, &set), "vkAllocateDescriptorSets");
  ++s.sets;
  VkDescriptorBufferInfo infos[4] = {{out, 0, VK_WHOLE_SIZE},
                                     {a, 0, VK_WHOLE_SIZE},
                                     {b, 0, VK_WHOLE_SIZE},
                                     {s.meta.buffer, base * sizeof(int32_t), window}};
  VkWriteDescriptorSet writes[4];
  for (uint32_t i = 0; i < 4; ++i) {
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = i < 3 ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device_, 4, writes, 0, nullptr);
  VkCommandBuffer cmd = s.cmd;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push.used * 4, push.words);
  vkCmdDispatch(cmd, gx, gy, gz);
  barrier(cmd);
  ++counters_.dispatches;
}

std::unique_ptr<Submission> Context::submit() {
  if (!batch_) return nullptr;
  auto s = std::move(batch_);
  VkResult r = vkEndCommandBuffer(s->cmd);
  if (r == VK_SUCCESS) {
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s->cmd;
    r = vkQueueSubmit(queue_, 1, &si, s->fence);
  }
  if (r != VK_SUCCESS) {
    finish(std::move(s));
    check(r, "vkQueueSubmit");
  }
  s->submitted = true;
  ++counters_.submits;
  return s;
}

void Context::submit_open_batch() {
  auto s = submit();
  if (s) in_flight_.push_back(std::move(s));
}

void Context::wait(Submission& s) {
  if (!s.submitted) return;
  check(vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void Context::finish(std::unique_ptr<Submission> s) {
  if (!s) return;
  std::vector<Buffer> buffers = std::move(s->buffers);
  s->buffers.clear();
  recycle(std::move(s));
  for (auto& b : buffers) release_buffer(b);
}

void Context::flush() {
  submit_open_batch();
  Status first;
  while (!in_flight_.empty()) {
    auto s = std::move(in_flight_.front());
    in_flight_.pop_front();
    Status st = capture([&] { wait(*s); });
    if (first.ok() && !st.ok()) first = st;
    finish(std::move(s));
  }
  if (!first.ok()) first.raise();
}

void Context::wait_idle() {
  vkDeviceWaitIdle(device_);
  while (!in_flight_.empty()) {
    auto s = std::move(in_flight_.front());
    in_flight_.pop_front();
    finish(std::move(s));
  }
}

}  // namespace sw::vk
