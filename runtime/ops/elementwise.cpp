// add, elementwise_mul, mul by a scalar, relu and the permute view, with
// their VJPs.
#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw::ops {
namespace {

void check_float_dtype(const char* op, const Tensor& t) {
  if (t.dtype() != SW_DTYPE_F32 && t.dtype() != SW_DTYPE_F64)
    type_error(std::string(op) + " supports f32 and f64 tensors, not " + dtype_name(t.dtype()));
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    type_error(std::string(op) + ": operand dtypes differ (" + dtype_name(a.dtype()) + " and " +
               dtype_name(b.dtype()) + ")");
}

Ref<Tensor> binary_raw(BinaryOp op, const Ref<Tensor>& a, const Ref<Tensor>& b, const char* name) {
  auto shape = broadcast_shapes(a->shape(), b->shape(), name);
  ComputeBackend& be = backend_for(a->carrier());
  auto out = be.empty(a->runtime_ref(), a->dtype(), shape);
  if (out->numel()) be.binary(op, *broadcast_view(*a, shape), *broadcast_view(*b, shape), *out);
  return out;
}

Ref<Tensor> scale_raw(const Ref<Tensor>& a, double s) {
  ComputeBackend& be = backend_for(a->carrier());
  auto out = be.empty(a->runtime_ref(), a->dtype(), a->shape());
  if (out->numel()) be.unary(UnaryOp::kScale, *a, s, *out);
  return out;
}

class AddNode final : public Node {
 public:
  AddNode(std::vector<int64_t> a, std::vector<int64_t> b) : a_(std::move(a)), b_(std::move(b)) {}
  const char* name() const override { return "add"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    return {edges_[0].empty() ? nullptr : sum_to(g, a_), edges_[1].empty() ? nullptr : sum_to(g, b_)};
  }

 private:
  std::vector<int64_t> a_, b_;
};

class MulNode final : public Node {
 public:
  const char* name() const override { return "elementwise_mul"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    const Ref<Tensor> a = resolve(saved_tensor(0), SW_PURPOSE_BACKWARD, name());
    const Ref<Tensor> b = resolve(saved_tensor(1), SW_PURPOSE_BACKWARD, name());
    Ref<Tensor> ga, gb;
    if (!edges_[0].empty()) ga = sum_to(binary_raw(BinaryOp::kMul, g, b, name()), a->shape());
    if (!edges_[1].empty()) gb = sum_to(binary_raw(BinaryOp::kMul, g, a, name()), b->shape());
    return {ga, gb};
  }
};

class ScaleNode final : public Node {
 public:
  explicit ScaleNode(double s) : s_(s) {}
  const char* name() const override { return "mul"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override { return {scale_raw(g, s_)}; }

 private:
  double s_;
};

class ReluNode final : public Node {
 public:
  const char* name() const override { return "relu"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    return {binary_raw(BinaryOp::kReluGrad, g, resolve(saved_tensor(0), SW_PURPOSE_BACKWARD, name()), name())};
  }
};

class PermuteNode final : public Node {
 public:
  explicit PermuteNode(std::vector<size_t> perm) : inverse_(perm.size()) {
    for (size_t i = 0; i < perm.size(); ++i) inverse_[perm[i]] = i;
  }
  const char* name() const override { return "permute"; }
  bool is_view() const override { return true; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    return {g->view(g->offset(), g->layout().permute(inverse_))};
  }

 private:
  std::vector<size_t> inverse_;
};

Ref<Tensor> binary_op(BinaryOp op, const Ref<Tensor>& a, const Ref<Tensor>& b, const char* name) {
  auto pins = check_operands(name, {a.get(), b.get()});
  check_same_dtype(name, *a, *b);
  check_float_dtype(name, *a);
  broadcast_shapes(a->shape(), b->shape(), name);
  auto out = binary_raw(op, resolve(a, SW_PURPOSE_OPERATION, name), resolve(b, SW_PURPOSE_OPERATION, name), name);
  if (should_record({a.get(), b.get()})) {
    Ref<Node> node;
    if (op == BinaryOp::kAdd) {
      node = make_ref<AddNode>(a->shape(), b->shape());
    } else {
      node = make_ref<MulNode>();
      node->save(a);
      node->save(b);
    }
    node->connect({a.get(), b.get()});
    attach(out, node);
  }
  return out;
}

}  // namespace

Ref<Tensor> add(const Ref<Tensor>& a, const Ref<Tensor>& b) { return binary_op(BinaryOp::kAdd, a, b, "add"); }

Ref<Tensor> elementwise_mul(const Ref<Tensor>& a, const Ref<Tensor>& b) {
  return binary_op(BinaryOp::kMul, a, b, "elementwise_mul");
}

Ref<Tensor> mul_scalar(const Ref<Tensor>& a, double scalar) {
  auto pins = check_operands("mul", {a.get()});
  check_float_dtype("mul", *a);
  auto out = scale_raw(resolve(a, SW_PURPOSE_OPERATION, "mul"), scalar);
  if (should_record({a.get()})) {
    auto node = make_ref<ScaleNode>(scalar);
    node->connect({a.get()});
    attach(out, node);
  }
  return out;
}

Ref<Tensor> relu(const Ref<Tensor>& a) {
  auto pins = check_operands("relu", {a.get()});
  check_float_dtype("relu", *a);
  auto x = resolve(a, SW_PURPOSE_OPERATION, "relu");
  ComputeBackend& be = backend_for(x->carrier());
  auto out = be.empty(x->runtime_ref(), x->dtype(), x->shape());
  if (out->numel()) be.unary(UnaryOp::kRelu, *x, 0.0, *out);
  if (should_record({a.get()})) {
    auto node = make_ref<ReluNode>();
    node->save(a);
    node->connect({a.get()});
    attach(out, node);
  }
  return out;
}

Ref<Tensor> permute(const Ref<Tensor>& a, const std::vector<size_t>& perm) {
  a->carrier().check_live("permute");
  if (a->carrier().is_composite())
    unsupported_error(std::string("permute is not supported on a tensor backed by a ") + a->carrier().kind_name() +
                      "; project it first");
  auto out = a->view(a->offset(), a->layout().permute(perm));
  if (should_record({a.get()})) {
    auto node = make_ref<PermuteNode>(perm);
    node->connect({a.get()});
    attach(out, node);
  }
  return out;
}

}  // namespace sw::ops
