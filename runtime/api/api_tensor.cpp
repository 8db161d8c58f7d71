#include <cstring>

#include "api/handle.hpp"
#include "api/versioned.hpp"
#include "autograd/node.hpp"
#include "carriers/cpu/cpu_backend.hpp"
#include "carriers/cpu/cpu_carrier.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

using namespace sw;
using namespace sw::api;

namespace {

void check_capacity(size_t need, size_t have, const char* what) {
  if (have < need)
    value_error(std::string(what) + ": " + std::to_string(have) + " bytes given, " + std::to_string(need) + " needed");
}

}  // namespace

extern "C" {

SW_API sw_error_t* sw_tensor_create(sw_carrier_t* carrier, int64_t offset, const sw_layout_t* layout,
                                    sw_tensor_t** out_tensor) {
  return guard([&] {
    auto c = ref<Carrier>(carrier, "carrier");
    auto l = ref<Layout>(layout, "layout");
    require(out_tensor, "out_tensor");
    c->check_live("sw_tensor_create");
    *out_tensor = to_handle<sw_tensor_t>(Tensor::create(c, offset, l));
  });
}

SW_API sw_error_t* sw_tensor_from_data(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                       const void* data, sw_tensor_t** out_tensor) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_tensor_from_data");
    auto ext = extents_arg(extents, rank, "extents");
    require(out_tensor, "out_tensor");
    auto layout = Layout::dense(ext);
    if (layout->size() && !data) value_error("data must not be NULL for a non-empty tensor");
    count_allocation(*rt, "CPU carrier");
    Ref<Carrier> c = CpuCarrier::copy_of(rt, dtype, data, static_cast<size_t>(layout->size()));
    *out_tensor = to_handle<sw_tensor_t>(Tensor::create(c, 0, layout));
  });
}

SW_API sw_error_t* sw_tensor_zeros(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                   sw_tensor_t** out_tensor) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_tensor_zeros");
    auto ext = extents_arg(extents, rank, "extents");
    require(out_tensor, "out_tensor");
    count_allocation(*rt, "CPU carrier");
    *out_tensor = to_handle<sw_tensor_t>(cpu_backend().zeros(rt, dtype, ext));
  });
}

SW_API void sw_tensor_retain(sw_tensor_t* tensor) { retain_handle(tensor); }
SW_API void sw_tensor_release(sw_tensor_t* tensor) { release_handle(tensor); }

SW_API sw_error_t* sw_tensor_carrier(const sw_tensor_t* tensor, sw_carrier_t** out_carrier) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_carrier, "out_carrier");
    *out_carrier = to_handle<sw_carrier_t>(t->carrier_ref());
  });
}

SW_API sw_error_t* sw_tensor_layout(const sw_tensor_t* tensor, sw_layout_t** out_layout) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_layout, "out_layout");
    *out_layout = to_handle<sw_layout_t>(t->layout_ref());
  });
}

SW_API sw_error_t* sw_tensor_offset(const sw_tensor_t* tensor, int64_t* out_offset) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_offset, "out_offset");
    *out_offset = t->offset();
  });
}

SW_API sw_error_t* sw_tensor_dtype(const sw_tensor_t* tensor, sw_dtype_t* out_dtype) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_dtype, "out_dtype");
    *out_dtype = t->dtype();
  });
}

SW_API sw_error_t* sw_tensor_rank(const sw_tensor_t* tensor, size_t* out_rank) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_rank, "out_rank");
    *out_rank = t->rank();
  });
}

SW_API sw_error_t* sw_tensor_shape(const sw_tensor_t* tensor, int64_t* out_extents, size_t capacity) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    if (t->rank() && !out_extents) value_error("out_extents must not be NULL");
    if (capacity < t->rank())
      value_error("capacity " + std::to_string(capacity) + " is less than the rank " + std::to_string(t->rank()));
    std::copy(t->shape().begin(), t->shape().end(), out_extents);
  });
}

SW_API sw_error_t* sw_tensor_numel(const sw_tensor_t* tensor, int64_t* out_numel) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_numel, "out_numel");
    *out_numel = t->numel();
  });
}

SW_API sw_error_t* sw_tensor_version(const sw_tensor_t* tensor, uint64_t* out_version) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_version, "out_version");
    *out_version = t->version();
  });
}

