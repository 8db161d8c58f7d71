#include "ops/ops.hpp"

#include <string>

#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"
#include "autograd/node.hpp"
#include "ops/backend.hpp"

namespace sw::ops {

// The compute carrier kind an operand computes on (a composite's primary kind).
static const Carrier& compute_side(const Tensor& t) { return t.carrier().compute_side(); }

std::vector<StoragePin> check_operands(const char* op, const std::vector<const Tensor*>& inputs, bool quantized_ok) {
  std::vector<StoragePin> pins;
  if (!quantized_ok)
    for (const Tensor* t : inputs) refuse_quantized(t->dtype(), op);
  for (const Tensor* t : inputs) {
    if (t->carrier().is_composite()) {
      // A composite's own request accounting keeps its tiers alive.
      t->carrier().check_operand(*t, op);
    } else {
      pins.emplace_back(t->carrier(), op);
      backend_for(t->carrier());
    }
  }
  for (const Tensor* t : inputs) {
    if (&t->runtime() != &inputs[0]->runtime())
      value_error(std::string(op) + ": the operands belong to different runtimes");
    if (compute_side(*t).kind() != compute_side(*inputs[0]).kind())
      type_error(std::string(op) + ": operands live on different carrier kinds (" + compute_side(*inputs[0]).kind_name() +
                 " and " + compute_side(*t).kind_name() + ")");
  }
  return pins;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const char* op) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1)
      value_error(std::string(op) + ": shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Ref<Tensor> broadcast_view(const Tensor& t, const std::vector<int64_t>& shape) {
  if (t.shape() == shape) return t.view(t.offset(), t.layout_ref());
  const size_t lead = shape.size() - t.rank();
  std::vector<Mode> modes;
  for (size_t i = 0; i < lead; ++i) modes.push_back(Mode::make_leaf(shape[i], 0));
  for (size_t i = 0; i < t.rank(); ++i) {
    if (t.shape()[i] == shape[lead + i])
      modes.push_back(t.layout().modes()[i]);
    else
      modes.push_back(Mode::make_leaf(shape[lead + i], 0));
  }
  return t.view(t.offset(), Layout::make(std::move(modes)));
}

Ref<Tensor> copy_as(const Tensor& t, sw_dtype_t dtype) {
  ComputeBackend& be = backend_for(t.carrier());
  auto out = be.empty(t.runtime_ref(), dtype, t.shape());
  if (t.numel()) be.unary(UnaryOp::kCopy, t, 0.0, *out);
  return out;
}

Ref<Tensor> contiguous(const Ref<Tensor>& t) {
  if (t->layout().is_dense()) return t;
  return copy_as(*t, t->dtype());
}

Ref<Tensor> reshape_dense(const Ref<Tensor>& t, const std::vector<int64_t>& extents) {
  Ref<Tensor> d = contiguous(t);
  auto l = Layout::dense(extents);
  if (l->size() != d->numel()) internal_error("reshape_dense: element counts differ");
  return d->view(d->offset(), l);
}

Ref<Tensor> sum_to(const Ref<Tensor>& g, const std::vector<int64_t>& shape) {
  if (g->shape() == shape) return g;
  const size_t lead = g->rank() - shape.size();
  std::vector<int64_t> keep(g->rank());
  bool any = false;
  for (size_t i = 0; i < g->rank(); ++i) {
    const bool reduce = i < lead || (shape[i - lead] == 1 && g->shape()[i] != 1);
    keep[i] = reduce ? 1 : g->shape()[i];
    any = any || reduce;
  }
  if (!any) return reshape_dense(g, shape);
  if (g->dtype() == SW_DTYPE_F16 || g->dtype() == SW_DTYPE_BF16)  // summed in f32, rounded once
    return copy_as(*sum_to(copy_as(*g, SW_DTYPE_F32), shape), g->dtype());
  ComputeBackend& be = backend_for(g->carrier());
  auto out = be.empty(g->runtime_ref(), g->dtype(), keep);  // reduce_sum writes every slot
  if (out->numel()) be.reduce_sum(*g, *out);
  return reshape_dense(out, shape);
}

Ref<Tensor> resolve(const Ref<Tensor>& t, sw_residency_purpose_t purpose, const char* op) {
  if (!t->carrier().is_composite()) return t;
  NoGradGuard no_grad;
  return t->carrier().resolve_operand(t, purpose, op);
}

Ref<Tensor> sum_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b) {
  if (a->carrier().is_composite()) return a->carrier().add_gradients(a, b);
  if (b->carrier().is_composite()) return b->carrier().add_gradients(b, a);
  if (b->dtype() == SW_DTYPE_F16 || b->dtype() == SW_DTYPE_BF16) {
    // Half gradients (matmul into a half leaf) are stored, not computed on:
    // the kernels add f32 and f64 only, so add in f32 and round once.
    auto wide = sum_gradients(copy_as(*a, SW_DTYPE_F32), copy_as(*b, SW_DTYPE_F32));
    return copy_as(*wide, b->dtype());
  }
  ComputeBackend& be = backend_for(b->carrier());
  auto out = be.empty(b->runtime_ref(), b->dtype(), b->shape());
  if (out->numel()) be.binary(BinaryOp::kAdd, *a, *b, *out);
  return out;
}

Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) {
  if (leaf.carrier().is_composite()) return leaf.carrier().leaf_gradient(leaf, g);
  if (g->carrier().is_composite()) return resolve(g, SW_PURPOSE_BACKWARD, "backward");
  // A fresh dense tensor: .grad never aliases a graph value.
  return copy_as(*g, leaf.dtype());
}

namespace {

class OpsGradientMath final : public GradientMath {
 public:
  Ref<Tensor> sum(const Ref<Tensor>& a, const Ref<Tensor>& b) const override { return sum_gradients(a, b); }
  Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) const override {
    return ops::leaf_gradient(leaf, g);
  }
  Ref<Tensor> one_like(const Ref<Tensor>& root) const override {
    auto pins = check_operands("backward", {root.get()});
    // The seed lives where the root computes (a Vulkan device, say).
    auto seed = backend_for(root->carrier().compute_side()).empty(root->runtime_ref(), root->dtype(), root->shape());
    std::byte one[8];
    double_to_element(root->dtype(), 1.0, one);
    seed->carrier().write_slots(0, 1, one);
    return seed;
  }
};

}  // namespace

const GradientMath& gradient_math() {
  static const OpsGradientMath math;  // stateless
  return math;
}

}  // namespace sw::ops
