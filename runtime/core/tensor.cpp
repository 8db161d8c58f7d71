#include "core/tensor.hpp"

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw {

Tensor::Tensor(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout)
    : Object(ObjectKind::kTensor), carrier_(std::move(carrier)), offset_(offset), layout_(std::move(layout)) {}

Tensor::~Tensor() = default;

Ref<Tensor> Tensor::create(Ref<Carrier> carrier, int64_t offset, Ref<Layout> layout) {
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
  return Ref<Tensor>::adopt(new Tensor(std::move(carrier), 0, Layout::dense(extents)));
}

Ref<Tensor> Tensor::view(int64_t offset, Ref<Layout> layout) const {
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
  return base ? base + offset_ * static_cast<int64_t>(carrier_->element_size()) : nullptr;
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
