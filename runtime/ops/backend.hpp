// The kernel boundary: one interface per compute carrier kind. Op
// definitions (ops.cpp) validate, broadcast and record autograd; backends
// only compute on already-shaped operands. One dispatch path serves every
// compute carrier.
#pragma once

#include <vector>

#include "core/tensor.hpp"

namespace sw {

enum class BinaryOp {
  kAdd,       // a + b
  kMul,       // a * b
  kReluGrad,  // a * (b > 0): the relu VJP, a = cotangent, b = input
};

enum class UnaryOp {
  kRelu,   // max(a, 0)
  kScale,  // a * scalar
  kCopy,   // a, converted to out's dtype
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual const char* name() const = 0;
  // Dense first-mode-fastest tensors on this backend's compute carrier.
  virtual Ref<Tensor> empty(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) = 0;
  virtual Ref<Tensor> zeros(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) = 0;
  // `out` is dense; `a` and `b` have out's extents (broadcast modes stride 0).
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // `out` is dense, except for kCopy, whose `out` may be any injective
  // layout (a tile's place in a compact tensor).
  virtual void unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) = 0;
  // `out` is dense with a's rank and extent 1 on every reduced mode.
  virtual void reduce_sum(const Tensor& a, const Tensor& out) = 0;
  // (..., M, K) @ (..., K, N) -> dense (..., M, N); batch modes already
  // broadcast to out's extents. Products accumulate in f32 (f64 for f64);
  // half inputs give a half `out` (rounded once) or an f32 one.
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
};

// The backend computing on `carrier` (Carrier::compute_backend): TYPE when
// it is not a compute carrier.
ComputeBackend& backend_for(const Carrier& carrier);

}  // namespace sw
