// The runtime: worker threads, the host buffer pool and the host's hooks.
#pragma once

#include <memory>
#include <string>

#include "base/object.hpp"
#include "base/thread_pool.hpp"
#include "core/buffer_pool.hpp"

namespace sw {

class Runtime : public Object {
 public:
  explicit Runtime(const sw_runtime_desc_t& desc);
  ~Runtime() override;

  ThreadPool& compute() { return *compute_; }
  const std::shared_ptr<BufferPool>& pool() const { return pool_; }
  void log(sw_log_level_t level, const std::string& message) const;

 private:
  std::unique_ptr<ThreadPool> compute_;
  std::shared_ptr<BufferPool> pool_;
  sw_log_fn log_ = nullptr;
  void* log_user_data_ = nullptr;
  sw_log_level_t log_level_ = SW_LOG_WARNING;
};

}  // namespace sw
