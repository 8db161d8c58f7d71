// Vulkan device memory: device-local and staging buffers, and the pool that
// reuses freed ones by size class (fresh device memory costs page faults on
// first touch under lavapipe, or a driver allocation), up to a byte limit.
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "core/buffer_pool.hpp"
#include "device/vulkan_context.hpp"

namespace sw::vk {

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
  ++counters_.buffers_made;
  const auto flags = memory_props_.memoryTypes[mai.memoryTypeIndex].propertyFlags;
  if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  return b;
}

Buffer Context::take_buffer(VkDeviceSize size, bool staging) {
  const VkDeviceSize cls = BufferPool::size_class(static_cast<size_t>(std::max<VkDeviceSize>(size, 4)));
  auto& list = free_buffers_[staging][cls];
  if (!list.empty()) {
    Buffer b = list.back();
    list.pop_back();
    pool_bytes_ -= b.size;
    ++counters_.buffers_reused;
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

}  // namespace sw::vk
