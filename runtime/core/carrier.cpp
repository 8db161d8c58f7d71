#include "core/carrier.hpp"

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace sw {

Carrier::Carrier(Ref<Runtime> runtime, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t size)
    : Object(ObjectKind::kCarrier), runtime_(std::move(runtime)), kind_(kind), dtype_(dtype), size_(size) {
  check_whole_blocks(dtype, size, "carrier size");
}

size_t Carrier::bytes_of(size_t count) const { return dtype_bytes(dtype_, count); }

const char* Carrier::kind_name() const {
  switch (kind_) {
    case SW_CARRIER_CPU: return "CPU";
    case SW_CARRIER_HOST: return "Host";
    case SW_CARRIER_FILE: return "File";
    case SW_CARRIER_ZSTD: return "Zstd";
    case SW_CARRIER_VULKAN: return "Vulkan";
    case SW_CARRIER_TILED: return "TiledEvictable";
    case SW_CARRIER_REMOTE: return "Remote";
    default: return "unknown";
  }
}

bool Carrier::is_owned() const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return !owner_.empty();
}

void Carrier::check_live(const char* what) const {
  if (is_disposed()) state_error(std::string(what) + ": the " + kind_name() + " carrier has been released");
}

void Carrier::check_mutable(const char* what) const {
  check_live(what);
  if (is_read_only()) state_error(std::string(what) + ": the " + kind_name() + " carrier is read-only");
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (!owner_.empty())
    state_error(std::string(what) + ": the " + kind_name() + " carrier is owned by " + owner_ +
                " and is not publicly mutable");
}

void Carrier::claim(const char* by, bool tier) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (is_disposed()) state_error(std::string(by) + ": the " + kind_name() + " carrier has been released");
  if (!owner_.empty()) state_error(std::string(by) + ": the " + kind_name() + " carrier is already owned by " + owner_);
  owner_ = by;
  tier_.store(tier, std::memory_order_release);
}

void Carrier::unclaim() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (owner_.empty()) state_error(std::string("the ") + kind_name() + " carrier is not owned");
  owner_.clear();
  tier_.store(false, std::memory_order_release);
}

void Carrier::check_not_tier(const char* what) const {
  if (!tier_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (!owner_.empty())
    state_error(std::string(what) + ": the " + kind_name() + " carrier is owned by " + owner_ +
                ", which holds its values now; read them through its full tensor");
}

static void check_range(sw_dtype_t dtype, size_t first, size_t count, size_t size, const char* what) {
  if (first > size || count > size - first)
    index_error(std::string(what) + ": slots [" + std::to_string(first) + ", " + std::to_string(first + count) +
                ") are outside the carrier of " + std::to_string(size) + " slots");
  check_whole_blocks(dtype, first, what);
  check_whole_blocks(dtype, count, what);
}

void Carrier::read(size_t first, size_t count, void* dst) const {
  StoragePin pin(*this, "read");
  check_range(dtype_, first, count, size(), "read");
  if (count) read_slots(first, count, dst);
}

void Carrier::write(size_t first, size_t count, const void* src) {
  check_mutable("write");
  check_range(dtype_, first, count, size(), "write");
  if (count) write_slots(first, count, src);
  bump_version();
}

void Carrier::dispose() {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (!owner_.empty())
      state_error(std::string("release: the ") + kind_name() + " carrier is owned by " + owner_ +
                  "; wait for that work to finish first");
    if (disposed_) return;
    check_disposable();
    disposed_.store(true, std::memory_order_seq_cst);
  }
  // A reader that pinned before the store above still holds the storage; its
  // unpin drops it. One that pins after it sees `disposed_` and backs out.
  if (pins_.load(std::memory_order_seq_cst) == 0) drop_storage_once(true);
}

void Carrier::pin_storage(const char* what) const {
  check_not_tier(what);
  pins_.fetch_add(1, std::memory_order_seq_cst);
  if (disposed_.load(std::memory_order_seq_cst)) {
    unpin_storage();
    state_error(std::string(what) + ": the " + kind_name() + " carrier has been released");
  }
}

