#include "core/runtime.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

#include "async/await.hpp"
#include "async/loop.hpp"
#include "async/worker_pool.hpp"
#include "base/error.hpp"

namespace sw {

Runtime::Runtime(const sw_runtime_desc_t& desc) : CompletionHost(ObjectKind::kRuntime) {
  uint32_t threads = desc.compute_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  compute_ = std::make_unique<ThreadPool>(threads);
  const size_t limit = desc.pool_limit_bytes == SIZE_MAX ? (size_t{1} << 30) : desc.pool_limit_bytes;
  pool_ = std::make_shared<BufferPool>(limit, desc.allocator);
  log_ = desc.log;
  log_user_data_ = desc.log_user_data;
  log_level_ = desc.log_level;
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) throw_error(SW_ERROR_IO, "cannot create the runtime's event fd");
  workers_ = std::make_unique<WorkerPool>(desc.worker_threads ? desc.worker_threads : 2);
  file_io_ = std::make_unique<IoQueue>(IoQueue::default_slots());
  loop_ = std::make_unique<Loop>();
}

IoQueue& Runtime::file_io(uint64_t device, uint32_t depth) {
  auto& queue = device_io_[device];
  // At least eight: a device measured fastest at fewer in flight still
  // takes one transfer's requests and the next ones' first, so that
  // transfers issued together overlap instead of queueing behind each other.
  // The expert feed-forward issues a missing expert's gate, up and down
  // tiles at once (two requests each for a 1.6 MB Q4_K tile in 1 MiB
  // chunks); with four slots its down tile's reads waited for the gate's to
  // land, and with two the decoder ran 5-8 % slower. The carrier's own
  // requests in flight stay the measured depth. Through io_uring a device's
  // O_DIRECT requests take no thread; through libuv's pool, more than its
  // threads would only queue inside libuv.
  const uint32_t slots = std::max<uint32_t>(depth, 8);
  if (!queue) queue = std::make_unique<IoQueue>(loop_->has_ring() ? slots : std::min(slots, file_io_->slots()));
  return *queue;
}

Runtime::~Runtime() {
  // No operation can be pending here: each one holds a reference.
  loop_.reset();
  workers_.reset();
  if (event_fd_ >= 0) close(event_fd_);
}

void Runtime::log(sw_log_level_t level, const std::string& message) const {
  if (log_ && level >= log_level_) log_(log_user_data_, level, message.c_str());
}

void Runtime::retain_external() {
  external_refs_.fetch_add(1, std::memory_order_relaxed);
  retain();
}

void Runtime::release_external() {
  if (external_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) shutdown();
  release();
}

void Runtime::submit(std::shared_ptr<Operation> op) {
  std::vector<std::shared_ptr<Operation>> ops{std::move(op)};
  submit(std::move(ops));
}

void Runtime::submit(std::vector<std::shared_ptr<Operation>> ops) {
  const size_t n = ops.size();
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (is_shut_down()) throw_error(SW_ERROR_CANCELLED, "the runtime has been shut down");
    pending_count_ += n;
  }
  Ref<Runtime> self(this);
  const bool posted = loop_->post([self, ops = std::move(ops)] {
    for (const auto& op : ops) self->pending_.insert(op);
    for (const auto& op : ops) op->start();
    for (const auto& op : ops) op->started();
  });
  if (!posted) {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_count_ -= n;
    throw_error(SW_ERROR_CANCELLED, "the runtime has been shut down");
  }
}

void Runtime::finished(Operation* op) {
  std::shared_ptr<Operation> keep;
  for (auto it = pending_.begin(); it != pending_.end(); ++it)
    if (it->get() == op) {
      keep = *it;
      pending_.erase(it);
      break;
    }
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (keep && --pending_count_ == 0) pending_empty_.notify_all();
}

