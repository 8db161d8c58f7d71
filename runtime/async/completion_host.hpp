// What an await needs of the runtime that completes it: a small interface,
// so that awaits (async) do not depend on the runtime (core) that owns them.
#pragma once

#include <functional>

#include "base/object.hpp"

namespace sw {

class Await;

class CompletionHost : public Object {
 public:
  explicit CompletionHost(ObjectKind kind) : Object(kind) {}

  // Records a waiting-thread callback owed by `await`, for the next wait or
  // process_events, and signals the event fd.
  virtual void owe_callback(Ref<Await> await) = 0;
  // Drops `await` from the owed list after its callback fired elsewhere.
  virtual void forget_owed(const Await* await) = 0;
  // Makes the event fd readable.
  virtual void signal_event() = 0;
  // Runs `task` on the loop thread (now, if already there).
  virtual void on_loop(std::function<void()> task) = 0;
  virtual bool on_loop_thread() const = 0;
};

}  // namespace sw
