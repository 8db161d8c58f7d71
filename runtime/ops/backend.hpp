// The kernel boundary: one interface per compute carrier kind. Op
// definitions (ops.cpp) validate, broadcast, promote dtypes and record
// autograd; backends only compute on already-shaped operands of the dtypes
// the op definitions chose. One dispatch path serves every compute carrier.
// A backend that cannot run a kernel (a dtype, or a whole op, it has no
// shader for) fails UNSUPPORTED naming the op and its carrier.
#pragma once

#include <vector>

#include "core/tensor.hpp"
#include "ops/op_table.hpp"  // UnaryOp, BinaryOp, ReduceOp (what each computes: ops/op_table.def)

namespace sw {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual const char* name() const = 0;
  // Dense first-mode-fastest tensors on this backend's compute carrier.
  virtual Ref<Tensor> empty(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) = 0;
  virtual Ref<Tensor> zeros(const Ref<Runtime>& rt, sw_dtype_t dtype, const std::vector<int64_t>& extents) = 0;
  // Uninitialised storage for `size` slots that a read will fill; a backend
  // over host memory starts it `phase` bytes past a 4096-byte boundary (the
  // remainder at which a direct-I/O read lands in place, Carrier::read_phase),
  // others ignore `phase`.
  virtual Ref<Carrier> read_target(const Ref<Runtime>& rt, sw_dtype_t dtype, size_t size, size_t phase) {
    (void)phase;
    return empty(rt, dtype, {static_cast<int64_t>(size)})->carrier_ref();
  }
  // `out` is dense; `a` and `b` have out's extents (broadcast modes stride
  // 0) and one dtype: f32, f64, i32, i64, u8 or bool. `out` has that dtype,
  // or bool for the comparisons. `out` may be `a` itself (an in-place op on
  // a dense tensor).
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // `out` is dense (or `a` itself), of a's dtype, except for kCopy, whose
  // `out` may be any injective layout (a tile's place in a compact tensor, a
  // slice being assigned) and any dtype: conversions round to nearest, and
  // floating values become integers truncated toward zero, saturating, NaN
  // as 0.
  virtual void unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) = 0;
  // `out` is dense with a's rank and extent 1 on every reduced mode.
  virtual void reduce_sum(const Tensor& a, const Tensor& out) = 0;
  // As reduce_sum, for every ReduceOp; `out` has a's dtype.
  virtual void reduce(ReduceOp op, const Tensor& a, const Tensor& out) = 0;
  // (..., M, K) @ (..., K, N) -> dense (..., M, N); batch modes already
  // broadcast to out's extents. Products accumulate in f32 (f64 for f64);
  // half inputs give a half `out` (rounded once) or an f32 one.
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // Independent matmuls (their outs disjoint), each as matmul. A backend
  // may run them as one job: the CPU backend shares its threads across the
  // vector products among them (one token through several experts).
  struct MatmulCall {
    const Tensor* a;
    const Tensor* b;
    const Tensor* out;
  };
  virtual void matmuls(const std::vector<MatmulCall>& calls) {
    for (const MatmulCall& c : calls) matmul(*c.a, *c.b, *c.out);
  }
  // out[i] = a[i] where cond[i]: `out` dense, `cond` bool and `a` of out's
  // dtype, both with out's extents (broadcast modes stride 0).
  virtual void masked_copy(const Tensor& cond, const Tensor& a, const Tensor& out) = 0;
  // The k largest (or smallest) values along `axis` of `a` and their
  // indices (i64), sorted (descending for largest), ties to the lower index,
  // NaN counting as the most extreme. `values` and `indices` are dense with
  // a's extents but k along `axis`.
  virtual void select_k(const Tensor& a, int64_t k, size_t axis, bool largest, const Tensor& values,
                        const Tensor& indices) = 0;
  // out[c] = a[c with c[axis] = index[c]]: `out` dense with index's extents
  // (each at most a's), `index` i32 or i64. INDEX, before anything is
  // written, for an index outside [0, a's extent).
  virtual void gather(const Tensor& a, size_t axis, const Tensor& index, const Tensor& out) = 0;
  // out[c with c[axis] = index[c]] += src[c] for every c of src's extents
  // (index has them too): `out` dense, modified in place, of src's dtype;
  // duplicates accumulate in index order. INDEX as for gather.
  virtual void scatter_add(const Tensor& out, size_t axis, const Tensor& index, const Tensor& src) = 0;
};

// The backend computing on `carrier` (Carrier::compute_backend): TYPE when
// it is not a compute carrier.
ComputeBackend& backend_for(const Carrier& carrier);

}  // namespace sw
