// The CPU backend's elementwise op tables as templates, one per dtype
// family; each is instantiated once, in its own translation unit
// (cpu_elementwise_*.cpp), so that the compiler's heaviest work in the
// backend runs in parallel, and cpu_elementwise.cpp dispatches to them.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/error.hpp"
#include "carriers/cpu/cpu_kernels.hpp"

namespace sw::cpu::elementwise {

template <typename T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
void float_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd: return binary_typed<T>(a, b, out, [](T x, T y) { return x + y; });
    case BinaryOp::kMul: return binary_typed<T>(a, b, out, [](T x, T y) { return x * y; });
    case BinaryOp::kReluGrad: return binary_typed<T>(a, b, out, [](T g, T x) { return x > T(0) ? g : T(0); });
    case BinaryOp::kSub: return binary_typed<T>(a, b, out, [](T x, T y) { return x - y; });
    case BinaryOp::kDiv: return binary_typed<T>(a, b, out, [](T x, T y) { return x / y; });
    case BinaryOp::kPow: return binary_typed<T>(a, b, out, [](T x, T y) { return std::pow(x, y); });
    case BinaryOp::kMaximum:
      return binary_typed<T>(a, b, out, [](T x, T y) { return (x > y || is_nan(x)) ? x : y; });
    case BinaryOp::kMinimum:
      return binary_typed<T>(a, b, out, [](T x, T y) { return (x < y || is_nan(x)) ? x : y; });
    case BinaryOp::kAbsGrad:
      return binary_typed<T>(a, b, out, [](T g, T x) { return x > T(0) ? g : x < T(0) ? -g : T(0); });
    case BinaryOp::kSiluGrad:
      return binary_typed<T>(a, b, out, [](T g, T x) {
        const T s = sigmoid_of(x);
        return g * (s * (T(1) + x * (T(1) - s)));
      });
    case BinaryOp::kGeluGrad:
      return binary_typed<T>(a, b, out, [](T g, T x) {
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
        const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);  // 1 / sqrt(2 pi)
        return g * (cdf + x * pdf);
      });
    case BinaryOp::kSigmoidGrad: return binary_typed<T>(a, b, out, [](T g, T y) { return g * (y * (T(1) - y)); });
    case BinaryOp::kTanhGrad: return binary_typed<T>(a, b, out, [](T g, T y) { return g * (T(1) - y * y); });
    case BinaryOp::kSqrtGrad: return binary_typed<T>(a, b, out, [](T g, T y) { return g / (T(2) * y); });
    case BinaryOp::kRsqrtGrad: return binary_typed<T>(a, b, out, [](T g, T y) { return T(-0.5) * g * (y * y * y); });
    default: internal_error("CPU binary: not a floating op");
  }
}

// An integer power, exactly (modulo 2^bits); a negative exponent gives
// 1 / base^-e truncated toward zero (0 unless |base| is 1).
template <typename T>
T int_pow(T base, T e) {
  if constexpr (std::is_signed_v<T>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (e) {
    if (e & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    e = static_cast<T>(e >> 1);
  }
  return result;
}

template <typename T>
void int_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd: return binary_typed<T>(a, b, out, [](T x, T y) { return wrap_add(x, y); });
    case BinaryOp::kSub: return binary_typed<T>(a, b, out, [](T x, T y) { return wrap_sub(x, y); });
    case BinaryOp::kMul: return binary_typed<T>(a, b, out, [](T x, T y) { return wrap_mul(x, y); });
    case BinaryOp::kPow: return binary_typed<T>(a, b, out, [](T x, T y) { return int_pow(x, y); });
    case BinaryOp::kMaximum: return binary_typed<T>(a, b, out, [](T x, T y) { return x > y ? x : y; });
    case BinaryOp::kMinimum: return binary_typed<T>(a, b, out, [](T x, T y) { return x < y ? x : y; });
    default: internal_error("CPU binary: not an integer op");
  }
}

// Defined in cpu_elementwise_int.cpp.
void bool_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);


template <typename T>
void float_unary(UnaryOp op, const Tensor& a, double scalar, const Tensor& out) {
  const T s = static_cast<T>(scalar);
  switch (op) {
    case UnaryOp::kRelu: return unary_typed<T>(a, out, [](T x) { return x > T(0) ? x : T(0); });
    case UnaryOp::kScale: return unary_typed<T>(a, out, [s](T x) { return x * s; });
    case UnaryOp::kNeg: return unary_typed<T>(a, out, [](T x) { return -x; });
    case UnaryOp::kAbs: return unary_typed<T>(a, out, [](T x) { return std::abs(x); });
    case UnaryOp::kExp: return unary_typed<T>(a, out, [](T x) { return std::exp(x); });
    case UnaryOp::kLog: return unary_typed<T>(a, out, [](T x) { return std::log(x); });
    case UnaryOp::kSqrt: return unary_typed<T>(a, out, [](T x) { return std::sqrt(x); });
    case UnaryOp::kRsqrt: return unary_typed<T>(a, out, [](T x) { return T(1) / std::sqrt(x); });
    case UnaryOp::kSilu: return unary_typed<T>(a, out, [](T x) { return x / (T(1) + std::exp(-x)); });
    case UnaryOp::kGelu:
      return unary_typed<T>(a, out, [](T x) { return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2))); });
    case UnaryOp::kSigmoid: return unary_typed<T>(a, out, [](T x) { return sigmoid_of(x); });
    case UnaryOp::kTanh: return unary_typed<T>(a, out, [](T x) { return std::tanh(x); });
    default: internal_error("CPU unary: not a floating op");
  }
}

template <typename T>
void int_unary(UnaryOp op, const Tensor& a, const Tensor& out) {
  switch (op) {
    case UnaryOp::kRelu: return unary_typed<T>(a, out, [](T x) { return x > T(0) ? x : T(0); });
    case UnaryOp::kNeg: return unary_typed<T>(a, out, [](T x) { return wrap_sub(T(0), x); });
    case UnaryOp::kAbs: return unary_typed<T>(a, out, [](T x) { return x < T(0) ? wrap_sub(T(0), x) : x; });
    default: internal_error("CPU unary: not an integer op");
  }
}

// Instantiated in cpu_elementwise_{f32,f64,unary,int}.cpp.
#define SW_CPU_ELEMENTWISE_INSTANCES(X)                                                     \
  X(void float_binary<float>(BinaryOp, const Tensor&, const Tensor&, const Tensor&))       \
  X(void float_binary<double>(BinaryOp, const Tensor&, const Tensor&, const Tensor&))      \
  X(void float_unary<float>(UnaryOp, const Tensor&, double, const Tensor&))                \
  X(void float_unary<double>(UnaryOp, const Tensor&, double, const Tensor&))               \
  X(void int_binary<int32_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&))       \
  X(void int_binary<int64_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&))       \
  X(void int_binary<uint8_t>(BinaryOp, const Tensor&, const Tensor&, const Tensor&))       \
  X(void int_unary<int32_t>(UnaryOp, const Tensor&, const Tensor&))                        \
  X(void int_unary<int64_t>(UnaryOp, const Tensor&, const Tensor&))                        \
  X(void int_unary<uint8_t>(UnaryOp, const Tensor&, const Tensor&))

#define SW_CPU_ELEMENTWISE_EXTERN(decl) extern template decl;
SW_CPU_ELEMENTWISE_INSTANCES(SW_CPU_ELEMENTWISE_EXTERN)
#undef SW_CPU_ELEMENTWISE_EXTERN

}  // namespace sw::cpu::elementwise