SW_API sw_error_t* sw_tensor_get(const sw_tensor_t* tensor, const int64_t* coord, size_t count, double* out_value) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_value, "out_value");
    if (count && !coord) value_error("coord must not be NULL when count is " + std::to_string(count));
    refuse_quantized(t->dtype(), "sw_tensor_get");
    StoragePin pin(t->carrier(), "get");
    const int64_t slot = t->offset() + t->layout().index(coord, count);
    unsigned char buf[8];
    t->carrier().read_slots(static_cast<size_t>(slot), 1, buf);
    *out_value = element_to_double(t->dtype(), buf);
  });
}

SW_API sw_error_t* sw_tensor_set(sw_tensor_t* tensor, const int64_t* coord, size_t count, double value) {
  return guard([&] {
    Tensor* t = get<Tensor>(tensor, "tensor");
    if (count && !coord) value_error("coord must not be NULL when count is " + std::to_string(count));
    refuse_quantized(t->dtype(), "sw_tensor_set");
    t->carrier().check_mutable("set");
    const int64_t slot = t->offset() + t->layout().index(coord, count);
    unsigned char buf[8];
    double_to_element(t->dtype(), value, buf);
    t->carrier().write(static_cast<size_t>(slot), 1, buf);
  });
}

SW_API sw_error_t* sw_tensor_read(const sw_tensor_t* tensor, void* destination, size_t capacity_bytes) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    const size_t need = dtype_bytes(t->dtype(), static_cast<size_t>(t->numel()));
    if (need) require(destination, "destination");
    check_capacity(need, capacity_bytes, "sw_tensor_read");
    StoragePin pin(t->carrier(), "read");
    if (!need) return;
    if (t->carrier().host_data()) {
      Ref<Layout> dense = Layout::dense(t->shape());
      auto c = make_ref<CpuCarrier>(t->runtime_ref(), t->dtype(), static_cast<size_t>(t->numel()));
      auto dst = Tensor::create(c, 0, dense);
      cpu_backend().unary(UnaryOp::kCopy, *t, 0.0, *dst);
      std::memcpy(destination, c->host_data(), need);
      return;
    }
    // As one operation: a TiledEvictable reads each tile the runs touch
    // once (a permuted view has a run per element).
    t->carrier().read_runs(t->slot_runs(), static_cast<std::byte*>(destination));
  });
}

SW_API sw_error_t* sw_tensor_write(sw_tensor_t* tensor, const void* source, size_t size_bytes) {
  return guard([&] {
    Tensor* t = get<Tensor>(tensor, "tensor");
    const size_t need = dtype_bytes(t->dtype(), static_cast<size_t>(t->numel()));
    if (need) require(source, "source");
    if (size_bytes != need)
      value_error("sw_tensor_write: " + std::to_string(size_bytes) + " bytes given, the tensor holds " +
                  std::to_string(need));
    t->carrier().check_mutable("write");
    if (!t->layout().is_injective())
      value_error("sw_tensor_write: the tensor's layout is not injective, so elements would alias");
    if (t->carrier().host_data() && need) {
      Ref<Layout> dense = Layout::dense(t->shape());
      auto c = CpuCarrier::copy_of(t->runtime_ref(), t->dtype(), source, static_cast<size_t>(t->numel()));
      auto src = Tensor::create(c, 0, dense);
      cpu_backend().unary(UnaryOp::kCopy, *src, 0.0, *t);
    } else if (need) {
      // One write of every run: a carrier that may refuse part of it checks
      // all runs before changing anything.
      t->carrier().write_runs(t->slot_runs(), static_cast<const std::byte*>(source));
    }
    t->carrier().bump_version();
  });
}

SW_API sw_error_t* sw_tensor_permute(sw_tensor_t* tensor, const size_t* perm, size_t rank, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    if (rank && !perm) value_error("perm must not be NULL when rank is " + std::to_string(rank));
    *out_view = to_handle<sw_tensor_t>(ops::permute(t, std::vector<size_t>(perm, perm + rank)));
  });
}

