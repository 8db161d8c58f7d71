#include <cstring>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "ops/ops.hpp"

using namespace sw;
using namespace sw::api;

namespace {

template <typename F>
sw_error_t* binary(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out, F&& op) {
  return guard([&] {
    auto ta = ref<Tensor>(a, "a");
    auto tb = ref<Tensor>(b, "b");
    require(out, "out_result");
    *out = to_handle<sw_tensor_t>(op(ta, tb));
  });
}

}  // namespace

extern "C" {

SW_API sw_error_t* sw_add(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return binary(a, b, out_result, ops::add);
}

SW_API sw_error_t* sw_elementwise_mul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return binary(a, b, out_result, ops::elementwise_mul);
}

SW_API sw_error_t* sw_mul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return binary(a, b, out_result, ops::elementwise_mul);
}

SW_API sw_error_t* sw_mul_scalar(sw_tensor_t* a, double scalar, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::mul_scalar(t, scalar));
  });
}

SW_API sw_error_t* sw_scalar_mul(double scalar, sw_tensor_t* b, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(b, "b");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::mul_scalar(t, scalar));
  });
}

SW_API sw_error_t* sw_relu(sw_tensor_t* a, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::relu(t));
  });
}

SW_API sw_error_t* sw_reduce_sum(sw_tensor_t* a, const int64_t* axes, size_t count, bool keepdims,
                                 sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    if (count && !axes) value_error("axes must not be NULL when count is " + std::to_string(count));
    if (!axes) {
      *out_result = to_handle<sw_tensor_t>(ops::reduce_sum(t, nullptr, keepdims));
    } else {
      std::vector<int64_t> ax(axes, axes + count);
      *out_result = to_handle<sw_tensor_t>(ops::reduce_sum(t, &ax, keepdims));
    }
  });
}

SW_API sw_error_t* sw_matmul(sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return binary(a, b, out_result, [](const Ref<Tensor>& x, const Ref<Tensor>& y) { return ops::matmul(x, y); });
}

SW_API void sw_matmul_desc_init(sw_matmul_desc_t* desc) {
  if (!desc) return;
  *desc = sw_matmul_desc_t{};
  desc->struct_size = sizeof(sw_matmul_desc_t);
  desc->out_dtype = SW_DTYPE_INVALID;
}

SW_API sw_error_t* sw_matmul_ex(sw_tensor_t* a, sw_tensor_t* b, const sw_matmul_desc_t* desc,
                                sw_tensor_t** out_result) {
  return guard([&] {
    auto ta = ref<Tensor>(a, "a");
    auto tb = ref<Tensor>(b, "b");
    require(out_result, "out_result");
    sw_matmul_desc_t d;
    sw_matmul_desc_init(&d);
    // The one rule for versioned structs: a size that ends inside a field is
    // not a version of the struct.
    if (desc) d = struct_in(desc, d, "sw_matmul_ex: desc");
    const sw_dtype_t out = d.out_dtype == SW_DTYPE_INVALID ? ta->dtype() : d.out_dtype;
    *out_result = to_handle<sw_tensor_t>(ops::matmul(ta, tb, out));
  });
}

}  // extern "C"

// ---- The tensor surface ---------------------------------------------------

// The op of a public code, looked up in the op table (ops/op_table.def).
ops::Unary sw::api::unary_of(sw_unary_op_t op) {
  const auto u = ops::op_of(op);
  if (!u) value_error("unknown sw_unary_op_t " + std::to_string(static_cast<int>(op)));
  return *u;
}

namespace {

ops::Binary binary_of(sw_binary_op_t op) {
  const auto b = ops::op_of(op);
  if (!b) value_error("unknown sw_binary_op_t " + std::to_string(static_cast<int>(op)));
  return *b;
}

ops::Reduce reduce_of(sw_reduce_op_t op) {
  const auto r = ops::op_of(op);
  if (!r) value_error("unknown sw_reduce_op_t " + std::to_string(static_cast<int>(op)));
  return *r;
}

std::vector<int64_t> axes_arg(const int64_t* axes, size_t count) {
  if (count && !axes) value_error("axes must not be NULL when count is " + std::to_string(count));
  return std::vector<int64_t>(axes, axes + count);
}

std::vector<Ref<Tensor>> tensors_arg(sw_tensor_t* const* tensors, size_t count) {
  if (count && !tensors) value_error("tensors must not be NULL when count is " + std::to_string(count));
  std::vector<Ref<Tensor>> out;
  for (size_t i = 0; i < count; ++i) out.push_back(ref<Tensor>(tensors[i], "tensors[i]"));
  return out;
}

}  // namespace

