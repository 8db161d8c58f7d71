// move_async: the values of a tensor into another carrier, asynchronously.
// Phases run on the loop thread: (allocate) -> (backup) -> read source ->
// (gather) -> write destination -> commit. Failure or cancellation restores
// the destination and releases both claims.
#include "ops/move.hpp"

#include <cstring>

#include "async/loop.hpp"
#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/buffer_pool.hpp"
#include "core/dtype.hpp"
#include "core/iteration.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw::ops {
namespace {

class MoveNode final : public Node {
 public:
  const char* name() const override { return "move"; }
  // The cotangent arrives on the destination side; the source side is CPU
  // (the only compute carrier a gradient can come back to here).
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override { return {g}; }
};

// Carriers whose storage is plain host memory, which a failed move can simply
// leave as it is (the destination is rewritten whole before it commits).
bool is_host_memory(const Carrier& c) { return c.host_data() != nullptr || c.size() == 0; }

class MoveOp final : public Operation {
 public:
  MoveOp(Ref<Await> await, Ref<Tensor> src, Ref<Carrier> dst, bool record)
      : await_(std::move(await)), src_(std::move(src)), dst_(std::move(dst)), record_(record) {
    n_ = static_cast<size_t>(src_->numel());
    allocate_ = dst_->size() == 0 && n_ > 0;
  }

  void start() override {
    if (cancelled_) return finish(cancelled_status());
    Status st = capture([&] {
      if (allocate_) {
        dst_->allocate(n_, false);  // every slot is written next
        allocated_ = true;
      }
    });
    if (!st.ok()) return finish(st);
    if (n_ == 0) return commit();
    // Keep what a non-memory destination held, so a failed write can be undone.
    if (!allocated_ && !is_host_memory(*dst_)) {
      backup_ = host_buffer(n_);
      return io(false, [this] { read_source(); }, [&](IoDone d) { dst_->read_async(0, n_, backup_.data(), std::move(d)); });
    }
    read_source();
  }

  void cancel() override {
    if (completed_) return;
    cancelled_ = true;
    if (!in_flight_) finish(cancelled_status());
  }

