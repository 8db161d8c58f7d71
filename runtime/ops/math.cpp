// The elementwise surface beyond the six: sw_unary, sw_binary and their
// scalar and in-place forms, where, fill and copy_from, with type
// promotion and VJPs.
#include <cmath>

#include "ops/op_util.hpp"

namespace sw::ops {
namespace {

bool compares(Binary op) { return is_comparison(kernel_of(op)); }
// The ops a TiledEvictable tensor takes directly (the six: add, mul).
bool direct(Binary op) { return op == Binary::kAdd || op == Binary::kMul; }

struct Plan {
  sw_dtype_t compute;  // what the kernel runs in
  sw_dtype_t result;   // what the op returns
};

// The dtypes of `a op b` for operands of dtypes a and b (PyTorch's rules).
Plan plan_binary(Binary op, sw_dtype_t a, sw_dtype_t b) {
  sw_dtype_t p = promote_types(a, b);
  const char* name = op_name(op);
  if (p == SW_DTYPE_BOOL && op == Binary::kSub)
    type_error("sub of two bool tensors is not supported; use ne (logical xor) instead");
  if (p == SW_DTYPE_BOOL && op == Binary::kPow) type_error(std::string(name) + " of two bool tensors is not supported");
  if (op == Binary::kDiv && !dtype_is_float(p)) p = SW_DTYPE_F32;  // true division, as PyTorch
  if (compares(op)) return {compute_dtype(p), SW_DTYPE_BOOL};
  return {compute_dtype(p), p};
}

Ref<Tensor> round_to(const Ref<Tensor>& t, sw_dtype_t dtype) { return as_dtype(t, dtype); }

// ---- VJPs --------------------------------------------------------------------

// The gradients of a op b with respect to a and b (either may be skipped),
// in the cotangent's compute dtype `gc`, before summing to the operands'
// shapes. `x`, `y` are the operands' values (null when not saved).
std::pair<Ref<Tensor>, Ref<Tensor>> binary_vjp(Binary op, const Ref<Tensor>& g, const Ref<Tensor>& x,
                                               const Ref<Tensor>& y, bool need_a, bool need_b, sw_dtype_t gc) {
  Ref<Tensor> ga, gb;
  auto zero = [&] { return scalar_tensor(*g, gc, 0.0); };
  switch (op) {
    case Binary::kAdd:
      ga = g;
      gb = g;
      break;
    case Binary::kSub:
      ga = g;
      if (need_b) gb = unary_raw(UnaryOp::kScale, g, gc, -1.0);
      break;
    case Binary::kMul:
      if (need_a) ga = binary_raw(BinaryOp::kMul, g, y, gc);
      if (need_b) gb = binary_raw(BinaryOp::kMul, g, x, gc);
      break;
    case Binary::kDiv: {
      auto q = binary_raw(BinaryOp::kDiv, g, y, gc);
      ga = q;
      if (need_b)  // -g * x / y^2 = -(g / y) * x / y
        gb = unary_raw(UnaryOp::kScale, binary_raw(BinaryOp::kDiv, binary_raw(BinaryOp::kMul, q, x, gc), y, gc), gc,
                       -1.0);
      break;
    }
    case Binary::kPow:
      if (need_a) {  // g * y * x^(y - 1), 0 where y == 0 (as PyTorch)
        auto e = binary_raw(BinaryOp::kSub, y, scalar_tensor(*g, gc, 1.0), gc);
        auto d = binary_raw(BinaryOp::kMul, binary_raw(BinaryOp::kMul, g, y, gc), binary_raw(BinaryOp::kPow, x, e, gc), gc);
        ga = where_raw(binary_raw(BinaryOp::kEq, y, zero(), gc), zero(), d, gc);
      }
      if (need_b) {  // g * x^y * log(x), 0 where x == 0 and y >= 0
        auto d = binary_raw(BinaryOp::kMul, binary_raw(BinaryOp::kMul, g, binary_raw(BinaryOp::kPow, x, y, gc), gc),
                            unary_raw(UnaryOp::kLog, x, gc), gc);
        auto mask = binary_raw(BinaryOp::kMul, binary_raw(BinaryOp::kEq, x, zero(), gc),
                               binary_raw(BinaryOp::kGe, y, zero(), gc), SW_DTYPE_BOOL);
        gb = where_raw(mask, zero(), d, gc);
      }
      break;
    case Binary::kMaximum:
    case Binary::kMinimum: {
      // The larger (smaller) operand takes g; a tie splits it (as PyTorch).
      auto wins = binary_raw(op == Binary::kMaximum ? BinaryOp::kGt : BinaryOp::kLt, x, y, gc);
      auto loses = binary_raw(op == Binary::kMaximum ? BinaryOp::kLt : BinaryOp::kGt, x, y, gc);
      auto tie = binary_raw(BinaryOp::kEq, x, y, gc);
      auto half = unary_raw(UnaryOp::kScale, g, gc, 0.5);
      if (need_a) ga = where_raw(wins, g, where_raw(tie, half, zero(), gc), gc);
      if (need_b) gb = where_raw(loses, g, where_raw(tie, half, zero(), gc), gc);
      break;
    }
    default:
      break;  // comparisons: no gradient
  }
  return {need_a ? ga : nullptr, need_b ? gb : nullptr};
}

bool saves_operands(Binary op) { return op != Binary::kAdd && op != Binary::kSub && !compares(op); }

void record_binary(Binary op, const Ref<Tensor>& out, const Ref<Tensor>& a, const Ref<Tensor>& b) {
  const std::vector<int64_t> sa = a->shape(), sb = b->shape();
  const sw_dtype_t da = a->dtype(), db = b->dtype(), gc = compute_dtype(out->dtype());
  std::vector<Ref<Tensor>> saved;
  if (saves_operands(op)) saved = {a, b};
  record(out, op_name(op), {a.get(), b.get()}, saved, [=](const Ref<Tensor>& g, const FnNode& n) {
    Ref<Tensor> x, y;
    if (saves_operands(op)) {
      x = n.value(0);
      y = n.value(1);
    }
    auto [ga, gb] = binary_vjp(op, g, x, y, n.needs(0), n.needs(1), gc);
    return std::vector<Ref<Tensor>>{ga ? grad_to(ga, sa, da) : nullptr, gb ? grad_to(gb, sb, db) : nullptr};
  });
}

// The scalar `s` in `dtype`, checked: VALUE when the weak scalar cannot take
// the tensor's dtype.
void check_scalar(const char* op, double s, sw_dtype_t dtype) {
  if (dtype_is_float(dtype)) return;
  const bool fits = std::isfinite(s) && s == std::floor(s) &&
                    (dtype == SW_DTYPE_BOOL ? (s == 0 || s == 1)
                     : dtype == SW_DTYPE_U8 ? (s >= 0 && s <= 255)
                     : dtype == SW_DTYPE_I32 ? (s >= -2147483648.0 && s <= 2147483647.0)
                                             : (s >= -9223372036854775808.0 && s < 9223372036854775808.0));
  if (!fits)
    value_error(std::string(op) + ": the scalar " + std::to_string(s) + " does not fit the tensor's dtype " +
                dtype_name(dtype) + "; convert the tensor first (sw_tensor_to_dtype)");
}

// The plan of `t op s` or `s op t` with a weak scalar (it takes t's dtype).
Plan plan_scalar(Binary op, sw_dtype_t d, double s, bool scalar_first) {
  const char* name = op_name(op);
  if (op != Binary::kDiv) check_scalar(name, s, d);
  if (d == SW_DTYPE_BOOL && (op == Binary::kSub || op == Binary::kPow))
    type_error(std::string(name) + " of a bool tensor is not supported; convert it first (sw_tensor_to_dtype)");
  const bool integer_power = op == Binary::kPow && dtype_category(d) == DtypeCategory::kInteger;
  if (integer_power && !scalar_first && s < 0)
    value_error("pow: integers to negative integer powers are not allowed; convert the tensor to a floating dtype first");
  return plan_binary(op, d, d);
}

Ref<Tensor> scalar_op(Binary op, const Ref<Tensor>& t, double s, bool scalar_first) {
  const char* name = op_name(op);
  if (!direct(op)) require_plain(name, {t.get()});
  auto pins = check_operands(name, {t.get()});
  const Plan plan = plan_scalar(op, t->dtype(), s, scalar_first);
  Ref<Tensor> x = resolve(t, SW_PURPOSE_OPERATION, name);
  Ref<Tensor> out;
  if (op == Binary::kMul && dtype_is_float(plan.compute)) {
    out = unary_raw(UnaryOp::kScale, x, plan.compute, s);
  } else {
    auto st = scalar_tensor(*x, plan.compute, s);
    out = scalar_first ? binary_raw(kernel_of(op), st, x, plan.compute) : binary_raw(kernel_of(op), x, st, plan.compute);
  }
  out = round_to(out, plan.result);
  const std::vector<int64_t> shape = t->shape();
  const sw_dtype_t dt = t->dtype(), gc = compute_dtype(out->dtype());
  std::vector<Ref<Tensor>> saved;
  if (saves_operands(op)) saved = {t};
  record(out, name, {t.get()}, saved, [=](const Ref<Tensor>& g, const FnNode& n) {
    Ref<Tensor> x = saves_operands(op) ? n.value(0) : nullptr;
    Ref<Tensor> c = x ? scalar_tensor(*x, gc, s) : nullptr;
    Ref<Tensor> gt;
    if (op == Binary::kMul) {
      gt = unary_raw(UnaryOp::kScale, g, gc, s);
    } else if (scalar_first) {
      gt = binary_vjp(op, g, c, x, false, true, gc).second;
    } else {
      gt = binary_vjp(op, g, x, c, true, false, gc).first;
    }
    return std::vector<Ref<Tensor>>{gt ? grad_to(gt, shape, dt) : nullptr};
  });
  return out;
}

// ---- in-place ----------------------------------------------------------------

std::string inplace_name(const char* op) { return std::string(op) + "_"; }

// The checks of every in-place write into `a`; returns whether it records.
bool check_inplace(const std::string& name, const Ref<Tensor>& a, const Tensor* other, sw_dtype_t result) {
  require_plain(name.c_str(), {a.get(), other});
  a->carrier().check_mutable(name.c_str());
  if (!a->layout().is_injective())
    value_error(name + ": the tensor's layout reaches some slot from several elements (an expanded view); "
                "write to a contiguous copy instead");
  if (dtype_category(result) > dtype_category(a->dtype()))
    type_error(name + ": the result dtype " + dtype_name(result) + " cannot be stored in the " + dtype_name(a->dtype()) +
               " tensor being modified in-place");
  const bool records = grad_enabled() && dtype_is_float(a->dtype()) &&
                       (a->requires_grad() || (other && other->requires_grad()));
  if (records) {
    if (a->is_leaf())
      state_error(name + ": a leaf tensor that requires grad cannot be modified in-place (under grad mode); "
                  "clone() it, or modify it under no_grad");
    if (node_of(*a)->is_view())
      state_error(name + ": the tensor is a view (" + node_of(*a)->name() +
                  ") of a tensor that requires grad, whose history would not see the change; clone() it first");
  }
  return records;
}

// Whether `b` may be read while `a` is written element by element.
bool disjoint_or_same(const Tensor& a, const Tensor& b) {
  if (&a.carrier() != &b.carrier()) return true;
  return a.offset() == b.offset() && a.layout().equals(b.layout());
}

// a := value (a's shape or broadcastable), converted to a's dtype.
void store_into(const Ref<Tensor>& a, const Ref<Tensor>& value) {
  ComputeBackend& be = backend_of(*a);
  if (a->numel()) be.unary(UnaryOp::kCopy, *broadcast_view(*value, a->shape()), 0.0, *a);
}

// The in-place write of a recorded result: `a` takes `result`'s values and
// its history (converted to a's dtype by a recorded conversion).
void adopt_result(const Ref<Tensor>& a, Ref<Tensor> result) {
  result = to_dtype(result, a->dtype());
  store_into(a, result);
  a->set_grad_fn(result->grad_fn());
}

// `a`'s current values under `a`'s history: the first operand of the
// out-of-place op an in-place one records.
Ref<Tensor> current_value(const Ref<Tensor>& a) {
  auto old = copy_as(*a, a->dtype());
  old->set_grad_fn(a->grad_fn());
  return old;
}

}  // namespace

Ref<Tensor> unary(Unary op, const Ref<Tensor>& a) {
  const char* name = op_name(op);
  if (op != Unary::kRelu) require_plain(name, {a.get()});
  auto pins = check_operands(name, {a.get()});
  const sw_dtype_t d = a->dtype();
  const bool elementary = op == Unary::kNeg || op == Unary::kAbs || op == Unary::kRelu;
  if (elementary && d == SW_DTYPE_BOOL)
    type_error(std::string(name) + " of a bool tensor is not supported; convert it first (sw_tensor_to_dtype)");
  // Transcendental ops of integers compute in f32 (PyTorch's default dtype).
  const sw_dtype_t result = elementary || dtype_is_float(d) ? d : SW_DTYPE_F32;
  const sw_dtype_t compute = compute_dtype(result);
  Ref<Tensor> x = resolve(a, SW_PURPOSE_OPERATION, name);
  Ref<Tensor> out = round_to(unary_raw(kernel_of(op), x, compute), result);
  // exp, sqrt, rsqrt, sigmoid and tanh differentiate through their output.
  const bool through_output = op == Unary::kExp || op == Unary::kSqrt || op == Unary::kRsqrt ||
                              op == Unary::kSigmoid || op == Unary::kTanh;
  const sw_dtype_t da = a->dtype();
  record(out, name, {a.get()}, {through_output ? save_output(out) : a}, [=](const Ref<Tensor>& g, const FnNode& n) {
    const Ref<Tensor> v = n.value(0);
    Ref<Tensor> ga;
    switch (op) {
      case Unary::kNeg: ga = unary_raw(UnaryOp::kScale, g, compute, -1.0); break;
      case Unary::kAbs: ga = binary_raw(BinaryOp::kAbsGrad, g, v, compute); break;
      case Unary::kExp: ga = binary_raw(BinaryOp::kMul, g, v, compute); break;
      case Unary::kLog: ga = binary_raw(BinaryOp::kDiv, g, v, compute); break;
      case Unary::kSqrt: ga = binary_raw(BinaryOp::kSqrtGrad, g, v, compute); break;
      case Unary::kRsqrt: ga = binary_raw(BinaryOp::kRsqrtGrad, g, v, compute); break;
      case Unary::kSilu: ga = binary_raw(BinaryOp::kSiluGrad, g, v, compute); break;
      case Unary::kGelu: ga = binary_raw(BinaryOp::kGeluGrad, g, v, compute); break;
      case Unary::kSigmoid: ga = binary_raw(BinaryOp::kSigmoidGrad, g, v, compute); break;
      case Unary::kTanh: ga = binary_raw(BinaryOp::kTanhGrad, g, v, compute); break;
      case Unary::kRelu: ga = binary_raw(BinaryOp::kReluGrad, g, v, compute); break;
    }
    return std::vector<Ref<Tensor>>{as_dtype(ga, da)};
  });
  return out;
}

Ref<Tensor> binary(Binary op, const Ref<Tensor>& a, const Ref<Tensor>& b) {
  const char* name = op_name(op);
  if (!direct(op)) require_plain(name, {a.get(), b.get()});
  auto pins = check_operands(name, {a.get(), b.get()});
  broadcast_shapes(a->shape(), b->shape(), name);
  const Plan plan = plan_binary(op, a->dtype(), b->dtype());
  Ref<Tensor> x = resolve(a, SW_PURPOSE_OPERATION, name), y = resolve(b, SW_PURPOSE_OPERATION, name);
  Ref<Tensor> out = round_to(binary_raw(kernel_of(op), x, y, plan.compute), plan.result);
  record_binary(op, out, a, b);
  return out;
}

Ref<Tensor> binary_scalar(Binary op, const Ref<Tensor>& a, double s) { return scalar_op(op, a, s, false); }
Ref<Tensor> scalar_binary(Binary op, double s, const Ref<Tensor>& b) { return scalar_op(op, b, s, true); }

void binary_inplace(Binary op, const Ref<Tensor>& a, const Ref<Tensor>& b) {
  const std::string name = inplace_name(op_name(op));
  auto pins = check_operands(name.c_str(), {a.get(), b.get()});
  const Plan plan = plan_binary(op, a->dtype(), b->dtype());
  const bool records = check_inplace(name, a, b.get(), plan.result);
  if (broadcast_shapes(a->shape(), b->shape(), name.c_str()) != a->shape())
    value_error(name + ": the operand of shape " + shape_text(b->shape()) +
                " does not broadcast to the modified tensor's shape " + shape_text(a->shape()));
  if (records) {
    adopt_result(a, binary(op, current_value(a), b));
  } else if (a->layout().is_dense() && plan.compute == a->dtype() && !compares(op) && disjoint_or_same(*a, *b)) {
    // The common case, in one pass: the kernel writes a's own slots.
    Ref<Tensor> y = as_dtype(b, plan.compute);
    if (a->numel()) backend_of(*a).binary(kernel_of(op), *a, *broadcast_view(*y, a->shape()), *a);
  } else {
    store_into(a, binary_raw(kernel_of(op), a, b, plan.compute));
  }
  a->carrier().bump_version();
}

void binary_scalar_inplace(Binary op, const Ref<Tensor>& a, double s) {
  const std::string name = inplace_name(op_name(op));
  auto pins = check_operands(name.c_str(), {a.get()});
  const Plan plan = plan_scalar(op, a->dtype(), s, false);
  const bool records = check_inplace(name, a, nullptr, plan.result);
  if (records) {
    adopt_result(a, binary_scalar(op, current_value(a), s));
  } else if (a->layout().is_dense() && plan.compute == a->dtype() && !compares(op)) {
    if (a->numel()) {
      if (op == Binary::kMul && dtype_is_float(plan.compute))
        backend_of(*a).unary(UnaryOp::kScale, *a, s, *a);
      else
        backend_of(*a).binary(kernel_of(op), *a, *broadcast_view(*scalar_tensor(*a, plan.compute, s), a->shape()), *a);
    }
  } else {
    store_into(a, binary_raw(kernel_of(op), a, scalar_tensor(*a, plan.compute, s), plan.compute));
  }
  a->carrier().bump_version();
}

Ref<Tensor> where(const Ref<Tensor>& cond, const Ref<Tensor>& a, const Ref<Tensor>& b) {
  require_plain("where", {cond.get(), a.get(), b.get()});
  auto pins = check_operands("where", {cond.get(), a.get(), b.get()});
  if (cond->dtype() != SW_DTYPE_BOOL)
    type_error(std::string("where: the condition must be a bool tensor, not ") + dtype_name(cond->dtype()) +
               "; compare it first (sw_binary with SW_BINARY_NE and 0, say)");
  broadcast_shapes(broadcast_shapes(cond->shape(), a->shape(), "where"), b->shape(), "where");
  const sw_dtype_t result = promote_types(a->dtype(), b->dtype());
  auto out = round_to(where_raw(cond, a, b, compute_dtype(result)), result);
  const std::vector<int64_t> sa = a->shape(), sb = b->shape();
  const sw_dtype_t da = a->dtype(), db = b->dtype(), gc = compute_dtype(result);
  // The condition takes no gradient: it is the node's saved tensor only.
  record(out, "where", {a.get(), b.get()}, {cond}, [=](const Ref<Tensor>& g, const FnNode& n) {
    const Ref<Tensor> c = n.value(0), zero = scalar_tensor(*g, gc, 0.0);
    Ref<Tensor> ga, gb;
    if (n.needs(0)) ga = grad_to(where_raw(c, g, zero, gc), sa, da);
    if (n.needs(1)) gb = grad_to(where_raw(c, zero, g, gc), sb, db);
    return std::vector<Ref<Tensor>>{ga, gb};
  });
  return out;
}

void fill(const Ref<Tensor>& a, double value) {
  auto pins = check_operands("fill_", {a.get()});
  check_scalar("fill_", value, a->dtype());
  const bool records = check_inplace("fill_", a, nullptr, a->dtype());
  store_into(a, scalar_tensor(*a, a->dtype(), value));
  if (records) {
    // The values no longer depend on the old history: a node without edges.
    auto node = make_ref<FnNode>("fill_", [](const Ref<Tensor>&, const FnNode&) { return std::vector<Ref<Tensor>>{}; },
                                 false);
    attach(a, node);
  }
  a->carrier().bump_version();
}

void copy_from(const Ref<Tensor>& dst, const Ref<Tensor>& src) {
  auto pins = check_operands("copy_", {dst.get(), src.get()});
  const bool records = check_inplace("copy_", dst, src.get(), SW_DTYPE_BOOL);
  if (broadcast_shapes(dst->shape(), src->shape(), "copy_") != dst->shape())
    value_error("copy_: the source of shape " + shape_text(src->shape()) +
                " does not broadcast to the destination's shape " + shape_text(dst->shape()));
  // A source overlapping the destination differently is read from a copy.
  Ref<Tensor> from = disjoint_or_same(*dst, *src) ? src : copy_as(*src, src->dtype());
  store_into(dst, from);
  if (records) {
    const std::vector<int64_t> ss = src->shape();
    const sw_dtype_t ds = src->dtype();
    auto node = make_ref<FnNode>("copy_", [=](const Ref<Tensor>& g, const FnNode& n) {
      return std::vector<Ref<Tensor>>{n.needs(0) && dtype_is_float(ds) ? grad_to(g, ss, ds) : nullptr};
    }, false);
    node->connect({src.get()});
    attach(dst, node);
  }
  dst->carrier().bump_version();
}

}  // namespace sw::ops
