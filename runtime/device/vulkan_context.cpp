// Vulkan bring-up: the instance, physical device, device and compute queue
// (the library's own, or an embedder's), and the binding convention every
// dispatch uses (the descriptor set and pipeline layouts).
#include "device/vulkan_context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace sw::vk {

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
  attachment.reset();  // the carrier's pipelines, made on this device
  if (device_) vkDeviceWaitIdle(device_);
  // Whatever was recorded or submitted is finished or abandoned now.
  destroy_submission(batch_);
  for (auto& s : in_flight_) destroy_submission(s);
  for (auto& s : spare_) destroy_submission(s);
  for (auto& list : free_buffers_)
    for (auto& [size, buffers] : list)
      for (auto& b : buffers) free_buffer(b);
  if (pipeline_layout_) vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
  if (cmd_pool_) vkDestroyCommandPool(device_, cmd_pool_, nullptr);
  if (own_device_) vkDestroyDevice(device_, nullptr);
  if (own_instance_) vkDestroyInstance(instance_, nullptr);
}

}  // namespace sw::vk
