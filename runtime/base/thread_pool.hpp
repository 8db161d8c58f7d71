// A small fork-join pool: parallel_for splits a range into one chunk per
// thread and the calling thread runs the first chunk itself. Between jobs a
// worker spins for a short while (kSpin) before it sleeps, and the caller
// spins likewise for the workers' chunks: a product of a few hundred
// microseconds (one decoded token's matrix) would otherwise lose tens of
// them to a futex wake-up on each side, as OpenMP's runtimes avoid too. The
// spins yield the CPU to any other thread that has work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sw {

class ThreadPool {
 public:
  // `threads` counts the caller: a pool of 2 starts one worker.
  explicit ThreadPool(uint32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  uint32_t threads() const { return threads_; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n). Work below
  // `grain` items per thread runs inline. Exceptions are rethrown here.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_main(uint32_t index);

  uint32_t threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one parallel_for at a time; others run inline
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint32_t job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};  // written under mutex_, read by spinning workers
  std::atomic<uint32_t> pending_{0};     // workers still running the job
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

}  // namespace sw
