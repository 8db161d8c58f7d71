// The runtime's libuv loop thread. The loop thread owns every uv handle and
// request; other threads reach it only through post(), which queues a task
// and wakes the loop with uv_async_send. Wake-ups coalesce, so each wake-up
// drains the whole queue.
#pragma once

#include <uv.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace sw {

class Loop {
 public:
  Loop();
  ~Loop();  // stop_and_join(), or detach when called on the loop thread
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Runs `task` on the loop thread. Thread-safe. Returns false (and drops the
  // task) once the loop is stopping.
  bool post(std::function<void()> task);
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire); }
  // Only on the loop thread.
  uv_loop_t* uv() { return &shared_->loop; }
  // Lets in-flight requests finish, closes the loop and joins the thread.
  void stop_and_join();

 private:
  struct Shared {
    uv_loop_t loop;
    uv_async_t wake;
    std::mutex mutex;
    std::deque<std::function<void()>> tasks;
    bool stopping = false;
  };
  static void on_wake(uv_async_t* handle);
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
  // Cleared once the thread is joined: a later thread may get the same id.
  std::atomic<std::thread::id> thread_id_;
};

}  // namespace sw
