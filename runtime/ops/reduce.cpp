// reduce_sum and its VJP; sw_reduce (sum, mean, max, min), max / min with
// indices, softmax and log_softmax, topk.
#include <algorithm>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/op_util.hpp"
#include "ops/ops.hpp"

namespace sw::ops {
namespace {

class ReduceSumNode final : public Node {
 public:
  ReduceSumNode(std::vector<int64_t> input, std::vector<int64_t> kept) : input_(std::move(input)), kept_(std::move(kept)) {}
  const char* name() const override { return "reduce_sum"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    auto g_kept = reshape_dense(g, kept_);
    return {copy_as(*broadcast_view(*g_kept, input_), g->dtype())};
  }

 private:
  std::vector<int64_t> input_, kept_;
};

}  // namespace

Ref<Tensor> reduce_sum(const Ref<Tensor>& a, const std::vector<int64_t>* axes, bool keepdims) {
  auto pins = check_operands("reduce_sum", {a.get()});
  if (a->dtype() != SW_DTYPE_F32 && a->dtype() != SW_DTYPE_F64)
    type_error(std::string("reduce_sum supports f32 and f64 tensors, not ") + dtype_name(a->dtype()));
  const int64_t rank = static_cast<int64_t>(a->rank());
  std::vector<bool> reduced(a->rank(), axes == nullptr);
  if (axes) {
    for (int64_t ax : *axes) {
      const int64_t n = ax < 0 ? ax + rank : ax;
      if (n < 0 || n >= rank)
        index_error("reduce_sum: axis " + std::to_string(ax) + " is out of range for rank " + std::to_string(rank));
      if (reduced[n]) value_error("reduce_sum: axis " + std::to_string(ax) + " is repeated");
      reduced[n] = true;
    }
  }
  std::vector<int64_t> kept, result;
  for (size_t i = 0; i < a->rank(); ++i) {
    kept.push_back(reduced[i] ? 1 : a->shape()[i]);
    if (!reduced[i] || keepdims) result.push_back(kept.back());
  }
  auto x = resolve(a, SW_PURPOSE_OPERATION, "reduce_sum");
  ComputeBackend& be = backend_for(x->carrier());
  auto out = be.empty(x->runtime_ref(), x->dtype(), kept);
  if (out->numel()) be.reduce_sum(*x, *out);
  out = reshape_dense(out, result);
  if (should_record({a.get()})) {
    auto node = make_ref<ReduceSumNode>(a->shape(), kept);
    node->connect({a.get()});
    attach(out, node);
  }
  return out;
}

}  // namespace sw::ops

// ---- sw_reduce, sw_reduce_index, softmax, topk ---------------------------------------

namespace sw::ops {
namespace {

// g of `kept` extents (or the result's, reshaped) broadcast back to `shape`.
Ref<Tensor> spread(const Ref<Tensor>& g, const std::vector<int64_t>& kept, const std::vector<int64_t>& shape) {
  return broadcast_view(*reshape_dense(g, kept), shape);
}

void check_nonempty(const char* op, const std::vector<int64_t>& shape, const std::vector<int64_t>& kept) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && kept[i] == 1)
      value_error(std::string(op) + " over a mode of extent 0: the reduction has no identity");
}

// The gradient of max / min values along `axis` with `indices` (kept
// extents, i64): g scattered to the selected elements.
Ref<Tensor> scatter_back(const Ref<Tensor>& g, const Ref<Tensor>& indices, size_t axis,
                         const std::vector<int64_t>& shape, sw_dtype_t dtype) {
  const sw_dtype_t gc = compute_dtype(g->dtype());
  auto z = zeros_like_shape(*g, gc, shape);
  auto src = as_dtype(reshape_dense(g, indices->shape()), gc);
  backend_of(*z).scatter_add(*z, axis, *indices, *src);
  return as_dtype(z, dtype);
}

}  // namespace