void Runtime::run_on_worker(std::function<void()> work, std::function<void(Status)> done) {
  Ref<Runtime> self(this);
  workers_->submit([self, work = std::move(work), done = std::move(done)]() mutable {
    Status st = capture(work);
    // What `work` holds goes before its completion is posted: once the loop
    // completes the operation, the caller may drop what it holds at once,
    // and the last references (a TiledEvictable, a device) must not then
    // fall to this worker.
    work = nullptr;
    auto finish = [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); };
    if (!self->loop_->post(std::move(finish))) {
      // The loop only stops after every operation finished, so nothing is waiting.
    }
  });
}

void Runtime::run_copy(size_t bytes, std::function<void()> work, std::function<void(Status)> done) {
  if (bytes > kInlineCopyBytes || !loop_->on_loop_thread()) return run_on_worker(std::move(work), std::move(done));
  Status st = capture(work);
  // Never `done` here: the issuer's state machine expects it later.
  auto finish = [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); };
  if (!loop_->post(std::move(finish))) {
    // As run_on_worker: the loop only stops after every operation finished.
  }
}

void Runtime::on_loop(std::function<void()> task) {
  if (loop_->on_loop_thread()) {
    task();
    return;
  }
  // After shutdown the loop is gone: run on the caller instead.
  auto copy = task;
  if (!loop_->post(std::move(task))) copy();
}

bool Runtime::on_loop_thread() const { return loop_->on_loop_thread(); }

void Runtime::shutdown() {
  std::lock_guard<std::mutex> guard(shutdown_mutex_);
  if (shut_down_.exchange(true)) return;
  // Cancel what is pending; each operation finishes once its in-flight
  // requests return, restoring its carriers.
  auto cancel_all = [this] {
    std::vector<std::shared_ptr<Operation>> ops(pending_.begin(), pending_.end());
    for (auto& op : ops) op->cancel();
  };
  if (loop_->on_loop_thread()) {
    // Released from a loop-thread callback: cannot block here. The loop stops
    // when the runtime is destroyed.
    cancel_all();
    return;
  }
  Ref<Runtime> self(this);
  loop_->post([self, cancel_all] { cancel_all(); });
  // A transfer a test holds back would keep its operation pending forever.
  release_hold();
  {
    std::unique_lock<std::mutex> lock(pending_mutex_);
    pending_empty_.wait(lock, [&] { return pending_count_ == 0; });
  }
  // Fire the loop-thread callbacks still queued, then stop the loop.
  std::promise<void> drained;
  if (loop_->post([&] { drained.set_value(); })) drained.get_future().wait();
  loop_->stop_and_join();
  process_events();
}

void Runtime::owe_callback(Ref<Await> await) {
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    owed_.push_back(std::move(await));
  }
  signal_event();
}

void Runtime::forget_owed(const Await* await) {
  Ref<Await> drop;  // released after the lock
  std::lock_guard<std::mutex> lock(events_mutex_);
  for (auto it = owed_.begin(); it != owed_.end(); ++it)
    if (it->get() == await) {
      drop = std::move(*it);
      owed_.erase(it);
      return;
    }
}

void Runtime::signal_event() {
  const uint64_t one = 1;
  ssize_t n = write(event_fd_, &one, sizeof one);
  (void)n;  // EAGAIN only when the counter is saturated: still readable
}

size_t Runtime::process_events() {
  uint64_t counter;
  ssize_t n = read(event_fd_, &counter, sizeof counter);
  (void)n;
  std::deque<Ref<Await>> owed;
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    owed.swap(owed_);
  }
  size_t fired = 0;
  for (auto& a : owed) fired += a->fire_owed_callback() ? 1 : 0;
  return fired;
}

void Runtime::arm_fault(FaultKind kind, uint64_t nth) {
  std::lock_guard<std::mutex> lock(fault_mutex_);
  const int k = static_cast<int>(kind);
  fault_countdown_[k] = nth;
  fault_reached_[k] = 0;
  const uint32_t bit = 1u << k;
  if (nth)
    fault_armed_.fetch_or(bit, std::memory_order_relaxed);
  else
    fault_armed_.fetch_and(~bit, std::memory_order_relaxed);
}

void Runtime::fault_counts(FaultKind kind, uint64_t* reached, uint64_t* injected) {
  std::lock_guard<std::mutex> lock(fault_mutex_);
  *reached = fault_reached_[static_cast<int>(kind)];
  *injected = fault_injected_[static_cast<int>(kind)];
}

