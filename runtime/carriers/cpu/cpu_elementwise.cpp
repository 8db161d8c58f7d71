// The CPU backend's elementwise op tables: every binary op but the
// comparisons, and every unary op but the copy, for each dtype the kernels
// compute in. The tables themselves are templates in cpu_elementwise_ops.hpp,
// instantiated in cpu_elementwise_{f32,f64,unary,int}.cpp.
#include "carriers/cpu/cpu_elementwise_ops.hpp"

namespace sw::cpu {

void binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_compute(a.dtype(), "binary", [&](auto dt) {
    constexpr sw_dtype_t D = decltype(dt)::value;
    using T = typename Elem<D>::T;
    if constexpr (D == SW_DTYPE_F32 || D == SW_DTYPE_F64)
      elementwise::float_binary<T>(op, a, b, out);
    else if constexpr (D == SW_DTYPE_BOOL)
      elementwise::bool_binary(op, a, b, out);
    else
      elementwise::int_binary<T>(op, a, b, out);
  });
}

void unary_kernel(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) {
  dispatch_compute(out.dtype(), "unary", [&](auto dt) {
    constexpr sw_dtype_t D = decltype(dt)::value;
    using T = typename Elem<D>::T;
    if constexpr (D == SW_DTYPE_F32 || D == SW_DTYPE_F64)
      elementwise::float_unary<T>(op, a, scalar, out);
    else if constexpr (D == SW_DTYPE_BOOL)
      internal_error("CPU unary: no bool variant");
    else
      elementwise::int_unary<T>(op, a, out);
  });
}

}  // namespace sw::cpu
