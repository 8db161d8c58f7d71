#include "core/runtime.hpp"

#include <cstdint>
#include <thread>

namespace sw {

Runtime::Runtime(const sw_runtime_desc_t& desc) : Object(ObjectKind::kRuntime) {
  uint32_t threads = desc.compute_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  compute_ = std::make_unique<ThreadPool>(threads);
  const size_t limit = desc.pool_limit_bytes == SIZE_MAX ? (size_t{1} << 30) : desc.pool_limit_bytes;
  pool_ = std::make_shared<BufferPool>(limit, desc.allocator);
  log_ = desc.log;
  log_user_data_ = desc.log_user_data;
  log_level_ = desc.log_level;
}

Runtime::~Runtime() = default;

void Runtime::log(sw_log_level_t level, const std::string& message) const {
  if (log_ && level >= log_level_) log_(log_user_data_, level, message.c_str());
}

}  // namespace sw
