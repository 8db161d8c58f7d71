#include "core/tensor.hpp"

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

Tensor::Tensor(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout)
    : Object(ObjectKind::kTensor), carrier_(std::move(carrier)), offset_(offset), layout_(std::move(layout)) {}

Tensor::~Tensor() = default;

void check_blocks(sw_dtype_t dtype, int64_t offset, const Layout& layout) {
  if (!dtype_is_quantized(dtype)) return;
  const int64_t block = dtype_block_elements(dtype);
  auto refuse = [&](const std::string& why) {
    value_error(std::string("a ") + dtype_name(dtype) + " tensor keeps whole blocks of " + std::to_string(block) +
                " elements along its first mode, but the view " + layout.to_string() + " at offset " +
                std::to_string(offset) + " " + why);
  };
  const std::vector<Leaf>& leaves = layout.leaves();
  if (layout.rank() == 0 || leaves.empty()) refuse("has no first mode");
  if (leaves[0].extent % block)
    refuse("splits a block: its first mode's fastest extent is not a multiple of " + std::to_string(block));
  if (layout.size() == 0) return;
  if (leaves[0].stride != 1)
    refuse("does not walk a block's elements contiguously (first stride " + std::to_string(leaves[0].stride) + ")");
  for (size_t i = 1; i < leaves.size(); ++i)
    if (leaves[i].extent > 1 && leaves[i].stride % block)
      refuse("starts a block inside another (stride " + std::to_string(leaves[i].stride) + ")");
  if (offset % block) refuse("starts inside a block");
}

namespace {
// `m` with its first leaf's extent and every other leaf's stride divided by
// `block` (check_blocks held); `first` is whether m holds the first leaf.
Mode units_of(const Mode& m, int64_t block, bool* first) {
  if (m.leaf) {
    if (*first) {
      *first = false;
      return Mode::make_leaf(m.extent / block, 1);
    }
    return Mode::make_leaf(m.extent, m.extent > 1 ? m.stride / block : 0);
  }
  std::vector<Mode> children;
  for (const Mode& c : m.children) children.push_back(units_of(c, block, first));
  return Mode::make_tuple(std::move(children));
}
}  // namespace

Tensor::Units Tensor::units() const {
  const sw_dtype_t d = dtype();
  if (!dtype_is_quantized(d)) return {offset_, layout_, dtype_block_bytes(d)};
  const int64_t block = dtype_block_elements(d);
  bool first = true;
  std::vector<Mode> modes;
  for (const Mode& m : layout_->modes()) modes.push_back(units_of(m, block, &first));
  return {offset_ / block, Layout::make(std::move(modes)), dtype_block_bytes(d)};
}

Ref<Tensor> Tensor::create(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout) {
  check_blocks(carrier->dtype(), offset, *layout);
  if (layout->rank() > SW_MAX_RANK)
    value_error("tensor rank " + std::to_string(layout->rank()) + " exceeds the maximum of " +
                std::to_string(SW_MAX_RANK));
  if (layout->size() > 0) {
    int64_t lo, hi;
    if (__builtin_add_overflow(offset, layout->min_index(), &lo) ||
        __builtin_add_overflow(offset, layout->max_index(), &hi))
      index_error("tensor offset " + std::to_string(offset) + " puts its slots outside the 64-bit range");
    if (lo < 0 || hi >= static_cast<int64_t>(carrier->size()))
      index_error("tensor reaches slots [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "] outside the carrier of " + std::to_string(carrier->size()) + " slots");
  }
  return Ref<Tensor>::adopt(new Tensor(std::move(carrier), offset, std::move(layout)));
}

Ref<Tensor> Tensor::dense_over(Ref<Carrier> carrier, const std::vector<int64_t>& extents) {
  auto layout = Layout::dense(extents);
  check_blocks(carrier->dtype(), 0, *layout);
  return Ref<Tensor>::adopt(new Tensor(std::move(carrier), 0, std::move(layout)));
}

Ref<Tensor> Tensor::view(int64_t offset, Ref<Layout> layout) const {
  check_blocks(carrier_->dtype(), offset, *layout);
  return Ref<Tensor>::adopt(new Tensor(carrier_, offset, std::move(layout)));
}

std::vector<SlotRun> Tensor::slot_runs() const {
  const int64_t n = numel();
  if (layout_->is_dense()) return n ? std::vector<SlotRun>{{static_cast<size_t>(offset_), static_cast<size_t>(n)}}
                                    : std::vector<SlotRun>{};
  std::vector<SlotRun> runs;
  for (int64_t o = 0; o < n; ++o) {
    const auto slot = static_cast<size_t>(offset_ + layout_->index_of_ordinal(o));
    if (!runs.empty() && runs.back().first + runs.back().count == slot)
      ++runs.back().count;
    else
      runs.push_back({slot, 1});
  }
  return runs;
}

std::byte* Tensor::host_base() const {
  std::byte* base = carrier_->host_data();
  return base ? base + carrier_->bytes_of(static_cast<size_t>(offset_)) : nullptr;
}

void Tensor::set_grad_fn(Ref<GraphNode> node) { grad_fn_ = std::move(node); }

bool Tensor::requires_grad() const { return requires_grad_ || grad_fn_; }

void Tensor::set_requires_grad(bool value) {
  if (!is_leaf())
    value_error("requires_grad can only be set on a leaf tensor; this one was produced by " +
                std::string(grad_fn_->name()));
  if (value && !dtype_is_float(dtype()))
    type_error(std::string("only floating point tensors can require gradients, not ") + dtype_name(dtype()));
  requires_grad_ = value;
}

Ref<Tensor> Tensor::grad() const {
  std::lock_guard<std::mutex> lock(grad_mutex_);
  return grad_;
}

void Tensor::set_grad(Ref<Tensor> g) {
  std::lock_guard<std::mutex> lock(grad_mutex_);
  grad_ = std::move(g);
}

}  // namespace sw
