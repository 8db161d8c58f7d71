// The integer and bool binary ops: instances of cpu_elementwise_ops.hpp's tables.
#include "carriers/cpu/cpu_elementwise_ops.hpp"

namespace sw::cpu::elementwise {

void bool_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using T = uint8_t;
  switch (op) {
    case BinaryOp::kAdd: case BinaryOp::kMaximum:
      return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<T>(x | y); });
    case BinaryOp::kMul: case BinaryOp::kMinimum:
      return binary_typed<T>(a, b, out, [](T x, T y) { return static_cast<T>(x & y); });
    default: internal_error("CPU binary: not a bool op");
  }
}

template void int_binary<int32_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&);
template void int_binary<int64_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&);
template void int_binary<uint8_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&);

}  // namespace sw::cpu::elementwise