bool Runtime::fault_fires(FaultKind kind) {
  if (fault_armed_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(fault_mutex_);
  const int k = static_cast<int>(kind);
  uint64_t& c = fault_countdown_[k];
  if (c == 0) return false;
  ++fault_reached_[k];
  if (--c != 0) return false;
  ++fault_injected_[k];
  fault_armed_.fetch_and(~(1u << k), std::memory_order_relaxed);
  return true;
}

void Runtime::check_armed_fault(FaultKind kind, const char* what) {
  if (!fault_fires(kind)) return;
  switch (kind) {
    case FaultKind::kAllocation: throw_error(SW_ERROR_OUT_OF_MEMORY, std::string("injected allocation failure: ") + what);
    case FaultKind::kRead: throw_error(SW_ERROR_IO, std::string("injected read failure: ") + what);
    case FaultKind::kWrite: throw_error(SW_ERROR_IO, std::string("injected write failure: ") + what);
    case FaultKind::kDecompress: throw_error(SW_ERROR_DATA_CORRUPT, std::string("injected decompression failure: ") + what);
    case FaultKind::kDeviceAllocation:
      throw_error(SW_ERROR_OUT_OF_MEMORY, std::string("injected device allocation failure: ") + what);
    case FaultKind::kDeviceCopy: throw_error(SW_ERROR_IO, std::string("injected device copy failure: ") + what);
    case FaultKind::kDeviceLost: throw_error(SW_ERROR_DEVICE_LOST, std::string("injected device loss: ") + what);
    case FaultKind::kDirectIo: return;  // a refusal, handled where it fires
    case FaultKind::kTileWork:
      throw_error(SW_ERROR_OUT_OF_MEMORY, std::string("injected tile work failure: ") + what);
  }
}

void Runtime::arm_hold(FaultKind kind, uint64_t nth) {
  std::lock_guard<std::mutex> lock(hold_mutex_);
  hold_countdown_[static_cast<int>(kind)] = nth;
}

std::function<void(Status)> Runtime::hold_point(FaultKind kind, std::function<void(Status)> done) {
  {
    std::lock_guard<std::mutex> lock(hold_mutex_);
    uint64_t& c = hold_countdown_[static_cast<int>(kind)];
    if (c == 0 || --c != 0) return done;
  }
  Ref<Runtime> self(this);
  return [self, done = std::move(done)](Status st) mutable {
    std::lock_guard<std::mutex> lock(self->hold_mutex_);
    self->held_done_ = std::move(done);
    self->held_status_ = std::move(st);
    self->hold_cv_.notify_all();
  };
}

void Runtime::hold_here(FaultKind kind) {
  {
    std::lock_guard<std::mutex> lock(hold_mutex_);
    uint64_t& c = hold_countdown_[static_cast<int>(kind)];
    if (c == 0 || --c != 0) return;
  }
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  {
    std::lock_guard<std::mutex> lock(hold_mutex_);
    held_done_ = [gate](Status) {
      std::lock_guard<std::mutex> g(gate->mutex);
      gate->open = true;
      gate->cv.notify_all();
    };
    held_status_ = Status{};
    hold_cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(gate->mutex);
  gate->cv.wait(lock, [&] { return gate->open; });
}

bool Runtime::wait_held(int64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(hold_mutex_);
  auto held = [&] { return static_cast<bool>(held_done_); };
  if (timeout_ns < 0) {
    hold_cv_.wait(lock, held);
    return true;
  }
  return hold_cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), held);
}

bool Runtime::release_hold() {
  std::function<void(Status)> done;
  Status st;
  {
    std::lock_guard<std::mutex> lock(hold_mutex_);
    if (!held_done_) return false;
    done = std::move(held_done_);
    held_done_ = nullptr;
    st = std::move(held_status_);
  }
  auto run = [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); };
  auto copy = run;
  if (!loop_->post(std::move(run))) copy();
  return true;
}

}  // namespace sw
