#include "ops/op_util.hpp"

#include <algorithm>

namespace sw::ops {

void record(const Ref<Tensor>& out, const char* name, const std::vector<const Tensor*>& inputs,
            const std::vector<Ref<Tensor>>& saved, FnNode::Vjp vjp, bool view) {
  if (!dtype_is_float(out->dtype()) || !should_record(inputs)) return;
  auto node = make_ref<FnNode>(name, std::move(vjp), view);
  for (const Ref<Tensor>& s : saved) node->save(s);
  node->connect(inputs);
  attach(out, node);
}

size_t normalize_axis(int64_t axis, size_t rank, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t n = axis < 0 ? axis + r : axis;
  if (n < 0 || n >= r)
    index_error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return static_cast<size_t>(n);
}

void require_plain(const char* op, const std::vector<const Tensor*>& inputs) {
  for (const Tensor* t : inputs)
    if (t && t->carrier().is_composite())
      unsupported_error(std::string(op) + " is not supported on a tensor backed by a " + t->carrier().kind_name() +
                        ": only add, elementwise_mul, mul, relu, reduce_sum and matmul take one directly; project "
                        "the tiles you need first (sw_tiled_project) and compute on the compact tensor");
}

Ref<Tensor> flat_modes(const Ref<Tensor>& t) {
  int64_t s;
  for (size_t m = 0; m < t->rank(); ++m)
    if (!t->layout().mode_stride(m, &s)) return copy_as(*t, t->dtype());
  return t;
}

Ref<Tensor> scalar_tensor(const Tensor& like, sw_dtype_t dtype, double value) {
  std::byte bytes[8];
  double_to_element(dtype, value, bytes);
  auto t = backend_of(like).empty(like.runtime_ref(), dtype, {});
  t->carrier().write_slots(0, 1, bytes);
  return t;
}

Ref<Tensor> zeros_like_shape(const Tensor& like, sw_dtype_t dtype, const std::vector<int64_t>& shape) {
  return backend_of(like).zeros(like.runtime_ref(), dtype, shape);
}

Ref<Tensor> binary_raw(BinaryOp op, const Ref<Tensor>& a_in, const Ref<Tensor>& b_in, sw_dtype_t compute) {
  auto shape = broadcast_shapes(a_in->shape(), b_in->shape(), "binary op");
  Ref<Tensor> a = as_dtype(a_in, compute), b = as_dtype(b_in, compute);
  ComputeBackend& be = backend_of(*a);
  auto out = be.empty(a->runtime_ref(), is_comparison(op) ? SW_DTYPE_BOOL : compute, shape);
  if (out->numel()) be.binary(op, *broadcast_view(*a, shape), *broadcast_view(*b, shape), *out);
  return out;
}

Ref<Tensor> unary_raw(UnaryOp op, const Ref<Tensor>& a_in, sw_dtype_t compute, double scalar) {
  Ref<Tensor> a = as_dtype(a_in, compute);
  ComputeBackend& be = backend_of(*a);
  auto out = be.empty(a->runtime_ref(), compute, a->shape());
  if (out->numel()) be.unary(op, *a, scalar, *out);
  return out;
}

Ref<Tensor> where_raw(const Ref<Tensor>& cond, const Ref<Tensor>& a_in, const Ref<Tensor>& b_in, sw_dtype_t dtype) {
  auto shape = broadcast_shapes(broadcast_shapes(cond->shape(), a_in->shape(), "where"), b_in->shape(), "where");
  Ref<Tensor> a = as_dtype(a_in, dtype), b = as_dtype(b_in, dtype);
  ComputeBackend& be = backend_of(*a);
  auto out = be.empty(a->runtime_ref(), dtype, shape);
  if (!out->numel()) return out;
  be.unary(UnaryOp::kCopy, *broadcast_view(*b, shape), 0.0, *out);
  be.masked_copy(*broadcast_view(*as_dtype(cond, SW_DTYPE_BOOL), shape), *broadcast_view(*a, shape), *out);
  return out;
}

Ref<Tensor> reduce_raw(ReduceOp op, const Ref<Tensor>& a, const std::vector<int64_t>& kept) {
  ComputeBackend& be = backend_of(*a);
  auto out = be.empty(a->runtime_ref(), a->dtype(), kept);  // every slot is written
  if (out->numel()) be.reduce(op, *a, *out);
  return out;
}

void reduced_shapes(const std::vector<int64_t>& shape, const std::vector<int64_t>* axes, bool keepdims, const char* op,
                    std::vector<int64_t>* kept, std::vector<int64_t>* result) {
  std::vector<bool> reduced(shape.size(), axes == nullptr);
  if (axes) {
    for (int64_t ax : *axes) {
      const size_t n = normalize_axis(ax, shape.size(), op);
      if (reduced[n]) value_error(std::string(op) + ": axis " + std::to_string(ax) + " is repeated");
      reduced[n] = true;
    }
  }
  kept->clear();
  result->clear();
  for (size_t i = 0; i < shape.size(); ++i) {
    kept->push_back(reduced[i] ? 1 : shape[i]);
    if (!reduced[i] || keepdims) result->push_back(kept->back());
  }
}

}  // namespace sw::ops