extern "C" {

SW_API sw_error_t* sw_unary(sw_unary_op_t op, sw_tensor_t* a, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::unary(unary_of(op), t));
  });
}

SW_API sw_error_t* sw_binary(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return guard([&] {
    auto ta = ref<Tensor>(a, "a");
    auto tb = ref<Tensor>(b, "b");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::binary(binary_of(op), ta, tb));
  });
}

SW_API sw_error_t* sw_binary_scalar(sw_binary_op_t op, sw_tensor_t* a, double scalar, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::binary_scalar(binary_of(op), t, scalar));
  });
}

SW_API sw_error_t* sw_scalar_binary(sw_binary_op_t op, double scalar, sw_tensor_t* b, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(b, "b");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::scalar_binary(binary_of(op), scalar, t));
  });
}

SW_API sw_error_t* sw_binary_inplace(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b) {
  return guard([&] {
    auto ta = ref<Tensor>(a, "a");
    auto tb = ref<Tensor>(b, "b");
    ops::binary_inplace(binary_of(op), ta, tb);
  });
}

SW_API sw_error_t* sw_binary_scalar_inplace(sw_binary_op_t op, sw_tensor_t* a, double scalar) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    ops::binary_scalar_inplace(binary_of(op), t, scalar);
  });
}

SW_API sw_error_t* sw_where(sw_tensor_t* condition, sw_tensor_t* a, sw_tensor_t* b, sw_tensor_t** out_result) {
  return guard([&] {
    auto c = ref<Tensor>(condition, "condition");
    auto ta = ref<Tensor>(a, "a");
    auto tb = ref<Tensor>(b, "b");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::where(c, ta, tb));
  });
}

SW_API sw_error_t* sw_reduce(sw_reduce_op_t op, sw_tensor_t* a, const int64_t* axes, size_t count, bool keepdims,
                             sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    const ops::Reduce r = reduce_of(op);
    std::vector<int64_t> ax = axes_arg(axes, count);
    *out_result = to_handle<sw_tensor_t>(ops::reduce(r, t, axes ? &ax : nullptr, keepdims));
  });
}

SW_API sw_error_t* sw_reduce_index(sw_reduce_op_t op, sw_tensor_t* a, int64_t axis, bool keepdims,
                                   sw_tensor_t** out_values, sw_tensor_t** out_indices) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_values, "out_values");
    require(out_indices, "out_indices");
    auto [values, indices] = ops::reduce_index(reduce_of(op), t, axis, keepdims);
    *out_values = to_handle<sw_tensor_t>(values);
    *out_indices = to_handle<sw_tensor_t>(indices);
  });
}

SW_API sw_error_t* sw_softmax(sw_tensor_t* a, int64_t axis, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::softmax(t, axis, false));
  });
}

SW_API sw_error_t* sw_log_softmax(sw_tensor_t* a, int64_t axis, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::softmax(t, axis, true));
  });
}

SW_API sw_error_t* sw_topk(sw_tensor_t* a, int64_t k, int64_t axis, sw_tensor_t** out_values,
                           sw_tensor_t** out_indices) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    require(out_values, "out_values");
    require(out_indices, "out_indices");
    auto [values, indices] = ops::topk(t, k, axis);
    *out_values = to_handle<sw_tensor_t>(values);
    *out_indices = to_handle<sw_tensor_t>(indices);
  });
}

SW_API sw_error_t* sw_index_select(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    auto i = ref<Tensor>(index, "index");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::index_select(t, axis, i));
  });
}

SW_API sw_error_t* sw_gather(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    auto i = ref<Tensor>(index, "index");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::gather(t, axis, i));
  });
}

SW_API sw_error_t* sw_index_add(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t* source,
                                sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    auto i = ref<Tensor>(index, "index");
    auto s = ref<Tensor>(source, "source");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::index_add(t, axis, i, s));
  });
}

SW_API sw_error_t* sw_scatter_add(sw_tensor_t* a, int64_t axis, sw_tensor_t* index, sw_tensor_t* source,
                                  sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(a, "a");
    auto i = ref<Tensor>(index, "index");
    auto s = ref<Tensor>(source, "source");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::scatter_add(t, axis, i, s));
  });
}

SW_API sw_error_t* sw_cat(sw_tensor_t* const* tensors, size_t count, int64_t axis, sw_tensor_t** out_result) {
  return guard([&] {
    auto ts = tensors_arg(tensors, count);
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::cat(ts, axis));
  });
}

SW_API sw_error_t* sw_stack(sw_tensor_t* const* tensors, size_t count, int64_t axis, sw_tensor_t** out_result) {
  return guard([&] {
    auto ts = tensors_arg(tensors, count);
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::stack(ts, axis));
  });
}

}  // extern "C"
