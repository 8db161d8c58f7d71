// The runtime's libuv loop thread. The loop thread owns every uv handle and
// request; other threads reach it only through post(), which queues a task
// and wakes the loop through an eventfd the loop polls. Wake-ups coalesce:
// one write wakes the loop while it has not yet taken the queue, and each
// wake-up drains the whole queue, tasks the drained ones post included.
//
// The loop also owns an io_uring where the build and the kernel allow it:
// positional transfers submitted through it (the file carriers' O_DIRECT
// requests) reach the device from the loop thread itself and complete
// through an eventfd the loop polls, with no thread hand-off either way and
// no bound on requests in flight but the ring's size. STRIDEWEAVE_IO=threads
// turns it off (libuv's thread pool then serves every file request).
//
// Not uv_async_t: libuv before 1.45 makes the woken loop thread busy-wait
// (spinning, then sched_yield) until the sending thread has returned from
// its write(), which on two cores costs tens of microseconds whenever the
// sender is preempted, and our post() would have to send under its lock.
#pragma once

#include <uv.h>

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace sw {

// A positional read or write in flight on the loop's io_uring; `complete`
// runs on the loop thread with the bytes moved or -errno.
struct FileOp {
  void (*complete)(FileOp* op, ssize_t result) = nullptr;
  void* data = nullptr;
};

class Loop {
 public:
  Loop();
  ~Loop();  // stop_and_join(), or detach when called on the loop thread
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Runs `task` on the loop thread. Thread-safe. Returns false (and drops the
  // task) once the loop is stopping. Posted from a task the loop is running,
  // `task` runs later in the same turn, with no wake-up.
  bool post(std::function<void()> task);
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire); }
  // Only on the loop thread.
  uv_loop_t* uv() { return &shared_->loop; }
  // Lets in-flight requests finish, closes the loop and joins the thread.
  void stop_and_join();

  // Whether transfers go through io_uring (fixed once the loop is made).
  bool has_ring() const { return shared_->ring != nullptr; }
  // Submits a read (or write) of `length` bytes at `buffer` from (to)
  // `offset` of `fd` through the ring; `op` must outlive its completion.
  // 0, or -errno when the ring refused it (`complete` then never runs).
  // Loop thread only, and only with has_ring().
  int submit_file_op(bool write, int fd, void* buffer, size_t length, uint64_t offset, FileOp* op);
  // Requests submitted to the ring since the loop was made (loop thread only).
  uint64_t ring_requests() const { return ring_requests_; }

 private:
  struct Shared {
    ~Shared();
    uv_loop_t loop;
    uv_poll_t wake;    // polls wake_fd
    int wake_fd = -1;  // an eventfd; open until the last reference goes
    std::mutex mutex;
    std::deque<std::function<void()>> tasks;
    bool stopping = false;
    // Set by the post that writes wake_fd, cleared once on_wake finds the
    // queue empty: while set, a post needs no write of its own.
    bool wake_pending = false;
    // Tasks queued since the loop last took the queue: what it spins on.
    std::atomic<size_t> queued{0};
    struct Ring;  // io_uring and the poll of its eventfd; null without one
    Ring* ring = nullptr;
  };
  static void on_wake(uv_poll_t* handle, int status, int events);
  static void open_ring(Shared& s);
  static void free_ring(Shared::Ring* r);
  // Stopping: closes the ring's poll once nothing is in flight on it.
  static void close_ring(Shared& s);
  static void on_ring(uv_poll_t* handle, int status, int events);
  // Makes the loop's poll of wake_fd ready.
  static void wake(Shared& s);
  std::shared_ptr<Shared> shared_;
  uint64_t ring_requests_ = 0;
  std::thread thread_;
  // Cleared once the thread is joined: a later thread may get the same id.
  std::atomic<std::thread::id> thread_id_;
};

}  // namespace sw
