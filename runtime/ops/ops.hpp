// Op definitions: argument rules, broadcasting, result shapes and autograd
// recording. Kernels live behind ComputeBackend. Every function here takes
// tensors that already passed the API layer's handle checks.
#pragma once

#include <vector>

#include "autograd/node.hpp"
#include "core/tensor.hpp"

namespace sw::ops {

// The six differentiable ops (plus the permute view).
Ref<Tensor> add(const Ref<Tensor>& a, const Ref<Tensor>& b);
Ref<Tensor> elementwise_mul(const Ref<Tensor>& a, const Ref<Tensor>& b);
Ref<Tensor> mul_scalar(const Ref<Tensor>& a, double scalar);
Ref<Tensor> relu(const Ref<Tensor>& a);
// `axes` null: every axis.
Ref<Tensor> reduce_sum(const Ref<Tensor>& a, const std::vector<int64_t>* axes, bool keepdims);
// The result has the operands' dtype; half operands may give f32 instead.
Ref<Tensor> matmul(const Ref<Tensor>& a, const Ref<Tensor>& b);
Ref<Tensor> matmul(const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t out_dtype);
Ref<Tensor> permute(const Ref<Tensor>& a, const std::vector<size_t>& perm);

// Non-recording helpers shared by the VJPs.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const char* op);
// A stride-0 view of `t` stretched to `shape` (NumPy rules, already checked).
Ref<Tensor> broadcast_view(const Tensor& t, const std::vector<int64_t>& shape);
// `t` itself if dense, else a dense copy on the same compute kind.
Ref<Tensor> contiguous(const Ref<Tensor>& t);
// A fresh dense copy, converted to `dtype`.
Ref<Tensor> copy_as(const Tensor& t, sw_dtype_t dtype);
// Reinterprets a dense tensor with other extents of the same count.
Ref<Tensor> reshape_dense(const Ref<Tensor>& t, const std::vector<int64_t>& extents);
// Sums `g` over its broadcast modes so that it has `shape`.
Ref<Tensor> sum_to(const Ref<Tensor>& g, const std::vector<int64_t>& shape);
// Rejects disposed carriers, non-compute carriers and mixed runtimes, and pins
// the operands' storage: hold the result until the op has read its operands.
[[nodiscard]] std::vector<StoragePin> check_operands(const char* op, const std::vector<const Tensor*>& inputs);

// A full tensor on a composite carrier (a TiledEvictable) as a dense compute
// tensor (every value made available, blocking; no autograd node); any other
// tensor as it is.
Ref<Tensor> resolve(const Ref<Tensor>& t, sw_residency_purpose_t purpose, const char* op);
// a + b for gradients: tiled if either is, halves added in f32.
Ref<Tensor> sum_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b);
// `g` as stored in leaf.grad: a fresh dense tensor of the leaf's dtype, or a
// tiled gradient for a leaf backed by a TiledEvictable.
Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g);
// The arithmetic run_backward needs, by these functions.
const GradientMath& gradient_math();

}  // namespace sw::ops
