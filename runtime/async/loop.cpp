#include "async/loop.hpp"

#include "base/error.hpp"

namespace sw {

Loop::Loop() : shared_(std::make_shared<Shared>()) {
  if (uv_loop_init(&shared_->loop) != 0) throw_error(SW_ERROR_INTERNAL, "cannot initialise the libuv loop");
  shared_->wake.data = shared_.get();
  if (uv_async_init(&shared_->loop, &shared_->wake, &Loop::on_wake) != 0) {
    uv_loop_close(&shared_->loop);
    throw_error(SW_ERROR_INTERNAL, "cannot initialise the loop's wake-up handle");
  }
  thread_ = std::thread([s = shared_] {
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
  });
  thread_id_.store(thread_.get_id(), std::memory_order_release);
}

Loop::~Loop() { stop_and_join(); }

void Loop::on_wake(uv_async_t* handle) {
  auto* s = static_cast<Shared*>(handle->data);
  for (;;) {
    std::deque<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      batch.swap(s->tasks);
      if (batch.empty()) {
        // With the handle closed, uv_run returns once in-flight requests finish.
        if (s->stopping && !uv_is_closing(reinterpret_cast<uv_handle_t*>(handle)))
          uv_close(reinterpret_cast<uv_handle_t*>(handle), nullptr);
        return;
      }
    }
    for (auto& task : batch) task();
  }
}

bool Loop::post(std::function<void()> task) {
  // Sent under the lock so that the handle cannot be closed in between.
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->stopping) return false;
  shared_->tasks.push_back(std::move(task));
  uv_async_send(&shared_->wake);
  return true;
}

void Loop::stop_and_join() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopping = true;
    uv_async_send(&shared_->wake);
  }
  if (on_loop_thread()) {
    thread_.detach();
  } else {
    thread_.join();
    thread_id_.store(std::thread::id(), std::memory_order_release);
  }
}

}  // namespace sw
