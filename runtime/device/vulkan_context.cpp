#include "device/vulkan_context.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "base/status.hpp"
#include "ops/backend.hpp"

namespace sw::vk {
namespace {

const uint32_t kBinarySpv[] = {
#include "binary.spv.inc"
};
const uint32_t kUnarySpv[] = {
#include "unary.spv.inc"
};
const uint32_t kReduceSumSpv[] = {
#include "reduce_sum.spv.inc"
};
const uint32_t kMatmulSpv[] = {
#include "matmul.spv.inc"
};

struct Code {
  const uint32_t* words;
  size_t bytes;
};
Code code_of(Kernel k) {
  switch (k) {
    case Kernel::kBinary: return {kBinarySpv, sizeof kBinarySpv};
    case Kernel::kUnary: return {kUnarySpv, sizeof kUnarySpv};
    case Kernel::kReduceSum: return {kReduceSumSpv, sizeof kReduceSumSpv};
    default: return {kMatmulSpv, sizeof kMatmulSpv};
  }
}

constexpr size_t kMetaInts = 1 << 16;
constexpr uint32_t kSetsPerBatch = 512;

}  // namespace

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  const std::string m = std::string("vulkan: ") + what + " failed (VkResult " + std::to_string(r) + ")";
  if (r == VK_ERROR_DEVICE_LOST) throw_error(SW_ERROR_DEVICE_LOST, m);
  if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) throw_error(SW_ERROR_OUT_OF_MEMORY, m);
  throw_error(SW_ERROR_IO, m);
}

