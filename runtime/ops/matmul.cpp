// matmul with NumPy semantics, and its VJP.
#include "autograd/node.hpp"
#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw::ops {
namespace {

// Views rank-1 operands as matrices: a (K) -> (1, K), b (K) -> (K, 1).
Ref<Tensor> as_matrix(const Tensor& t, bool left) {
  if (t.rank() >= 2) return t.view(t.offset(), t.layout_ref());
  std::vector<Mode> modes{t.layout().modes()[0]};
  if (left)
    modes.insert(modes.begin(), Mode::make_leaf(1, 0));
  else
    modes.push_back(Mode::make_leaf(1, 0));
  return t.view(t.offset(), Layout::make(std::move(modes)));
}

Ref<Tensor> swap_last(const Tensor& t) {
  std::vector<size_t> perm(t.rank());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return t.view(t.offset(), t.layout().permute(perm));
}

// The non-recording matmul over matrices (rank >= 2) of one dtype, giving
// an `out_dtype` result (checked by the caller).
Ref<Tensor> matmul_matrices(const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t out_dtype) {
  const size_t ra = a->rank(), rb = b->rank();
  const int64_t M = a->shape()[ra - 2], K = a->shape()[ra - 1], Kb = b->shape()[rb - 2], N = b->shape()[rb - 1];
  if (K != Kb)
    value_error("matmul: contraction extents differ (" + std::to_string(K) + " and " + std::to_string(Kb) + ")");
  std::vector<int64_t> ba(a->shape().begin(), a->shape().end() - 2), bb(b->shape().begin(), b->shape().end() - 2);
  std::vector<int64_t> batch = broadcast_shapes(ba, bb, "matmul");
  std::vector<int64_t> sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  so.insert(so.end(), {M, N});
  ComputeBackend& be = backend_for(a->carrier());
  auto out = be.empty(a->runtime_ref(), out_dtype, so);
  if (out->numel()) be.matmul(*broadcast_view(*a, sa), *broadcast_view(*b, sb), *out);
  return out;
}

// The operands' dtype: a half product's cotangent is f32 when the caller
// asked for an f32 result; the VJP products run on the half operands as
// they are (rounding that small cotangent once), never on a widened copy of
// the weights.
Ref<Tensor> as_dtype(const Ref<Tensor>& t, sw_dtype_t dtype) {
  return t->dtype() == dtype ? t : copy_as(*t, dtype);
}

class MatmulNode final : public Node {
 public:
  MatmulNode(std::vector<int64_t> a_shape, std::vector<int64_t> b_shape, std::vector<int64_t> out2)
      : a_shape_(std::move(a_shape)), b_shape_(std::move(b_shape)), out2_(std::move(out2)) {}
  const char* name() const override { return "matmul"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    const Ref<Tensor> a1 = as_matrix(*resolve(saved_tensor(0), SW_PURPOSE_BACKWARD, name()), true);
    const Ref<Tensor> b1 = as_matrix(*resolve(saved_tensor(1), SW_PURPOSE_BACKWARD, name()), false);
    const sw_dtype_t dt = a1->dtype();
    auto g2 = as_dtype(reshape_dense(g, out2_), dt);
    Ref<Tensor> ga, gb;
    if (!edges_[0].empty()) {
      auto full = matmul_matrices(g2, swap_last(*b1), dt);
      ga = reshape_dense(sum_to(full, a1->shape()), a_shape_);
    }
    if (!edges_[1].empty()) {
      auto full = matmul_matrices(swap_last(*a1), g2, dt);
      gb = reshape_dense(sum_to(full, b1->shape()), b_shape_);
    }
    return {ga, gb};
  }

