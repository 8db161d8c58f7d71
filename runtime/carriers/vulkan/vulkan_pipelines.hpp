// The compute shaders of the Vulkan carrier on one device: their SPIR-V
// (built from shaders/*.comp by glslc at build time), shader modules and
// pipelines, one per kernel, variant and specialization, made on first use
// and kept. Called with the device context's mutex held.
#pragma once

#include <vulkan/vulkan.h>

#include <map>
#include <vector>

#include "device/vulkan_context.hpp"

namespace sw::vk {

// The compute shaders; kernels marked f64 exist in a second variant whose
// arithmetic is double (built only for devices with shaderFloat64).
enum class Kernel : uint32_t { kBinary = 0, kUnary = 1, kCopy = 2, kReduceSum = 3, kMatmul = 4, kCount = 5 };

// A pipeline: the kernel, its f64 variant or not, and the values of its
// specialization constants (constant_id 0, 1, ...).
struct PipelineKey {
  Kernel kernel = Kernel::kBinary;
  bool f64 = false;
  std::vector<uint32_t> spec;
  bool operator<(const PipelineKey& o) const;
};

class Pipelines {
 public:
  explicit Pipelines(Context& ctx) : ctx_(ctx) {}
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  VkPipeline get(const PipelineKey& key);

 private:
  VkShaderModule module(Kernel k, bool f64);

  Context& ctx_;
  VkShaderModule modules_[2][static_cast<int>(Kernel::kCount)] = {};
  std::map<PipelineKey, VkPipeline> pipelines_;
};

}  // namespace sw::vk
