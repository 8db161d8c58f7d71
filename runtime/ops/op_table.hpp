// The enums, names and maps made from the op table (ops/op_table.def): the
// kernel ops of ComputeBackend (UnaryOp, BinaryOp, ReduceOp), the public
// ops as the ops layer takes them (ops::Unary, ops::Binary, ops::Reduce),
// their names, the public codes they stand for, and the kernel op and
// Vulkan op code of each. Adding an op is one line in op_table.def (plus
// its kernel); the static_asserts below tie the lists to the public header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>

#include "strideweave/strideweave.h"
#include "ops/op_table.def"

#define SW_OPT_ENUMERATOR(Name, ...) k##Name,
#define SW_OPT_ONE(...) +1

namespace sw {

// ---- Kernel ops -------------------------------------------------------------

enum class UnaryOp { SW_KERNEL_UNARY_OPS(SW_OPT_ENUMERATOR) };
enum class BinaryOp { SW_KERNEL_BINARY_OPS(SW_OPT_ENUMERATOR) };
enum class ReduceOp { SW_KERNEL_REDUCE_OPS(SW_OPT_ENUMERATOR) };

namespace optable {

struct KernelRow {
  const char* what;  // its name in a backend's messages
  int vulkan;        // its OP code in the Vulkan shader running it, or -1
};

#define SW_OPT_KERNEL_ROW(Name, what, vk) KernelRow{#what, vk},
inline constexpr KernelRow kUnaryKernels[] = {SW_KERNEL_UNARY_OPS(SW_OPT_KERNEL_ROW)};
inline constexpr KernelRow kBinaryKernels[] = {SW_KERNEL_BINARY_OPS(SW_OPT_KERNEL_ROW)};
inline constexpr KernelRow kReduceKernels[] = {SW_KERNEL_REDUCE_OPS(SW_OPT_KERNEL_ROW)};
#undef SW_OPT_KERNEL_ROW

inline constexpr size_t kUnaryKernelCount = 0 SW_KERNEL_UNARY_OPS(SW_OPT_ONE);
inline constexpr size_t kBinaryKernelCount = 0 SW_KERNEL_BINARY_OPS(SW_OPT_ONE);
inline constexpr size_t kReduceKernelCount = 0 SW_KERNEL_REDUCE_OPS(SW_OPT_ONE);

// Every Vulkan code of a list is -1 or distinct from the list's others and
// from `also` (another code the same shader takes).
template <size_t N>
constexpr bool distinct_codes(const KernelRow (&rows)[N], int also = -1) {
  for (size_t i = 0; i < N; ++i) {
    if (rows[i].vulkan < 0) continue;
    if (rows[i].vulkan == also) return false;
    for (size_t j = i + 1; j < N; ++j)
      if (rows[i].vulkan == rows[j].vulkan) return false;
  }
  return true;
}

}  // namespace optable

static_assert(std::size(optable::kUnaryKernels) == optable::kUnaryKernelCount);
static_assert(std::size(optable::kBinaryKernels) == optable::kBinaryKernelCount);
static_assert(std::size(optable::kReduceKernels) == optable::kReduceKernelCount);
static_assert(optable::distinct_codes(optable::kUnaryKernels));
static_assert(optable::distinct_codes(optable::kBinaryKernels, SW_VULKAN_WHERE_CODE));
static_assert(optable::distinct_codes(optable::kReduceKernels));

inline constexpr const optable::KernelRow& kernel_row(UnaryOp op) {
  return optable::kUnaryKernels[static_cast<size_t>(op)];
}
inline constexpr const optable::KernelRow& kernel_row(BinaryOp op) {
  return optable::kBinaryKernels[static_cast<size_t>(op)];
}
inline constexpr const optable::KernelRow& kernel_row(ReduceOp op) {
  return optable::kReduceKernels[static_cast<size_t>(op)];
}

// The comparisons (Eq to Ge): `out` is bool. They are contiguous in the
// table, and binary.comp takes the codes from OP_Eq to OP_Ge as its
// comparisons.
inline constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }
static_assert(static_cast<int>(BinaryOp::kGe) - static_cast<int>(BinaryOp::kEq) == 5);
static_assert(kernel_row(BinaryOp::kGe).vulkan - kernel_row(BinaryOp::kEq).vulkan == 5);
static_assert([] {
  for (size_t i = 0; i < optable::kBinaryKernelCount; ++i) {
    const int vk = optable::kBinaryKernels[i].vulkan;
    const bool in_range = vk >= kernel_row(BinaryOp::kEq).vulkan && vk <= kernel_row(BinaryOp::kGe).vulkan;
    if (in_range != is_comparison(static_cast<BinaryOp>(i))) return false;
  }
  return true;
}(), "binary.comp's comparison codes must be exactly the comparisons'");

}  // namespace sw

