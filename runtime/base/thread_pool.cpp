#include "base/thread_pool.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "base/spin.hpp"

namespace sw {

namespace {

// How long a thread spins before it sleeps: long enough to bridge the gap
// between two products of a decoding step, short enough that an idle pool
// costs nothing measurable.
constexpr auto kSpin = std::chrono::microseconds(200);

// Spins until ready() or kSpin has passed; returns ready(). Yielding: a
// compute thread spinning for its next job must not hold its CPU from a
// thread with work now (the loop thread completing reads, the worker that
// runs a landed tile's products). On two cores a pool worker's 200 us spin
// after each product kept a worker with a landed tile waiting as long, and
// offloaded decoding of the Mixtral demo ran at 0.93x (bf16) and 0.84x
// (Q4_K) the tokens/s it has with a yielding spin (medians of five
// alternating runs); resident compute runs as fast either way, as nothing
// else is runnable then and sched_yield returns at once.
template <typename Ready>
bool spin_until(Ready ready) {
  return sw::spin_until(ready, kSpin, true);
}

}  // namespace

ThreadPool::ThreadPool(uint32_t threads) : threads_(std::max<uint32_t>(1, threads)) {
  for (uint32_t i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

static void chunk_bounds(int64_t n, uint32_t chunks, uint32_t index, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks, extra = n % chunks;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (static_cast<int64_t>(index) < extra ? 1 : 0);
}

void ThreadPool::worker_main(uint32_t index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    uint32_t chunks;
    spin_until([&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      if (stop_.load()) return;
      seen = generation_.load();
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (index < chunks) {
      int64_t b, e;
      chunk_bounds(n, chunks, index, &b, &e);
      try {
        if (b < e) (*job)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex: the caller checks pending_ under it before it sleeps.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const uint32_t chunks = static_cast<uint32_t>(std::min<int64_t>(threads_, by_grain));
  std::unique_lock<std::mutex> run(run_mutex_, std::try_to_lock);
  if (chunks <= 1 || !run.owns_lock()) {
    fn(0, n);  // small work, or the pool is busy with another caller
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_.store(threads_ - 1);
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  std::exception_ptr mine;
  int64_t b, e;
  chunk_bounds(n, chunks, 0, &b, &e);
  try {
    fn(b, e);
  } catch (...) {
    mine = std::current_exception();
  }
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_.load() == 0; });
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace sw
