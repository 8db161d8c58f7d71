// What the op definitions share: a node whose VJP is a function, recording,
// and the non-recording building blocks (kernels on promoted operands)
// that forward passes and VJPs are written with.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw::ops {

// A node whose VJP is a function of the cotangent and the node (its saved
// tensors, which inputs need a gradient).
class FnNode final : public Node {
 public:
  using Vjp = std::function<std::vector<Ref<Tensor>>(const Ref<Tensor>& g, const FnNode& node)>;
  FnNode(const char* name, Vjp vjp, bool view) : name_(name), vjp_(std::move(vjp)), view_(view) {}
  const char* name() const override { return name_; }
  bool is_view() const override { return view_; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override { return vjp_(g, *this); }
  // Whether input i takes a gradient.
  bool needs(size_t i) const { return i < edges_.size() && !edges_[i].empty(); }
  // Saved tensor i, made available for backward (a composite's values).
  Ref<Tensor> value(size_t i) const { return resolve(saved_tensor(i), SW_PURPOSE_BACKWARD, name_); }

 private:
  const char* name_;
  Vjp vjp_;
  bool view_;
};

// Records a node on `out` when grad mode is on, `out` is floating and an
// input requires grad: one edge per input (null entries take none), the
// `saved` tensors with their versions, the VJP. An op's output is saved
// through save_output(), never itself (that would be a reference cycle).
// `view`: `out` shares its input's carrier.
void record(const Ref<Tensor>& out, const char* name, const std::vector<const Tensor*>& inputs,
            const std::vector<Ref<Tensor>>& saved, FnNode::Vjp vjp, bool view = false);
// `out` as a tensor a node can save: another handle on the same slots.
inline Ref<Tensor> save_output(const Ref<Tensor>& out) { return out->view(out->offset(), out->layout_ref()); }

inline ComputeBackend& backend_of(const Tensor& t) { return backend_for(t.carrier().compute_side()); }
// An axis in [-rank, rank) made non-negative; INDEX otherwise.
size_t normalize_axis(int64_t axis, size_t rank, const char* op);

// `t` itself when each of its top-level modes walks one progression (as
// select_k, gather and scatter_add need), else a dense copy.
Ref<Tensor> flat_modes(const Ref<Tensor>& t);
// `t` itself when it has `dtype`, else a dense converted copy.
inline Ref<Tensor> as_dtype(const Ref<Tensor>& t, sw_dtype_t dtype) { return t->dtype() == dtype ? t : copy_as(*t, dtype); }
// A rank-0 tensor holding `value` (converted to `dtype`, VALUE when it does
// not fit) where `like` computes.
Ref<Tensor> scalar_tensor(const Tensor& like, sw_dtype_t dtype, double value);
Ref<Tensor> zeros_like_shape(const Tensor& like, sw_dtype_t dtype, const std::vector<int64_t>& shape);

// Kernels on operands converted to `compute` (f32, f64, or an integer or
// bool dtype) and broadcast; the result has `compute` (bool for
// comparisons). No autograd.
Ref<Tensor> binary_raw(BinaryOp op, const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t compute);
Ref<Tensor> unary_raw(UnaryOp op, const Ref<Tensor>& a, sw_dtype_t compute, double scalar = 0.0);
// cond ? a : b, in `dtype`, broadcast.
Ref<Tensor> where_raw(const Ref<Tensor>& cond, const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t dtype);
// Reduces over the modes where `kept` has extent 1 and `a` does not; the
// result has `kept`'s extents and a's dtype.
Ref<Tensor> reduce_raw(ReduceOp op, const Ref<Tensor>& a, const std::vector<int64_t>& kept);
// Kept extents of reducing `axes` (null: every axis) of `shape`, and the
// result's extents with or without the reduced modes.
void reduced_shapes(const std::vector<int64_t>& shape, const std::vector<int64_t>* axes, bool keepdims, const char* op,
                    std::vector<int64_t>* kept, std::vector<int64_t>* result);
// g (of `shape` or broadcastable) summed to `shape` and converted to `dtype`.
inline Ref<Tensor> grad_to(const Ref<Tensor>& g, const std::vector<int64_t>& shape, sw_dtype_t dtype) {
  return as_dtype(sum_to(g, shape), dtype);
}

}  // namespace sw::ops
