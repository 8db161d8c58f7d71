// Op definitions: argument rules, broadcasting, result shapes and autograd
// recording. Kernels live behind ComputeBackend. Every function here takes
// tensors that already passed the API layer's handle checks.
#pragma once

#include <utility>
#include <vector>

#include "autograd/node.hpp"
#include "core/tensor.hpp"
#include "ops/op_table.hpp"

namespace sw {
class ComputeBackend;
}

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

// ---- The tensor surface beyond the six (sw_unary, sw_binary, ...) ----------
// Operands of any dtype the op makes sense for, promoted as
// promote_types(); f16 and bf16 compute in f32 and round once. A tensor on a
// composite carrier (a TiledEvictable) is accepted only where the op is one
// of the six direct ops (add, mul, relu, sum); every other op on one is
// UNSUPPORTED (require_plain).

// The public op codes (sw_unary_op_t, ...) as validated values, ops::Unary,
// ops::Binary and ops::Reduce, their names (op_name) and kernel ops
// (kernel_of) come from the op table: ops/op_table.hpp.

Ref<Tensor> unary(Unary op, const Ref<Tensor>& a);
Ref<Tensor> binary(Binary op, const Ref<Tensor>& a, const Ref<Tensor>& b);
// a op s / s op b: `s` is a weak scalar taking the tensor's dtype (VALUE
// when it cannot: 2.5 for an integer tensor); div of an integer or bool
// tensor computes in f32.
Ref<Tensor> binary_scalar(Binary op, const Ref<Tensor>& a, double s);
Ref<Tensor> scalar_binary(Binary op, double s, const Ref<Tensor>& b);
// a op= b / a op= s: the result converted to a's dtype (TYPE when it is of
// a higher category: an integer tensor += a float one), b broadcast to a's
// shape (VALUE otherwise). One version step of a's carrier. With grad mode
// on: STATE for a leaf that requires grad and for a view of a tensor that
// requires grad; a non-leaf records the op as its new history.
void binary_inplace(Binary op, const Ref<Tensor>& a, const Ref<Tensor>& b);
void binary_scalar_inplace(Binary op, const Ref<Tensor>& a, double s);
Ref<Tensor> where(const Ref<Tensor>& cond, const Ref<Tensor>& a, const Ref<Tensor>& b);
Ref<Tensor> reduce(Reduce op, const Ref<Tensor>& a, const std::vector<int64_t>* axes, bool keepdims);
// Values and i64 indices of the max / min along `axis`.
std::pair<Ref<Tensor>, Ref<Tensor>> reduce_index(Reduce op, const Ref<Tensor>& a, int64_t axis, bool keepdims);
Ref<Tensor> softmax(const Ref<Tensor>& a, int64_t axis, bool log);
std::pair<Ref<Tensor>, Ref<Tensor>> topk(const Ref<Tensor>& a, int64_t k, int64_t axis);
Ref<Tensor> index_select(const Ref<Tensor>& a, int64_t axis, const Ref<Tensor>& index);
Ref<Tensor> gather(const Ref<Tensor>& a, int64_t axis, const Ref<Tensor>& index);
Ref<Tensor> index_add(const Ref<Tensor>& a, int64_t axis, const Ref<Tensor>& index, const Ref<Tensor>& source);
Ref<Tensor> scatter_add(const Ref<Tensor>& a, int64_t axis, const Ref<Tensor>& index, const Ref<Tensor>& source);
Ref<Tensor> cat(const std::vector<Ref<Tensor>>& ts, int64_t axis);
Ref<Tensor> stack(const std::vector<Ref<Tensor>>& ts, int64_t axis);

// Views (sharing the carrier, differentiable) and copies.
// `extents` may hold one -1, inferred. reshape is a view when the layout
// allows (see view_layout), else a copy; view fails VALUE where none exists.
Ref<Tensor> reshape(const Ref<Tensor>& a, const std::vector<int64_t>& extents, bool view_only);
Ref<Tensor> flatten(const Ref<Tensor>& a, int64_t start, int64_t end);
Ref<Tensor> unsqueeze(const Ref<Tensor>& a, int64_t axis);
// `axes` null: every mode of extent 1.
Ref<Tensor> squeeze(const Ref<Tensor>& a, const std::vector<int64_t>* axes);
Ref<Tensor> expand(const Ref<Tensor>& a, const std::vector<int64_t>& extents);
// Python's slice semantics: start and stop clamped as slice.indices() does.
Ref<Tensor> slice(const Ref<Tensor>& a, int64_t axis, int64_t start, int64_t stop, int64_t step);
Ref<Tensor> select(const Ref<Tensor>& a, int64_t axis, int64_t index);
// `a` itself (a new reference) when dense, else a recorded copy.
Ref<Tensor> contiguous_op(const Ref<Tensor>& a);
Ref<Tensor> clone(const Ref<Tensor>& a);
Ref<Tensor> detach(const Ref<Tensor>& a);
// `a` itself for its own dtype; a recorded conversion between float dtypes.
Ref<Tensor> to_dtype(const Ref<Tensor>& a, sw_dtype_t dtype);

// In-place writes (one version step), recorded as binary_inplace is.
void fill(const Ref<Tensor>& a, double value);
void copy_from(const Ref<Tensor>& dst, const Ref<Tensor>& src);

// Constructors on `backend`'s carrier kind.
Ref<Tensor> full(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents,
                 double value);
Ref<Tensor> arange(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype, double start, double stop,
                   double step);
enum class Distribution { kUniform, kNormal };
// Counter-based: element i of seed s is the same on every machine and for
// any thread count. Uniform in [p0, p1); normal with mean p0, stddev p1.
Ref<Tensor> random(ComputeBackend& backend, const Ref<Runtime>& rt, sw_dtype_t dtype,
                   const std::vector<int64_t>& extents, Distribution dist, double p0, double p1, uint64_t seed);

// UNSUPPORTED naming `op` when an input is on a composite carrier: only the
// six direct ops take a TiledEvictable tensor.
void require_plain(const char* op, const std::vector<const Tensor*>& inputs);
// The layout of `a`'s elements, taken first mode fastest, as a tensor of
// `extents` (same count), if one exists over the same slots: nested modes
// where a new mode spans input modes that are not one progression.
bool view_layout(const Layout& a, const std::vector<int64_t>& extents, Ref<Layout>* out);

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
// Refuses block-quantized operands (TYPE) unless `quantized_ok` (the ops that
// only move or convert values).
[[nodiscard]] std::vector<StoragePin> check_operands(const char* op, const std::vector<const Tensor*>& inputs,
                                                     bool quantized_ok = false);

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
