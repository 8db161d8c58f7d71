#include "carriers/vulkan/vulkan_pipelines.hpp"

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

}  // namespace

bool PipelineKey::operator<(const PipelineKey& o) const {
  if (kernel != o.kernel) return kernel < o.kernel;
  if (f64 != o.f64) return f64 < o.f64;
  return spec < o.spec;
}

Pipelines::~Pipelines() {
  for (auto& [key, p] : pipelines_) vkDestroyPipeline(ctx_.device(), p, nullptr);
  for (auto& variant : modules_)
    for (VkShaderModule m : variant)
      if (m) vkDestroyShaderModule(ctx_.device(), m, nullptr);
}

VkShaderModule Pipelines::module(Kernel k, bool f64) {
  VkShaderModule& m = modules_[f64][static_cast<int>(k)];
  if (m) return m;
  Code code = code_of(k, f64);
  VkShaderModuleCreateInfo mci{};
  mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mci.codeSize = code.bytes;
  mci.pCode = code.words;
  check(vkCreateShaderModule(ctx_.device(), &mci, nullptr, &m), "vkCreateShaderModule");
  return m;
}

VkPipeline Pipelines::get(const PipelineKey& key) {
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
  cci.layout = ctx_.pipeline_layout();
  VkPipeline p = VK_NULL_HANDLE;
  check(vkCreateComputePipelines(ctx_.device(), VK_NULL_HANDLE, 1, &cci, nullptr, &p), "vkCreateComputePipelines");
  pipelines_.emplace(key, p);
  ++ctx_.counters().pipelines;
  return p;
}

}  // namespace sw::vk