 private:
  static Status cancelled_status() { return Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the move completed"); }

  // Runs one asynchronous step; `next` continues on success.
  template <typename Issue>
  void io(bool wrote_destination, std::function<void()> next, Issue issue) {
    in_flight_ = true;
    auto self = std::static_pointer_cast<MoveOp>(shared_from_this());
    issue([self, next = std::move(next), wrote_destination](Status st) {
      self->in_flight_ = false;
      if (wrote_destination) self->dst_dirty_ = true;
      if (!st.ok()) return self->finish(st);
      if (self->cancelled_) return self->finish(cancelled_status());
      next();
    });
  }

  void read_source() {
    const Carrier& sc = src_->carrier();
    const bool dense = src_->layout().is_dense();
    if (dense && sc.host_data()) {
      // Claimed source memory is stable: write straight from it.
      return write_destination(src_->host_base());
    }
    if (dense) {
      // A freshly allocated memory destination can take the read directly.
      const bool direct = allocated_ && dst_->host_data();
      std::byte* to = direct ? dst_->host_data() : new_staging();
      return io(direct, [this, direct, to] { direct ? commit() : write_destination(to); }, [&](IoDone d) {
        src_->carrier().read_async(static_cast<size_t>(src_->offset()), n_, to, std::move(d));
      });
    }
    // Strided source: gather densely, from the covering slot range.
    new_staging();
    if (sc.host_data()) return gather(sc.host_data(), 0);
    const int64_t lo = src_->offset() + src_->layout().min_index();
    const size_t span = static_cast<size_t>(src_->layout().max_index() - src_->layout().min_index() + 1);
    raw_ = host_buffer(span);
    io(false, [this, lo] { gather(raw_.data(), lo); }, [&](IoDone d) {
      src_->carrier().read_async(static_cast<size_t>(lo), span, raw_.data(), std::move(d));
    });
  }

  HostBuffer host_buffer(size_t slots) const {
    return HostBuffer(dst_->runtime().pool(), src_->carrier().bytes_of(slots));
  }

  std::byte* new_staging() {
    staging_ = host_buffer(n_);
    return staging_.data();
  }

  // Copies the source's logical values, found in `raw` whose slot 0 is the
  // source carrier's slot `base`, densely into the staging buffer.
  void gather(const std::byte* raw, int64_t base) {
    auto self = std::static_pointer_cast<MoveOp>(shared_from_this());
    in_flight_ = true;
    dst_->runtime().run_on_worker(
        [self, raw, base] {
          // In storage units: a quantized source moves whole blocks.
          const Tensor::Units u = self->src_->units();
          const int64_t block = dtype_block_elements(self->src_->dtype());
          gather_dense(raw, u.offset - base / block, *u.layout, u.unit_bytes, self->staging_.data());
        },
        [self](Status st) {
          self->in_flight_ = false;
          if (!st.ok()) return self->finish(st);
          if (self->cancelled_) return self->finish(cancelled_status());
          self->write_destination(self->staging_.data());
        });
  }

  void write_destination(const std::byte* from) {
    io(true, [this] { commit(); }, [&](IoDone d) { dst_->write_async(0, n_, from, std::move(d)); });
  }

  void commit() {
    Status st = capture([&] {
      auto result = Tensor::create(dst_, 0, Layout::dense(src_->shape()));
      dst_->bump_version();
      dst_->unclaim();
      src_->carrier().unclaim();
      src_->carrier().dispose();
      if (record_) {
        auto node = make_ref<MoveNode>();
        node->connect({src_.get()});
        attach(result, node);
      }
      result_ = result;
    });
    if (!st.ok()) return finish(st);
    done(Status{});
  }

  void finish(Status error) {
    // Undo: the destination goes back to what it held, both claims end.
    if (allocated_) {
      Status u = capture([&] { dst_->deallocate(); });
      if (!u.ok()) dst_->runtime().log(SW_LOG_ERROR, "move: cannot undo the destination allocation: " + u.message);
    } else if (dst_dirty_ && backup_.data()) {
      Status u = capture([&] { dst_->write_slots(0, n_, backup_.data()); });
      if (!u.ok()) dst_->runtime().log(SW_LOG_ERROR, "move: cannot restore the destination: " + u.message);
    }
    capture([&] { dst_->unclaim(); });
    capture([&] { src_->carrier().unclaim(); });
    done(std::move(error));
  }

  void done(Status error) {
    // A loop-thread callback fired by the await may release the last runtime
    // reference, which cancels what is pending, this operation included:
    // from here on there is nothing left to cancel or undo.
    completed_ = true;
    Runtime& rt = dst_->runtime();
    auto keep = shared_from_this();
    if (error.ok())
      await_->succeed(result_);
    else
      await_->fail(std::move(error));
    // Drop buffers before the runtime forgets the operation.
    staging_.reset();
    raw_.reset();
    backup_.reset();
    rt.finished(this);
  }

  Ref<Await> await_;
  Ref<Tensor> src_;
  Ref<Carrier> dst_;
  bool record_;
  size_t n_ = 0;
  bool allocate_ = false, allocated_ = false, dst_dirty_ = false;
  bool in_flight_ = false, cancelled_ = false, completed_ = false;
  HostBuffer staging_, raw_, backup_;
  Ref<Tensor> result_;
};

}  // namespace

Ref<Await> move_async(const Ref<Tensor>& tensor, const Ref<Carrier>& destination) {
  Carrier& src = tensor->carrier();
  Carrier& dst = *destination;
  if (&src == &dst) value_error("move_async: the destination is the tensor's own carrier");
  if (dst.is_composite())
    type_error(std::string("move_async: a ") + dst.kind_name() + " cannot be a move destination; use scatter");
  if (src.dtype() != dst.dtype())
    type_error(std::string("move_async: the destination's dtype ") + dtype_name(dst.dtype()) +
               " differs from the tensor's " + dtype_name(src.dtype()));
  // A read-only source (a weights file) may be moved out of: the move only
  // reads it, and disposing it closes the file without touching it.
  src.check_live("move_async (source)");
  if (src.is_owned()) src.check_mutable("move_async (source)");
  dst.check_mutable("move_async (destination)");
  const size_t n = static_cast<size_t>(tensor->numel());
  if (dst.size() < n && !dst.is_allocatable())
    value_error("move_async: the destination holds " + std::to_string(dst.size()) + " slots, the tensor needs " +
                std::to_string(n) + "; it cannot be allocated to fit (it is not empty, or its memory belongs to the host)");
  if (&src.runtime() != &dst.runtime()) value_error("move_async: the carriers belong to different runtimes");
  Runtime& rt = src.runtime();
  if (rt.is_shut_down()) throw_error(SW_ERROR_CANCELLED, "move_async: the runtime has been shut down");
  src.claim("a pending move");
  try {
    dst.claim("a pending move");
  } catch (...) {
    src.unclaim();
    throw;
  }
  auto await = make_ref<Await>(src.runtime_ref(), SW_AWAIT_MOVE);
  const bool record = grad_enabled() && tensor->requires_grad();
  try {
    rt.submit(std::make_shared<MoveOp>(await, tensor, destination, record));
  } catch (...) {
    dst.unclaim();
    src.unclaim();
    throw;
  }
  return await;
}

}  // namespace sw::ops
