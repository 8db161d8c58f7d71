#include "async/await.hpp"

#include <algorithm>
#include <chrono>

#include "base/spin.hpp"


namespace sw {

Await::Await(Ref<CompletionHost> host, sw_await_kind_t kind)
    : Object(ObjectKind::kAwait), host_(std::move(host)), kind_(kind) {}

sw_await_status_t Await::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

void Await::succeed(Ref<Object> result) { complete(SW_AWAIT_SUCCEEDED, std::move(result), {}); }

void Await::fail(Status error) { complete(SW_AWAIT_FAILED, nullptr, std::move(error)); }

void Await::complete(sw_await_status_t status, Ref<Object> result, Status error) {
  sw_await_callback_info_t cb{};
  bool fire_now = false, owe = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_ != SW_AWAIT_PENDING) return;
    status_ = status;
    result_ = std::move(result);
    error_ = std::move(error);
    terminal_.store(true, std::memory_order_release);
    if (has_callback_ && !callback_fired_) {
      if (callback_.mode == SW_CALLBACK_MODE_LOOP_THREAD) {
        callback_fired_ = true;
        cb = callback_;
        fire_now = true;
      } else {
        // Queued in the critical section that makes it owed, so that a
        // waiter firing it always finds the entry to drop.
        host_->owe_callback(Ref<Await>(this));
        owe = true;
      }
    }
  }
  done_.notify_all();
  if (fire_now) fire(cb);
  if (!owe) host_->signal_event();
}

// How long wait() spins before it blocks: a small move's completion comes
// within it (docs/threading.md), and a waiter still on its CPU is not woken.
constexpr auto kWaitSpin = std::chrono::microseconds(50);

Status Await::wait(int64_t timeout_ns) {
  Status result;
  if (timeout_ns != 0)
    spin_until([this] { return terminal_.load(std::memory_order_acquire); },
               timeout_ns > 0 ? std::min(kWaitSpin, std::chrono::duration_cast<std::chrono::microseconds>(
                                                        std::chrono::nanoseconds(timeout_ns)))
                              : kWaitSpin,
               true);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto terminal = [&] { return status_ != SW_AWAIT_PENDING; };
    if (timeout_ns < 0) {
      done_.wait(lock, terminal);
    } else if (!done_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), terminal)) {
      return Status::make(SW_ERROR_TIMEOUT, "wait timed out after " + std::to_string(timeout_ns) + " ns; the work is still pending");
    }
    result = status_ == SW_AWAIT_FAILED ? error_ : Status{};
  }
  // The runtime's owed list holds a reference to this await (and so to its
  // result) until process_events; once fired here, nothing is owed.
  if (fire_owed_callback()) host_->forget_owed(this);
  return result;
}

Ref<Object> Await::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (status_ == SW_AWAIT_PENDING) throw_error(SW_ERROR_STATE, "the await is still pending; wait for it first");
  if (status_ == SW_AWAIT_FAILED) error_.raise();
  return result_;
}

void Await::set_callback(const sw_await_callback_info_t& info) {
  bool terminal;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_callback_) throw_error(SW_ERROR_STATE, "the await already has a completion callback");
    has_callback_ = true;
    callback_ = info;
    terminal = status_ != SW_AWAIT_PENDING;
    if (terminal && info.mode == SW_CALLBACK_MODE_WAITING_THREAD) host_->owe_callback(Ref<Await>(this));
  }
  if (!terminal) return;
  if (info.mode == SW_CALLBACK_MODE_LOOP_THREAD) {
    Ref<Await> self(this);
    host_->on_loop([self] {
      sw_await_callback_info_t cb;
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        if (self->callback_fired_) return;
        self->callback_fired_ = true;
        cb = self->callback_;
      }
      self->fire(cb);
    });
  }
}

bool Await::fire_owed_callback() {
  sw_await_callback_info_t cb;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!has_callback_ || callback_fired_ || status_ == SW_AWAIT_PENDING ||
        callback_.mode != SW_CALLBACK_MODE_WAITING_THREAD)
      return false;
    callback_fired_ = true;
    cb = callback_;
  }
  fire(cb);
  return true;
}

void Await::fire(const sw_await_callback_info_t& cb) {
  // status_/error_ are immutable once terminal.
  cb.callback(cb.user_data, reinterpret_cast<sw_await_t*>(static_cast<Object*>(this)),
              status_ == SW_AWAIT_FAILED ? error_.code : SW_OK,
              status_ == SW_AWAIT_FAILED ? error_.message.c_str() : "");
}

}  // namespace sw