namespace sw::ops {

// ---- Public ops -------------------------------------------------------------

// The public op codes (sw_unary_op_t, ...) as validated values, in the
// table's order (which is the public enums' order).
enum class Unary { SW_UNARY_OPS(SW_OPT_ENUMERATOR) };
enum class Binary { SW_BINARY_OPS(SW_OPT_ENUMERATOR) };
enum class Reduce { SW_REDUCE_OPS(SW_OPT_ENUMERATOR) };

namespace table {

template <typename Public, typename Kernel>
struct OpRow {
  const char* name;  // op_name
  Public code;       // its public value
  Kernel kernel;     // the kernel op computing it
};

#define SW_OPT_UNARY_ROW(Name, name, CODE, Kernel) {#name, CODE, UnaryOp::k##Kernel},
#define SW_OPT_BINARY_ROW(Name, name, CODE, Kernel) {#name, CODE, BinaryOp::k##Kernel},
#define SW_OPT_REDUCE_ROW(Name, name, CODE, Kernel) {#name, CODE, ReduceOp::k##Kernel},
inline constexpr OpRow<sw_unary_op_t, UnaryOp> kUnary[] = {SW_UNARY_OPS(SW_OPT_UNARY_ROW)};
inline constexpr OpRow<sw_binary_op_t, BinaryOp> kBinary[] = {SW_BINARY_OPS(SW_OPT_BINARY_ROW)};
inline constexpr OpRow<sw_reduce_op_t, ReduceOp> kReduce[] = {SW_REDUCE_OPS(SW_OPT_REDUCE_ROW)};
#undef SW_OPT_UNARY_ROW
#undef SW_OPT_BINARY_ROW
#undef SW_OPT_REDUCE_ROW

inline constexpr size_t kUnaryCount = 0 SW_UNARY_OPS(SW_OPT_ONE);
inline constexpr size_t kBinaryCount = 0 SW_BINARY_OPS(SW_OPT_ONE);
inline constexpr size_t kReduceCount = 0 SW_REDUCE_OPS(SW_OPT_ONE);

// Row i holds the public value i + 1: the table lists the public enum's
// values in order, none left out before its last, none repeated.
template <typename Row, size_t N>
constexpr bool codes_run_from_one(const Row (&rows)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<long long>(rows[i].code) != static_cast<long long>(i) + 1) return false;
  return true;
}

}  // namespace table

static_assert(std::size(table::kUnary) == table::kUnaryCount);
static_assert(std::size(table::kBinary) == table::kBinaryCount);
static_assert(std::size(table::kReduce) == table::kReduceCount);
static_assert(table::codes_run_from_one(table::kUnary), "op_table.def: SW_UNARY_OPS must list sw_unary_op_t in order");
static_assert(table::codes_run_from_one(table::kBinary),
              "op_table.def: SW_BINARY_OPS must list sw_binary_op_t in order");
static_assert(table::codes_run_from_one(table::kReduce),
              "op_table.def: SW_REDUCE_OPS must list sw_reduce_op_t in order");

inline constexpr const char* op_name(Unary op) { return table::kUnary[static_cast<size_t>(op)].name; }
inline constexpr const char* op_name(Binary op) { return table::kBinary[static_cast<size_t>(op)].name; }
inline constexpr const char* op_name(Reduce op) { return table::kReduce[static_cast<size_t>(op)].name; }
inline constexpr sw_unary_op_t public_code(Unary op) { return table::kUnary[static_cast<size_t>(op)].code; }
inline constexpr sw_binary_op_t public_code(Binary op) { return table::kBinary[static_cast<size_t>(op)].code; }
inline constexpr sw_reduce_op_t public_code(Reduce op) { return table::kReduce[static_cast<size_t>(op)].code; }
// The kernel op computing an op's forward pass.
inline constexpr UnaryOp kernel_of(Unary op) { return table::kUnary[static_cast<size_t>(op)].kernel; }
inline constexpr BinaryOp kernel_of(Binary op) { return table::kBinary[static_cast<size_t>(op)].kernel; }
inline constexpr ReduceOp kernel_of(Reduce op) { return table::kReduce[static_cast<size_t>(op)].kernel; }

// The op of a public code, looked up in the table; nullopt for a code that
// is not one (an unknown value from a caller).
template <typename Op, typename Row, size_t N, typename Code>
constexpr std::optional<Op> op_of_code(const Row (&rows)[N], Code code) {
  for (size_t i = 0; i < N; ++i)
    if (rows[i].code == code) return static_cast<Op>(i);
  return std::nullopt;
}
inline constexpr std::optional<Unary> op_of(sw_unary_op_t code) { return op_of_code<Unary>(table::kUnary, code); }
inline constexpr std::optional<Binary> op_of(sw_binary_op_t code) { return op_of_code<Binary>(table::kBinary, code); }
inline constexpr std::optional<Reduce> op_of(sw_reduce_op_t code) { return op_of_code<Reduce>(table::kReduce, code); }

static_assert(op_of(SW_UNARY_RELU) == Unary::kRelu && kernel_of(Unary::kRelu) == UnaryOp::kRelu);
static_assert(!op_of(static_cast<sw_unary_op_t>(0)) && !op_of(static_cast<sw_binary_op_t>(0)) &&
              !op_of(static_cast<sw_reduce_op_t>(0)));

}  // namespace sw::ops

#undef SW_OPT_ENUMERATOR
#undef SW_OPT_ONE