SW_API sw_error_t* sw_tensor_transpose(sw_tensor_t* tensor, size_t axis0, size_t axis1, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    if (axis0 >= t->rank() || axis1 >= t->rank())
      index_error("transpose: axes " + std::to_string(axis0) + " and " + std::to_string(axis1) +
                  " are out of range for rank " + std::to_string(t->rank()));
    std::vector<size_t> perm(t->rank());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::swap(perm[axis0], perm[axis1]);
    *out_view = to_handle<sw_tensor_t>(ops::permute(t, perm));
  });
}

SW_API sw_error_t* sw_tensor_set_requires_grad(sw_tensor_t* tensor, bool requires_grad) {
  return guard([&] { get<Tensor>(tensor, "tensor")->set_requires_grad(requires_grad); });
}

SW_API sw_error_t* sw_tensor_requires_grad(const sw_tensor_t* tensor, bool* out_requires_grad) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_requires_grad, "out_requires_grad");
    *out_requires_grad = t->requires_grad();
  });
}

SW_API sw_error_t* sw_tensor_is_leaf(const sw_tensor_t* tensor, bool* out_is_leaf) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_is_leaf, "out_is_leaf");
    *out_is_leaf = t->is_leaf();
  });
}

SW_API sw_error_t* sw_tensor_grad(const sw_tensor_t* tensor, sw_tensor_t** out_grad) {
  return guard([&] {
    const Tensor* t = get<Tensor>(tensor, "tensor");
    require(out_grad, "out_grad");
    *out_grad = to_handle<sw_tensor_t>(t->grad());
  });
}

SW_API sw_error_t* sw_tensor_clear_grad(sw_tensor_t* tensor) {
  return guard([&] { get<Tensor>(tensor, "tensor")->set_grad(nullptr); });
}

SW_API bool sw_is_grad_enabled(void) { return grad_enabled(); }
SW_API bool sw_set_grad_enabled(bool enabled) { return set_grad_enabled(enabled); }

SW_API sw_error_t* sw_backward(sw_tensor_t* tensor, sw_tensor_t* cotangent, bool retain_graph) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    Ref<Tensor> cot;
    if (cotangent) cot = ref<Tensor>(cotangent, "cotangent");
    run_backward(t, cot, retain_graph, ops::gradient_math());
  });
}

}  // extern "C"

// ---- constructors, views, copies, in-place writes ------------------------------

extern "C" {

SW_API sw_error_t* sw_tensor_full(sw_runtime_t* runtime, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                  double value, sw_tensor_t** out_tensor) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_tensor_full");
    auto ext = extents_arg(extents, rank, "extents");
    require(out_tensor, "out_tensor");
    count_allocation(*rt, "CPU carrier");
    *out_tensor = to_handle<sw_tensor_t>(ops::full(cpu_backend(), rt, dtype, ext, value));
  });
}

SW_API sw_error_t* sw_tensor_arange(sw_runtime_t* runtime, sw_dtype_t dtype, double start, double stop, double step,
                                    sw_tensor_t** out_tensor) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    check_dtype(dtype, "sw_tensor_arange");
    require(out_tensor, "out_tensor");
    count_allocation(*rt, "CPU carrier");
    *out_tensor = to_handle<sw_tensor_t>(ops::arange(cpu_backend(), rt, dtype, start, stop, step));
  });
}

SW_API void sw_random_desc_init(sw_random_desc_t* desc) {
  if (!desc) return;
  *desc = sw_random_desc_t{};
  desc->struct_size = sizeof(sw_random_desc_t);
  desc->distribution = SW_RANDOM_UNIFORM;
  desc->dtype = SW_DTYPE_F32;
  desc->seed = 0;
  desc->low = 0.0;
  desc->high = 1.0;
  desc->mean = 0.0;
  desc->stddev = 1.0;
}

