// Every unary op: instances of cpu_elementwise_ops.hpp's tables.
#include "carriers/cpu/cpu_elementwise_ops.hpp"

namespace sw::cpu::elementwise {

template void float_unary<float>(UnaryOp, const Tensor&, double, const Tensor&);
template void float_unary<double>(UnaryOp, const Tensor&, double, const Tensor&);
template void int_unary<int32_t>(UnaryOp, const Tensor&, const Tensor&);
template void int_unary<int64_t>(UnaryOp, const Tensor&, const Tensor&);
template void int_unary<uint8_t>(UnaryOp, const Tensor&, const Tensor&);

}  // namespace sw::cpu::elementwise
