// The CPU backend's comparisons (==, !=, <, <=, >, >=) for each dtype the
// kernels compute in; their results are bool (uint8_t 0 or 1).
#include <cstdint>

#include "base/error.hpp"
#include "carriers/cpu/cpu_kernels.hpp"

namespace sw::cpu {
namespace {

template <typename T>
void compare_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using B = uint8_t;
  switch (op) {
    case BinaryOp::kEq: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(x == y); });
    case BinaryOp::kNe: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(!(x == y)); });
    case BinaryOp::kLt: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(x < y); });
    case BinaryOp::kLe: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(x <= y); });
    case BinaryOp::kGt: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(x > y); });
    case BinaryOp::kGe: return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<B>(x >= y); });
    default: internal_error("CPU binary: not a comparison");
  }
}

}  // namespace

void compare_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_compute(a.dtype(), "binary", [&](auto dt) { compare_typed<typename Elem<decltype(dt)::value>::T>(op, a, b, out); });
}

}  // namespace sw::cpu
