// Background workers for CPU-side transfer work (decompression, copies).
// Jobs never block on the loop; they post their completion back to it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sw {

class WorkerPool {
 public:
  explicit WorkerPool(uint32_t threads);
  ~WorkerPool();  // finishes queued jobs, then joins (detaches if called on a worker)
  void submit(std::function<void()> job);
  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> jobs;
    bool stop = false;
  };
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
};

}  // namespace sw
