// The runtime: compute threads, the host buffer pool, the libuv loop thread,
// background workers, fault injection and the host's hooks.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "async/completion_host.hpp"
#include "async/io_queue.hpp"
#include "base/object.hpp"
#include "base/status.hpp"
#include "base/thread_pool.hpp"
#include "core/buffer_pool.hpp"

namespace sw {

class Loop;
class WorkerPool;
class Await;

enum class FaultKind {
  kAllocation = 1,
  kRead = 2,
  kWrite = 3,
  kDecompress = 4,
  kDeviceAllocation = 5,
  kDeviceCopy = 6,
  kDeviceLost = 7,
  kDirectIo = 8,
  kTileWork = 9,  // one compute job of a tiled request on its tiles
};
constexpr int kFaultKinds = 10;  // one past the largest FaultKind

// Asynchronous work tracked by the runtime from submission to its terminal
// state. start() and cancel() run on the loop thread.
class Operation : public std::enable_shared_from_this<Operation> {
 public:
  virtual ~Operation() = default;
  virtual void start() = 0;
  // After start() of every operation submitted with it: the work an
  // operation can begin at once, on what is already there, goes here, so
  // that one submission's operations all issue their transfers before any
  // of them takes the compute threads (on a machine of two cores, work
  // started first delays the loop thread's next start by a time slice).
  virtual void started() {}
  // Shutdown: stop issuing requests and finish as CANCELLED once nothing is
  // in flight, restoring every claimed carrier.
  virtual void cancel() = 0;
};

class Runtime final : public CompletionHost {
 public:
  explicit Runtime(const sw_runtime_desc_t& desc);
  ~Runtime() override;

  ThreadPool& compute() { return *compute_; }
  const std::shared_ptr<BufferPool>& pool() const { return pool_; }
  WorkerPool& workers() { return *workers_; }
  Loop& loop() { return *loop_; }
  // The file request slots (loop thread only): the shared ones, or those
  // of one device whose measured best is `depth` requests in flight (that
  // many and at least eight; at most the shared count unless the loop has
  // io_uring: libuv's thread pool serves both).
  IoQueue& file_io() { return *file_io_; }
  IoQueue& file_io(uint64_t device, uint32_t depth);
  // Calls `f` on every queue, the shared one first (loop thread only).
  template <class F>
  void for_each_file_io(F&& f) const {
    f(*file_io_);
    for (const auto& [device, queue] : device_io_) f(*queue);
  }
  void log(sw_log_level_t level, const std::string& message) const;

  // Handle references held by the host. When the last one goes, the runtime
  // shuts down; internal references (carriers, awaits) keep the memory alive.
  void retain_external();
  void release_external();

  // Registers `op` and starts it on the loop thread. CANCELLED after shutdown.
  void submit(std::shared_ptr<Operation> op);
  // Several operations started in one turn of the loop, in order: a
  // failure one of them meets at its start reaches the others after all of
  // them started.
  void submit(std::vector<std::shared_ptr<Operation>> ops);
  // Called by an operation (on the loop thread) when it is terminal.
  void finished(Operation* op);
  // Runs `work` on a worker, then `done` with its status on the loop thread.
  void run_on_worker(std::function<void()> work, std::function<void(Status)> done);
  // The same for `work` that copies `bytes` bytes of host memory: issued on
  // the loop thread and small enough (kInlineCopyBytes) to cost less than
  // the hand-off to a worker and back, it runs there at once, and `done`
  // follows as a task of its own (in the same turn when the issuer is a
  // posted task, Loop::post).
  void run_copy(size_t bytes, std::function<void()> work, std::function<void(Status)> done);
  static constexpr size_t kInlineCopyBytes = size_t{64} << 10;
  // Runs `task` on the loop thread (now, if already there).
  void on_loop(std::function<void()> task) override;
  bool on_loop_thread() const override;
  bool is_shut_down() const { return shut_down_.load(std::memory_order_acquire); }
  void shutdown();

  // Completion events for waiting-thread callbacks and the pollable fd.
  void owe_callback(Ref<Await> await) override;
  void forget_owed(const Await* await) override;
  void signal_event() override;
  int event_fd() const { return event_fd_; }
  size_t process_events();

  // Fault injection: throws the fault's error if this operation is the armed
  // one. Costs one relaxed load while no kind is armed.
  void arm_fault(FaultKind kind, uint64_t nth);
  void check_fault(FaultKind kind, const char* what) {
    if (fault_armed_.load(std::memory_order_relaxed) != 0) check_armed_fault(kind, what);
  }
  // Operations of `kind` reached since it was last armed (counted while it
  // is armed), and faults of `kind` injected since the runtime was made.
  void fault_counts(FaultKind kind, uint64_t* reached, uint64_t* injected);
  // Whether this operation is the armed one, for faults that are not errors
  // (kDirectIo: the caller acts as if O_DIRECT were refused).
  bool fault_fires(FaultKind kind);

  // Testing holds: the completion of the nth asynchronous storage transfer
  // of `kind` (kRead or kWrite) is kept back until release_hold(), so a test
  // can act while that transfer is deterministically in flight.
  void arm_hold(FaultKind kind, uint64_t nth);
  // `done` as is, or wrapped to be held when this transfer is the armed one.
  std::function<void(Status)> hold_point(FaultKind kind, std::function<void(Status)> done);
  // A hold of work rather than of a completion (kTileWork): when this is
  // the armed occurrence, blocks the calling thread, as a held transfer
  // would be, until release_hold(); returns at once otherwise.
  void hold_here(FaultKind kind);
  // Blocks until a held completion has arrived; false on timeout (ns, negative: none).
  bool wait_held(int64_t timeout_ns);
  // Lets the held completion run on the loop thread; false when none is held.
  bool release_hold();

 private:
  std::unique_ptr<ThreadPool> compute_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<IoQueue> file_io_;
  std::map<uint64_t, std::unique_ptr<IoQueue>> device_io_;  // loop thread only
  sw_log_fn log_ = nullptr;
  void* log_user_data_ = nullptr;
  sw_log_level_t log_level_ = SW_LOG_WARNING;

  std::atomic<uint32_t> external_refs_{1};
  std::atomic<bool> shut_down_{false};
  std::mutex shutdown_mutex_;
  std::unordered_set<std::shared_ptr<Operation>> pending_;  // loop thread only
  std::mutex pending_mutex_;
  std::condition_variable pending_empty_;
  size_t pending_count_ = 0;

  int event_fd_ = -1;
  std::mutex events_mutex_;
  std::deque<Ref<Await>> owed_;

  void check_armed_fault(FaultKind kind, const char* what);
  std::atomic<uint32_t> fault_armed_{0};  // bit k: kind k is armed
  std::mutex fault_mutex_;
  uint64_t fault_countdown_[kFaultKinds] = {};
  uint64_t fault_reached_[kFaultKinds] = {};
  uint64_t fault_injected_[kFaultKinds] = {};

  std::mutex hold_mutex_;
  std::condition_variable hold_cv_;
  uint64_t hold_countdown_[kFaultKinds] = {};
  std::function<void(Status)> held_done_;  // set once the held completion arrived
  Status held_status_;
};

}  // namespace sw
