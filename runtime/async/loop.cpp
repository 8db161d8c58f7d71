#include "async/loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "base/error.hpp"
#include "base/spin.hpp"

namespace sw {

namespace {
// How long the loop thread spins for the next task after draining its queue.
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

Loop::Shared::~Shared() {
  if (wake_fd >= 0) close(wake_fd);
}

Loop::Loop() : shared_(std::make_shared<Shared>()) {
  Shared& s = *shared_;
  s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wake_fd < 0) throw_error(SW_ERROR_INTERNAL, "cannot create the loop's wake-up eventfd");
  if (uv_loop_init(&s.loop) != 0) throw_error(SW_ERROR_INTERNAL, "cannot initialise the libuv loop");
  s.wake.data = &s;
  const bool polled = uv_poll_init(&s.loop, &s.wake, s.wake_fd) == 0;
  if (!polled || uv_poll_start(&s.wake, UV_READABLE, &Loop::on_wake) != 0) {
    if (polled) {
      uv_close(reinterpret_cast<uv_handle_t*>(&s.wake), nullptr);
      uv_run(&s.loop, UV_RUN_NOWAIT);
    }
    uv_loop_close(&s.loop);
    throw_error(SW_ERROR_INTERNAL, "cannot initialise the loop's wake-up handle");
  }
  thread_ = std::thread([s = shared_] {
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
  });
  thread_id_.store(thread_.get_id(), std::memory_order_release);
}

Loop::~Loop() { stop_and_join(); }

void Loop::wake(Shared& s) {
  const uint64_t one = 1;
  ssize_t n = write(s.wake_fd, &one, sizeof one);
  (void)n;  // EAGAIN only when the counter is saturated: still readable
}

void Loop::on_wake(uv_poll_t* handle, int, int) {
  auto* s = static_cast<Shared*>(handle->data);
  uint64_t count;
  ssize_t n = read(s->wake_fd, &count, sizeof count);
  (void)n;  // EAGAIN: a write whose tasks an earlier turn already ran
  bool spun = false;
  for (;;) {
    std::deque<std::function<void()>> batch;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      batch.swap(s->tasks);
      s->queued.store(0, std::memory_order_relaxed);
      if (batch.empty() && !spun && !s->stopping) {
        // A caller that has just been answered often asks again at once
        // (a wait, then the next request): spin a moment for it before
        // sleeping, with wake_pending still set so that its post needs no
        // write, and this thread, not halted, takes it at once. Bounded,
        // and yielding to any other thread of this CPU.
        lock.unlock();
        spun = true;
        spin_until([s] { return s->queued.load(std::memory_order_acquire) != 0; }, kSpin, true);
        continue;
      }
      if (batch.empty()) {
        // Until here wake_pending stays set, so tasks posted meanwhile (from
        // the tasks themselves too) are taken by this loop without a write.
        s->wake_pending = false;
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
  bool send;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->stopping) return false;
    shared_->tasks.push_back(std::move(task));
    shared_->queued.fetch_add(1, std::memory_order_release);
    send = !shared_->wake_pending;
    shared_->wake_pending = true;
  }
  // Outside the lock: the woken loop takes the queue at once. The eventfd
  // stays open as long as shared_, so a write after the loop stopped is harmless.
  if (send) wake(*shared_);
  return true;
}

void Loop::stop_and_join() {
  if (!thread_.joinable()) return;
  bool send;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopping = true;
    send = !shared_->wake_pending;
    shared_->wake_pending = true;
  }
  if (send) wake(*shared_);
  if (on_loop_thread()) {
    thread_.detach();
  } else {
    thread_.join();
    thread_id_.store(std::thread::id(), std::memory_order_release);
  }
}

}  // namespace sw