Ref<Tensor> reduce(Reduce op, const Ref<Tensor>& a, const std::vector<int64_t>* axes, bool keepdims) {
  const char* name = op_name(op);
  if (op != Reduce::kSum) require_plain(name, {a.get()});
  auto pins = check_operands(name, {a.get()});
  const sw_dtype_t d = a->dtype();
  std::vector<int64_t> kept, result;
  reduced_shapes(a->shape(), axes, keepdims, name, &kept, &result);
  if (op == Reduce::kMean && !dtype_is_float(d))
    type_error(std::string("mean of a ") + dtype_name(d) + " tensor: convert it to a floating dtype first");
  if (op == Reduce::kMax || op == Reduce::kMin) check_nonempty(name, a->shape(), kept);
  // Sums of integers and bools are i64, as in PyTorch.
  const sw_dtype_t out_dtype = op == Reduce::kSum && !dtype_is_float(d) ? SW_DTYPE_I64 : d;
  const sw_dtype_t compute = compute_dtype(out_dtype);
  Ref<Tensor> x = as_dtype(resolve(a, SW_PURPOSE_OPERATION, name), compute);
  const ReduceOp kop = kernel_of(op);
  Ref<Tensor> out = reduce_raw(kop, x, kept);
  int64_t count = 1;
  for (size_t i = 0; i < kept.size(); ++i)
    if (kept[i] == 1) count *= a->shape()[i];
  if (op == Reduce::kMean) out = unary_raw(UnaryOp::kScale, out, compute, 1.0 / static_cast<double>(count));
  out = reshape_dense(as_dtype(out, out_dtype), result);
  const std::vector<int64_t> shape = a->shape();
  const bool extreme = op == Reduce::kMax || op == Reduce::kMin;
  std::vector<Ref<Tensor>> saved;
  if (extreme) saved = {a, save_output(out)};
  record(out, name, {a.get()}, saved, [=](const Ref<Tensor>& g, const FnNode& n) {
    const sw_dtype_t gc = compute_dtype(g->dtype());
    Ref<Tensor> ga;
    if (op == Reduce::kSum) {
      ga = copy_as(*spread(g, kept, shape), d);
    } else if (op == Reduce::kMean) {
      ga = as_dtype(unary_raw(UnaryOp::kScale, copy_as(*spread(g, kept, shape), gc), gc, 1.0 / static_cast<double>(count)), d);
    } else {
      // Ties share the gradient evenly (as PyTorch's amax / amin).
      auto v = n.value(0);
      auto mask = binary_raw(BinaryOp::kEq, v, spread(n.value(1), kept, shape), gc);
      auto m = as_dtype(mask, gc);
      auto ties = reduce_raw(ReduceOp::kSum, m, kept);
      auto share = binary_raw(BinaryOp::kDiv, spread(g, kept, shape), broadcast_view(*ties, shape), gc);
      ga = as_dtype(binary_raw(BinaryOp::kMul, share, m, gc), d);
    }
    return std::vector<Ref<Tensor>>{ga};
  });
  return out;
}

std::pair<Ref<Tensor>, Ref<Tensor>> reduce_index(Reduce op, const Ref<Tensor>& a, int64_t axis_in, bool keepdims) {
  if (op != Reduce::kMax && op != Reduce::kMin)
    value_error(std::string("reduce_index takes max or min, not ") + op_name(op));
  const std::string name = std::string(op_name(op)) + " with indices";
  require_plain(name.c_str(), {a.get()});
  auto pins = check_operands(name.c_str(), {a.get()});
  if (a->rank() == 0) index_error(name + ": a rank-0 tensor has no axis " + std::to_string(axis_in));
  const size_t axis = normalize_axis(axis_in, a->rank(), name.c_str());
  if (a->shape()[axis] == 0) value_error(name + " over a mode of extent 0: there is no element to select");
  std::vector<int64_t> kept = a->shape(), result;
  kept[axis] = 1;
  for (size_t i = 0; i < kept.size(); ++i)
    if (i != axis || keepdims) result.push_back(kept[i]);
  const sw_dtype_t d = a->dtype();
  Ref<Tensor> x = flat_modes(as_dtype(a, compute_dtype(d)));
  ComputeBackend& be = backend_of(*x);
  auto values = be.empty(x->runtime_ref(), x->dtype(), kept);
  auto indices = be.empty(x->runtime_ref(), SW_DTYPE_I64, kept);
  if (values->numel()) be.select_k(*x, 1, axis, op == Reduce::kMax, *values, *indices);
  auto out = reshape_dense(as_dtype(values, d), result);
  const std::vector<int64_t> shape = a->shape();
  record(out, op == Reduce::kMax ? "max" : "min", {a.get()}, {indices},
         [=](const Ref<Tensor>& g, const FnNode& n) {
           return std::vector<Ref<Tensor>>{scatter_back(g, n.value(0), axis, shape, d)};
         });
  return {out, reshape_dense(indices, result)};
}

