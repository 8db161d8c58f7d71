#include "async/worker_pool.hpp"

namespace sw {

WorkerPool::WorkerPool(uint32_t threads) : shared_(std::make_shared<Shared>()) {
  for (uint32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([s = shared_] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(s->mutex);
          s->wake.wait(lock, [&] { return s->stop || !s->jobs.empty(); });
          if (s->jobs.empty()) return;
          job = std::move(s->jobs.front());
          s->jobs.pop_front();
        }
        job();
      }
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->wake.notify_all();
  for (auto& t : threads_) {
    if (t.get_id() == std::this_thread::get_id())
      t.detach();  // the last reference dropped inside a job: let the thread finish on its own
    else
      t.join();
  }
}

void WorkerPool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->jobs.push_back(std::move(job));
  }
  shared_->wake.notify_one();
}

}  // namespace sw
