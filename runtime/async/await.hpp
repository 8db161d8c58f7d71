// Await state: terminal once, observed identically by every waiter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "async/completion_host.hpp"
#include "base/object.hpp"
#include "base/status.hpp"
#include "strideweave/strideweave.h"

namespace sw {

class Await : public Object {
 public:
  Await(Ref<CompletionHost> host, sw_await_kind_t kind);

  sw_await_kind_t kind() const { return kind_; }
  CompletionHost& host() const { return *host_; }
  sw_await_status_t status() const;

  // Terminal transitions; the first one wins. Called on the loop thread.
  void succeed(Ref<Object> result);
  void fail(Status error);

  // Blocks until terminal or the timeout (ns; negative = none). Returns the
  // await's status: ok, its error, or TIMEOUT.
  Status wait(int64_t timeout_ns);
  // The result after success (may be null); throws the error or STATE.
  Ref<Object> result() const;

  void set_callback(const sw_await_callback_info_t& info);
  // Fires a waiting-thread callback if one is owed. Returns whether it fired.
  bool fire_owed_callback();

 private:
  void complete(sw_await_status_t status, Ref<Object> result, Status error);
  void fire(const sw_await_callback_info_t& cb);

  Ref<CompletionHost> host_;
  sw_await_kind_t kind_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  sw_await_status_t status_ = SW_AWAIT_PENDING;
  // Set with status_ leaving PENDING: what wait() spins on before it blocks.
  std::atomic<bool> terminal_{false};
  Ref<Object> result_;
  Status error_;
  bool has_callback_ = false;
  bool callback_fired_ = false;
  sw_await_callback_info_t callback_{};
};

}  // namespace sw