Ref<Tensor> softmax(const Ref<Tensor>& a, int64_t axis_in, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  require_plain(name, {a.get()});
  auto pins = check_operands(name, {a.get()});
  const sw_dtype_t d = a->dtype();
  if (!dtype_is_float(d))
    type_error(std::string(name) + " of a " + dtype_name(d) + " tensor: convert it to a floating dtype first");
  const size_t axis = a->rank() == 0 ? (normalize_axis(axis_in, 1, name), 0) : normalize_axis(axis_in, a->rank(), name);
  std::vector<int64_t> kept = a->shape();
  if (!kept.empty()) kept[axis] = 1;
  const sw_dtype_t c = compute_dtype(d);
  Ref<Tensor> x = as_dtype(a, c);
  Ref<Tensor> out;
  if (x->numel()) {
    // exp(x - max) over its sum: no overflow for large inputs.
    auto z = binary_raw(BinaryOp::kSub, x, reduce_raw(ReduceOp::kMax, x, kept), c);
    auto e = unary_raw(UnaryOp::kExp, z, c);
    auto s = reduce_raw(ReduceOp::kSum, e, kept);
    out = log ? binary_raw(BinaryOp::kSub, z, unary_raw(UnaryOp::kLog, s, c), c) : binary_raw(BinaryOp::kDiv, e, s, c);
  } else {
    out = backend_of(*x).empty(x->runtime_ref(), c, x->shape());
  }
  out = as_dtype(out, d);
  record(out, name, {a.get()}, {save_output(out)}, [=](const Ref<Tensor>& g, const FnNode& n) {
    const Ref<Tensor> y = n.value(0);
    const sw_dtype_t gc = compute_dtype(g->dtype());
    Ref<Tensor> ga;
    if (log) {  // g - exp(y) * sum(g)
      auto s = reduce_raw(ReduceOp::kSum, as_dtype(g, gc), kept);
      ga = binary_raw(BinaryOp::kSub, g, binary_raw(BinaryOp::kMul, unary_raw(UnaryOp::kExp, y, gc), s, gc), gc);
    } else {  // y * (g - sum(g * y))
      auto gy = binary_raw(BinaryOp::kMul, g, y, gc);
      ga = binary_raw(BinaryOp::kSub, gy, binary_raw(BinaryOp::kMul, y, reduce_raw(ReduceOp::kSum, gy, kept), gc), gc);
    }
    return std::vector<Ref<Tensor>>{as_dtype(ga, d)};
  });
  return out;
}

std::pair<Ref<Tensor>, Ref<Tensor>> topk(const Ref<Tensor>& a, int64_t k, int64_t axis_in) {
  require_plain("topk", {a.get()});
  auto pins = check_operands("topk", {a.get()});
  const sw_dtype_t d = a->dtype();
  if (d == SW_DTYPE_BOOL) type_error("topk of a bool tensor is not supported; convert it first (sw_tensor_to_dtype)");
  const bool scalar = a->rank() == 0;
  const size_t axis = scalar ? (normalize_axis(axis_in, 1, "topk"), 0) : normalize_axis(axis_in, a->rank(), "topk");
  const int64_t n = scalar ? 1 : a->shape()[axis];
  if (k < 0 || k > n)
    value_error("topk: k = " + std::to_string(k) + " is out of range for an axis of extent " + std::to_string(n));
  Ref<Tensor> x = flat_modes(as_dtype(a, compute_dtype(d)));
  if (scalar) x = x->view(x->offset(), Layout::dense({1}));
  std::vector<int64_t> shape = x->shape();
  shape[axis] = k;
  ComputeBackend& be = backend_of(*x);
  auto values = be.empty(x->runtime_ref(), x->dtype(), shape);
  auto indices = be.empty(x->runtime_ref(), SW_DTYPE_I64, shape);
  if (values->numel()) be.select_k(*x, k, axis, true, *values, *indices);
  if (scalar && k == 1) {
    values = reshape_dense(values, {});
    indices = reshape_dense(indices, {});
  }
  auto out = as_dtype(values, d);
  const std::vector<int64_t> in_shape = x->shape(), a_shape = a->shape();
  record(out, "topk", {a.get()}, {indices}, [=](const Ref<Tensor>& g, const FnNode& n) {
    auto idx = reshape_dense(n.value(0), shape);
    if (!idx->numel()) return std::vector<Ref<Tensor>>{zeros_like_shape(*g, d, a_shape)};
    auto gi = scatter_back(reshape_dense(g, shape), idx, axis, in_shape, d);
    return std::vector<Ref<Tensor>>{reshape_dense(gi, a_shape)};
  });
  return {out, indices};
}

}  // namespace sw::ops