SW_API sw_error_t* sw_tensor_random(sw_runtime_t* runtime, const sw_random_desc_t* desc, const int64_t* extents,
                                    size_t rank, sw_tensor_t** out_tensor) {
  return guard([&] {
    auto rt = ref<Runtime>(runtime, "runtime");
    sw_random_desc_t d;
    sw_random_desc_init(&d);
    if (desc) d = struct_in(desc, d, "sw_tensor_random");
    check_dtype(d.dtype, "sw_tensor_random");
    if (d.distribution != SW_RANDOM_UNIFORM && d.distribution != SW_RANDOM_NORMAL)
      value_error("sw_tensor_random: unknown distribution " + std::to_string(static_cast<int>(d.distribution)));
    auto ext = extents_arg(extents, rank, "extents");
    require(out_tensor, "out_tensor");
    count_allocation(*rt, "CPU carrier");
    const bool uniform = d.distribution == SW_RANDOM_UNIFORM;
    *out_tensor = to_handle<sw_tensor_t>(ops::random(cpu_backend(), rt, d.dtype, ext,
                                                     uniform ? ops::Distribution::kUniform : ops::Distribution::kNormal,
                                                     uniform ? d.low : d.mean, uniform ? d.high : d.stddev, d.seed));
  });
}

SW_API sw_error_t* sw_tensor_reshape(sw_tensor_t* tensor, const int64_t* extents, size_t rank,
                                     sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    if (rank && !extents) value_error("extents must not be NULL when rank is " + std::to_string(rank));
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::reshape(t, std::vector<int64_t>(extents, extents + rank), false));
  });
}

SW_API sw_error_t* sw_tensor_view(sw_tensor_t* tensor, const int64_t* extents, size_t rank, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    if (rank && !extents) value_error("extents must not be NULL when rank is " + std::to_string(rank));
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::reshape(t, std::vector<int64_t>(extents, extents + rank), true));
  });
}

SW_API sw_error_t* sw_tensor_flatten(sw_tensor_t* tensor, int64_t start_axis, int64_t end_axis,
                                     sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::flatten(t, start_axis, end_axis));
  });
}

SW_API sw_error_t* sw_tensor_unsqueeze(sw_tensor_t* tensor, int64_t axis, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::unsqueeze(t, axis));
  });
}

SW_API sw_error_t* sw_tensor_squeeze(sw_tensor_t* tensor, const int64_t* axes, size_t count, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    if (count && !axes) value_error("axes must not be NULL when count is " + std::to_string(count));
    require(out_view, "out_view");
    std::vector<int64_t> ax(axes, axes + count);
    *out_view = to_handle<sw_tensor_t>(ops::squeeze(t, count ? &ax : nullptr));
  });
}

SW_API sw_error_t* sw_tensor_expand(sw_tensor_t* tensor, const int64_t* extents, size_t rank,
                                    sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    if (rank && !extents) value_error("extents must not be NULL when rank is " + std::to_string(rank));
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::expand(t, std::vector<int64_t>(extents, extents + rank)));
  });
}

SW_API sw_error_t* sw_tensor_slice(sw_tensor_t* tensor, int64_t axis, int64_t start, int64_t stop, int64_t step,
                                   sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::slice(t, axis, start, stop, step));
  });
}

SW_API sw_error_t* sw_tensor_select(sw_tensor_t* tensor, int64_t axis, int64_t index, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::select(t, axis, index));
  });
}

SW_API sw_error_t* sw_tensor_contiguous(sw_tensor_t* tensor, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::contiguous_op(t));
  });
}

SW_API sw_error_t* sw_tensor_clone(sw_tensor_t* tensor, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::clone(t));
  });
}

SW_API sw_error_t* sw_tensor_detach(sw_tensor_t* tensor, sw_tensor_t** out_view) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_view, "out_view");
    *out_view = to_handle<sw_tensor_t>(ops::detach(t));
  });
}

SW_API sw_error_t* sw_tensor_to_dtype(sw_tensor_t* tensor, sw_dtype_t dtype, sw_tensor_t** out_result) {
  return guard([&] {
    auto t = ref<Tensor>(tensor, "tensor");
    require(out_result, "out_result");
    *out_result = to_handle<sw_tensor_t>(ops::to_dtype(t, dtype));
  });
}

SW_API sw_error_t* sw_tensor_fill(sw_tensor_t* tensor, double value) {
  return guard([&] { ops::fill(ref<Tensor>(tensor, "tensor"), value); });
}

SW_API sw_error_t* sw_tensor_copy_from(sw_tensor_t* destination, sw_tensor_t* source) {
  return guard([&] {
    auto d = ref<Tensor>(destination, "destination");
    auto s = ref<Tensor>(source, "source");
    ops::copy_from(d, s);
  });
}

}  // extern "C"
