// Vulkan submission: commands recorded into one open batch (copies, fills,
// small updates, dispatches, each followed by a barrier), submitted when a
// value is read back or the batch is full, with fences waited on.
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/status.hpp"
#include "device/vulkan_context.hpp"

namespace sw::vk {
namespace {

constexpr size_t kMetaInts = 1 << 16;    // meta words per batch
constexpr size_t kMetaWindow = 4096;     // words one dispatch sees (common.glsl's Meta)
constexpr uint32_t kSetsPerBatch = 1024;  // dispatches per batch

}  // namespace

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

void Context::destroy_submission(std::unique_ptr<Submission>& s) {
  if (!s) return;
  for (auto& b : s->buffers) free_buffer(b);
  free_buffer(s->meta);
  if (s->pool) vkDestroyDescriptorPool(device_, s->pool, nullptr);
  if (s->fence) vkDestroyFence(device_, s->fence, nullptr);
  if (s->cmd) vkFreeCommandBuffers(device_, cmd_pool_, 1, &s->cmd);
  s.reset();
}

void Context::dispatch(VkPipeline p, VkBuffer out, VkBuffer a, VkBuffer b, const std::vector<int32_t>& meta,
                       Push push, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (meta.size() > kMetaWindow) unsupported_error("vulkan: a kernel description above 4096 words");
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
