// The f64 binary ops: instances of cpu_elementwise_ops.hpp's tables.
#include "carriers/cpu/cpu_elementwise_ops.hpp"

namespace sw::cpu::elementwise {

template void float_binary<double>(BinaryOp, const Tensor&, const Tensor&, const Tensor&);

}  // namespace sw::cpu::elementwise
