#include "async/loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifdef SW_HAVE_URING
#include <liburing.h>
#endif

#include "base/error.hpp"
#include "base/spin.hpp"

namespace sw {

namespace {
// How long the loop thread spins for the next task after draining its queue.
constexpr auto kSpin = std::chrono::microseconds(50);

// Submission entries of the ring: more than the requests in flight that
// any device's slots allow (IoQueue), so a submission never waits for room.
constexpr unsigned kRingEntries = 256;
}  // namespace

#ifdef SW_HAVE_URING
struct Loop::Shared::Ring {
  io_uring ring;
  int event_fd = -1;  // registered with the ring: readable when completions wait
  uv_poll_t poll;
  size_t in_flight = 0;
  bool closing = false;
};
#else
struct Loop::Shared::Ring {};  // never made without liburing
#endif

// The ring's resources, once its poll handle is closed (or never opened).
void Loop::free_ring(Shared::Ring* r) {
#ifdef SW_HAVE_URING
  io_uring_queue_exit(&r->ring);
  if (r->event_fd >= 0) close(r->event_fd);
#endif
  delete r;
}

Loop::Shared::~Shared() {
  if (wake_fd >= 0) close(wake_fd);
}

void Loop::open_ring(Shared& s) {
#ifdef SW_HAVE_URING
  const char* mode = std::getenv("STRIDEWEAVE_IO");
  if (mode && std::strcmp(mode, "threads") == 0) return;
  auto* r = new Shared::Ring;
  if (io_uring_queue_init(kRingEntries, &r->ring, 0) != 0) {
    delete r;  // a kernel without io_uring, or one that refuses it
    return;
  }
  r->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->event_fd < 0 || io_uring_register_eventfd(&r->ring, r->event_fd) != 0 ||
      uv_poll_init(&s.loop, &r->poll, r->event_fd) != 0) {
    free_ring(r);
    return;
  }
  r->poll.data = &s;
  if (uv_poll_start(&r->poll, UV_READABLE, &Loop::on_ring) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&r->poll), nullptr);
    uv_run(&s.loop, UV_RUN_NOWAIT);
    free_ring(r);
    return;
  }
  // Idle, the poll does not keep the loop alive; it does while requests are
  // in flight (see submit_file_op and on_ring).
  uv_unref(reinterpret_cast<uv_handle_t*>(&r->poll));
  s.ring = r;
#else
  (void)s;
#endif
}

void Loop::close_ring(Shared& s) {
#ifdef SW_HAVE_URING
  Shared::Ring* r = s.ring;
  if (!r || r->in_flight > 0 || uv_is_closing(reinterpret_cast<uv_handle_t*>(&r->poll))) {
    if (r) r->closing = true;  // on_ring closes it after the last completion
    return;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&r->poll), [](uv_handle_t* h) {
    auto* shared = static_cast<Shared*>(h->data);
    free_ring(std::exchange(shared->ring, nullptr));
  });
#else
  (void)s;
#endif
}

int Loop::submit_file_op(bool write, int fd, void* buffer, size_t length, uint64_t offset, FileOp* op) {
#ifdef SW_HAVE_URING
  Shared::Ring* r = shared_->ring;
  io_uring_sqe* sqe = io_uring_get_sqe(&r->ring);
  if (!sqe) return -EBUSY;  // more in flight than kRingEntries: the slots never allow it
  const auto n = static_cast<unsigned>(length);
  if (write)
    io_uring_prep_write(sqe, fd, buffer, n, offset);
  else
    io_uring_prep_read(sqe, fd, buffer, n, offset);
  io_uring_sqe_set_data(sqe, op);
  int rc;
  do {
    rc = io_uring_submit(&r->ring);
  } while (rc == -EINTR);
  if (rc < 0) {
    // The entry stays queued and goes with the next submission: made a
    // no-op that names no request, whose completion on_ring skips.
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    return rc;
  }
  if (r->in_flight++ == 0) uv_ref(reinterpret_cast<uv_handle_t*>(&r->poll));
  ++ring_requests_;
  return 0;
#else
  (void)write, (void)fd, (void)buffer, (void)length, (void)offset, (void)op;
  return -ENOSYS;
#endif
}

void Loop::on_ring(uv_poll_t* handle, int, int) {
#ifdef SW_HAVE_URING
  auto* s = static_cast<Shared*>(handle->data);
  Shared::Ring* r = s->ring;
  uint64_t count;
  ssize_t n = read(r->event_fd, &count, sizeof count);
  (void)n;  // EAGAIN: completions an earlier turn already took
  // Completions arriving while these run signal the eventfd again.
  io_uring_cqe* cqe;
  while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
    auto* op = static_cast<FileOp*>(io_uring_cqe_get_data(cqe));
    const ssize_t result = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    if (!op) continue;  // a refused submission's entry, sent later as a no-op
    if (--r->in_flight == 0) uv_unref(reinterpret_cast<uv_handle_t*>(&r->poll));
    op->complete(op, result);  // may submit again
  }
  if (r->closing && r->in_flight == 0) close_ring(*s);
#else
  (void)handle;
#endif
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
  open_ring(s);
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
        if (s->stopping && !uv_is_closing(reinterpret_cast<uv_handle_t*>(handle))) {
          uv_close(reinterpret_cast<uv_handle_t*>(handle), nullptr);
          close_ring(*s);
        }
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