Context::Context(const sw_vulkan_device_desc_t* desc) {
  if (desc && desc->device) {
    if (!desc->physical_device || !desc->queue)
      value_error("sw_vulkan_device_desc_t: a handed-in device needs its physical_device and queue too");
    instance_ = static_cast<VkInstance>(desc->instance);
    physical_ = static_cast<VkPhysicalDevice>(desc->physical_device);
    device_ = static_cast<VkDevice>(desc->device);
    queue_ = static_cast<VkQueue>(desc->queue);
    family_ = desc->queue_family_index;
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
    VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
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
  VkDescriptorSetLayoutBinding bindings[4];
  for (uint32_t i = 0; i < 4; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo lci{};
  lci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  lci.bindingCount = 4;
  lci.pBindings = bindings;
  check(vkCreateDescriptorSetLayout(device_, &lci, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push)};
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
  if (batch_) {
    // Never submitted: free what it holds.
    for (auto& b : batch_->buffers) free_buffer(b);
    free_buffer(meta_);
    if (batch_->pool) vkDestroyDescriptorPool(device_, batch_->pool, nullptr);
    batch_.reset();
  }
  for (int i = 0; i < static_cast<int>(Kernel::kCount); ++i) {
    if (pipelines_[i]) vkDestroyPipeline(device_, pipelines_[i], nullptr);
    if (modules_[i]) vkDestroyShaderModule(device_, modules_[i], nullptr);
  }
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

Buffer Context::make_buffer(VkDeviceSize size, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) {
  Buffer b;
  b.size = (size + 3) / 4 * 4;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = b.size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
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

Buffer Context::create_buffer(VkDeviceSize size) {
  Buffer b = make_buffer(size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (b.mapped) {
    std::memset(b.mapped, 0, b.size);
  } else {
    fill_zero(b.buffer, b.size);
  }
  return b;
}

Buffer Context::create_staging(VkDeviceSize size) {
  return make_buffer(size, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
}

void Context::free_buffer(Buffer& b) {
  if (b.mapped) vkUnmapMemory(device_, b.memory);
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

void Context::destroy_buffer(Buffer& b) {
  if (!b.buffer) return;
  if (batch_) {
    batch_->buffers.push_back(b);
    b = Buffer{};
  } else {
    free_buffer(b);
  }
}

void Context::open_batch() {
  if (batch_) return;
  auto s = std::make_unique<Submission>();
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_, &ai, &s->cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(s->cmd, &bi);
  batch_ = std::move(s);
  meta_used_ = 0;
  batch_sets_ = 0;
}

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
}

void Context::fill_zero(VkBuffer b, VkDeviceSize size) {
  open_batch();
  vkCmdFillBuffer(batch_->cmd, b, 0, size, 0);
  barrier(batch_->cmd);
}

void Context::keep_until_flushed(Ref<Object> o) {
  open_batch();
  batch_->keep.push_back(std::move(o));
}

VkPipeline Context::pipeline(Kernel k) {
  const int i = static_cast<int>(k);
  if (pipelines_[i]) return pipelines_[i];
  Code code = code_of(k);
  VkShaderModuleCreateInfo mci{};
  mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mci.codeSize = code.bytes;
  mci.pCode = code.words;
  check(vkCreateShaderModule(device_, &mci, nullptr, &modules_[i]), "vkCreateShaderModule");
  VkComputePipelineCreateInfo cci{};
  cci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = modules_[i];
  cci.stage.pName = "main";
  cci.layout = pipeline_layout_;
  check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cci, nullptr, &pipelines_[i]),
        "vkCreateComputePipelines");
  return pipelines_[i];
}

void Context::dispatch(Kernel k, VkBuffer out, VkBuffer a, VkBuffer b, const std::vector<int32_t>& meta, Push push) {
  VkPipeline p = pipeline(k);
  if (batch_ && (meta_used_ + meta.size() + 1 > kMetaInts || batch_sets_ >= kSetsPerBatch)) flush();
  open_batch();
  if (!meta_.buffer) meta_ = create_staging(kMetaInts * sizeof(int32_t));
  if (!batch_->pool) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4 * kSetsPerBatch};
    VkDescriptorPoolCreateInfo dpci{};
  dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpci.maxSets = kSetsPerBatch;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &size;
    check(vkCreateDescriptorPool(device_, &dpci, nullptr, &batch_->pool), "vkCreateDescriptorPool");
  }
  const uint32_t base = static_cast<uint32_t>(meta_used_);
  std::memcpy(static_cast<int32_t*>(meta_.mapped) + base, meta.data(), meta.size() * sizeof(int32_t));
  meta_used_ += meta.size() + 1;
  push.meta_a += base;
  push.meta_b += base;
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = batch_->pool;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &set_layout_;
  VkDescriptorSet set;
  check(vkAllocateDescriptorSets(device_, &dsai, &set), "vkAllocateDescriptorSets");
  ++batch_sets_;
  VkDescriptorBufferInfo infos[4] = {{out, 0, VK_WHOLE_SIZE}, {a, 0, VK_WHOLE_SIZE}, {b, 0, VK_WHOLE_SIZE},
                                     {meta_.buffer, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet writes[4];
  for (uint32_t i = 0; i < 4; ++i) {
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device_, 4, writes, 0, nullptr);
  VkCommandBuffer cmd = batch_->cmd;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push), &push);
  const uint64_t groups = (push.n + 255) / 256;
  const uint32_t gx = static_cast<uint32_t>(groups < 65535 ? groups : 65535);
  const uint32_t gy = static_cast<uint32_t>((groups + gx - 1) / gx);
  vkCmdDispatch(cmd, gx, gy, 1);
  barrier(cmd);
}

std::unique_ptr<Submission> Context::submit() {
  if (!batch_) return nullptr;
  auto s = std::move(batch_);
  if (meta_.buffer) {
    s->buffers.push_back(meta_);
    meta_ = Buffer{};
  }
  vkEndCommandBuffer(s->cmd);
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vkCreateFence(device_, &fci, nullptr, &s->fence), "vkCreateFence");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s->cmd;
  VkResult r = vkQueueSubmit(queue_, 1, &si, s->fence);
  if (r != VK_SUCCESS) {
    finish(std::move(s));
    check(r, "vkQueueSubmit");
  }
  return s;
}

void Context::wait(Submission& s) {
  if (!s.fence) return;
  check(vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void Context::finish(std::unique_ptr<Submission> s) {
  if (!s) return;
  if (s->fence) vkDestroyFence(device_, s->fence, nullptr);
  if (s->cmd) vkFreeCommandBuffers(device_, cmd_pool_, 1, &s->cmd);
  if (s->pool) vkDestroyDescriptorPool(device_, s->pool, nullptr);
  for (auto& b : s->buffers) free_buffer(b);
  s->keep.clear();
}

void Context::flush() {
  auto s = submit();
  if (!s) return;
  Status st = capture([&] { wait(*s); });
  finish(std::move(s));
  if (!st.ok()) st.raise();
}

void Context::wait_idle() { vkDeviceWaitIdle(device_); }

}  // namespace sw::vk
