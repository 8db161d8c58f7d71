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