void Carrier::unpin_storage() const {
  if (pins_.fetch_sub(1, std::memory_order_seq_cst) == 1 && disposed_.load(std::memory_order_seq_cst))
    drop_storage_once(false);
}

void Carrier::drop_storage_once(bool rethrow) const {
  if (storage_dropped_.exchange(true, std::memory_order_acq_rel)) return;
  if (rethrow) return const_cast<Carrier*>(this)->dispose_storage();
  // The last reader's thread: nobody to report to but the log.
  Status st = capture([&] { const_cast<Carrier*>(this)->dispose_storage(); });
  if (!st.ok()) runtime().log(SW_LOG_ERROR, std::string("release: dropping the ") + kind_name() + " carrier's storage failed: " + st.message);
}

}  // namespace sw

namespace sw {

void Carrier::read_async(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority priority,
                         bool whole_blocks) {
  issue_read(first, count, dst, runtime().hold_point(FaultKind::kRead, std::move(done)), priority, whole_blocks);
}

void Carrier::write_async(size_t first, size_t count, const std::byte* src, IoDone done) {
  issue_write(first, count, src, runtime().hold_point(FaultKind::kWrite, std::move(done)));
}

// Plain host memory is a copy: a small one runs on the loop thread (run_copy).
void Carrier::issue_read(size_t first, size_t count, std::byte* dst, IoDone done, IoPriority, bool) {
  Ref<Carrier> self(this);
  auto work = [self, first, count, dst] { self->read_slots(first, count, dst); };
  if (host_data())
    runtime().run_copy(bytes_of(count), std::move(work), std::move(done));
  else
    runtime().run_on_worker(std::move(work), std::move(done));
}

void Carrier::issue_write(size_t first, size_t count, const std::byte* src, IoDone done) {
  Ref<Carrier> self(this);
  auto work = [self, first, count, src] { self->write_slots(first, count, src); };
  if (host_data())
    runtime().run_copy(bytes_of(count), std::move(work), std::move(done));
  else
    runtime().run_on_worker(std::move(work), std::move(done));
}

void Carrier::write_runs(const std::vector<SlotRun>& runs, const std::byte* src) {
  for (const SlotRun& r : runs) {
    write_slots(r.first, r.count, src);
    src += bytes_of(r.count);
  }
}

void Carrier::read_runs(const std::vector<SlotRun>& runs, std::byte* dst) const {
  for (const SlotRun& r : runs) {
    read_slots(r.first, r.count, dst);
    dst += bytes_of(r.count);
  }
}

void Carrier::allocate(size_t size, bool zero_fill) {
  if (!is_allocatable())
    value_error(std::string("the ") + kind_name() + " carrier already has storage and cannot be reallocated");
  runtime().check_fault(FaultKind::kAllocation, kind_name());
  allocate_storage(size, zero_fill);
  size_.store(size, std::memory_order_release);
}

Ref<Carrier> Carrier::create_empty_like() const {
  unsupported_error(std::string("the ") + kind_name() + " carrier cannot create an empty carrier like itself");
}

void Carrier::deallocate() {
  allocate_storage(0, true);
  size_.store(0, std::memory_order_release);
}

void Carrier::drop_tier_storage() { allocate_storage(0, true); }

void Carrier::check_operand(const Tensor&, const char*) const {}

Ref<Tensor> Carrier::resolve_operand(const Ref<Tensor>& t, sw_residency_purpose_t, const char*) const { return t; }

Ref<Tensor> Carrier::leaf_gradient(const Tensor&, const Ref<Tensor>&) const {
  unsupported_error(std::string("the ") + kind_name() + " carrier keeps no composite gradients");
}

Ref<Tensor> Carrier::add_gradients(const Ref<Tensor>&, const Ref<Tensor>&) const {
  unsupported_error(std::string("the ") + kind_name() + " carrier keeps no composite gradients");
}

}  // namespace sw