 private:
  std::vector<int64_t> a_shape_, b_shape_, out2_;
};

// x @ W with W (K, N) block-quantized: x (K) or (M, K) of any float dtype
// on the CPU, taken as f32; the product accumulates in f32 (the CPU
// backend's quantized kernels) and is rounded once to `out_dtype` (f32,
// bf16 or f16). Not differentiable.
Ref<Tensor> quantized_matmul(const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t out_dtype) {
  const std::string q = dtype_name(b->dtype());
  if (!dtype_is_float(a->dtype()))
    type_error("matmul: a product with " + q + " weights takes a float left operand, not " + dtype_name(a->dtype()));
  if (out_dtype == a->dtype() && !(out_dtype == SW_DTYPE_F32 || out_dtype == SW_DTYPE_BF16 ||
                                   out_dtype == SW_DTYPE_F16))
    out_dtype = SW_DTYPE_F32;
  if (out_dtype != SW_DTYPE_F32 && out_dtype != SW_DTYPE_BF16 && out_dtype != SW_DTYPE_F16)
    type_error("matmul: the result of a product with " + q + " weights is f32, bf16 or f16, not " +
               dtype_name(out_dtype));
  if (b->rank() != 2 || a->rank() > 2)
    value_error("matmul: " + q + " weights multiply as a (K, N) matrix by x (K) or (M, K); the operands have shapes " +
                shape_text(a->shape()) + " and " + shape_text(b->shape()));
  if (a->shape().back() != b->shape()[0])
    value_error("matmul: contraction extents differ (" + std::to_string(a->shape().back()) + " and " +
                std::to_string(b->shape()[0]) + ")");
  if (should_record({a.get(), b.get()}))
    unsupported_error("matmul: gradients through " + q +
                      " weights are not supported (block-quantized weights are for inference)");
  auto b1 = resolve(b, SW_PURPOSE_OPERATION, "matmul");
  if (b1->carrier().kind() != SW_CARRIER_CPU || !b1->carrier().host_data() || a->carrier().kind() != SW_CARRIER_CPU)
    unsupported_error("matmul: products with " + q + " weights run on CPU tensors only");
  int64_t s0 = 0, s1 = 0;
  if (!b1->layout().mode_stride(0, &s0) || !b1->layout().mode_stride(1, &s1) || (s0 != 1 && b1->shape()[0] > 1))
    value_error("matmul: " + q + " weights must keep whole blocks along K (first mode contiguous), not the view " +
                b1->layout().to_string());
  auto a1 = as_matrix(*copy_as(*a, SW_DTYPE_F32), true);
  ComputeBackend& be = backend_for(b1->carrier());
  auto out = be.empty(a->runtime_ref(), SW_DTYPE_F32, {a1->shape()[0], b1->shape()[1]});
  if (out->numel()) be.matmul(*a1, *b1, *out);
  auto shaped = a->rank() == 1 ? reshape_dense(out, {b1->shape()[1]}) : out;
  return out_dtype == SW_DTYPE_F32 ? shaped : copy_as(*shaped, out_dtype);
}

}  // namespace

Ref<Tensor> matmul(const Ref<Tensor>& a, const Ref<Tensor>& b) { return matmul(a, b, a->dtype()); }

Ref<Tensor> matmul(const Ref<Tensor>& a, const Ref<Tensor>& b, sw_dtype_t out_dtype) {
  const bool quantized_weights = dtype_is_quantized(b->dtype()) && !dtype_is_quantized(a->dtype());
  auto pins = check_operands("matmul", {a.get(), b.get()}, quantized_weights);
  if (quantized_weights) return quantized_matmul(a, b, out_dtype);
  if (a->dtype() != b->dtype())
    type_error(std::string("matmul: operand dtypes differ (") + dtype_name(a->dtype()) + " and " +
               dtype_name(b->dtype()) + ")");
  if (!dtype_is_float(a->dtype()))
    type_error(std::string("matmul supports f32, f64, f16 and bf16 tensors, not ") + dtype_name(a->dtype()));
  const bool half = a->dtype() == SW_DTYPE_F16 || a->dtype() == SW_DTYPE_BF16;
  if (out_dtype != a->dtype() && !(half && out_dtype == SW_DTYPE_F32))
    type_error(std::string("matmul: the result of ") + dtype_name(a->dtype()) + " operands is " +
               dtype_name(a->dtype()) + (half ? " or f32" : "") + ", not " + dtype_name(out_dtype));
  if (a->rank() == 0 || b->rank() == 0) value_error("matmul: operands must have rank >= 1, not 0");
  if (a->rank() >= 1 && b->rank() >= 1) {
    // Shape rules first: a tiled operand is only materialised for valid work.
    const int64_t K = a->shape().back(), Kb = b->rank() >= 2 ? b->shape()[b->rank() - 2] : b->shape()[0];
    if (K != Kb)
      value_error("matmul: contraction extents differ (" + std::to_string(K) + " and " + std::to_string(Kb) + ")");
  }
  auto a1 = as_matrix(*resolve(a, SW_PURPOSE_OPERATION, "matmul"), true);
  auto b1 = as_matrix(*resolve(b, SW_PURPOSE_OPERATION, "matmul"), false);
  auto out2 = matmul_matrices(a1, b1, out_dtype);
  std::vector<int64_t> result(out2->shape().begin(), out2->shape().end() - 2);
  if (a->rank() >= 2) result.push_back(out2->shape()[out2->rank() - 2]);
  if (b->rank() >= 2) result.push_back(out2->shape()[out2->rank() - 1]);
  auto out = reshape_dense(out2, result);
  if (should_record({a.get(), b.get()})) {
    auto node = make_ref<MatmulNode>(a->shape(), b->shape(), out2->shape());
    node->save(a);
    node->save(b);
    node->connect({a.get(), b.get()});
    attach(out, node);
  }
  return out;
}

}  // namespace sw::ops
