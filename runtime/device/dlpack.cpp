#include "device/dlpack.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw::dlpack {
namespace {

// One allocation per export: the managed tensor with the shape and strides
// it points to and the reference that keeps the memory alive.
template <typename Managed>
struct Holder {
  Managed managed{};
  int64_t shape[SW_MAX_RANK];
  int64_t strides[SW_MAX_RANK];
  Ref<Object> keep;
};

DLDataType dl_dtype(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_F32: return {kDLFloat, 32, 1};
    case SW_DTYPE_F64: return {kDLFloat, 64, 1};
    case SW_DTYPE_F16: return {kDLFloat, 16, 1};
    case SW_DTYPE_BF16: return {kDLBfloat, 16, 1};
    case SW_DTYPE_I32: return {kDLInt, 32, 1};
    case SW_DTYPE_I64: return {kDLInt, 64, 1};
    case SW_DTYPE_U8: return {kDLUInt, 8, 1};
    case SW_DTYPE_BOOL: return {kDLBool, 8, 1};
    default:
      if (dtype_is_quantized(d)) type_error(std::string("DLPack: no DLPack dtype holds ") + dtype_name(d) + " blocks");
      type_error("DLPack: unknown dtype");
  }
}

template <typename Managed>
Managed* make(Source s) {
  auto h = std::make_unique<Holder<Managed>>();
  std::copy_n(s.shape, s.rank, h->shape);
  std::copy_n(s.strides, s.rank, h->strides);
  DLTensor& t = h->managed.dl_tensor;
  t.data = s.data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(s.rank);
  t.dtype = dl_dtype(s.dtype);
  t.shape = h->shape;
  t.strides = h->strides;
  t.byte_offset = 0;
  h->keep = std::move(s.keep);
  h->managed.manager_ctx = h.get();
  h->managed.deleter = [](Managed* self) { delete static_cast<Holder<Managed>*>(self->manager_ctx); };
  return &h.release()->managed;
}

}  // namespace

Source of_view(const Ref<DeviceView>& view, const char* what) {
  sw_view_info_t info = view->describe();
  if (!info.pointer) unsupported_error(std::string(what) + ": the view's memory is not host visible");
  Source s;
  s.data = info.pointer;
  s.dtype = info.dtype;
  s.rank = info.rank;
  const int64_t es = static_cast<int64_t>(dtype_size(info.dtype));
  for (size_t i = 0; i < info.rank; ++i) {
    s.shape[i] = info.shape[i];
    s.strides[i] = info.strides_bytes[i] / es;
  }
  s.keep = Ref<Object>(view.get());
  return s;
}

Source of_tensor(const Ref<Tensor>& tensor, const char* what) {
  Carrier& c = tensor->carrier();
  c.check_live(what);
  c.check_not_tier(what);
  if (!c.host_data() && c.size() != 0)
    unsupported_error(std::string(what) + ": the " + c.kind_name() + " carrier's memory is not host addressable");
  const Layout& l = tensor->layout();
  Source s;
  s.data = tensor->host_base();
  s.dtype = tensor->dtype();
  s.rank = l.rank();
  for (size_t i = 0; i < l.rank(); ++i) {
    s.shape[i] = l.extents()[i];
    if (!l.mode_stride(i, &s.strides[i]))
      unsupported_error(std::string(what) + ": mode " + std::to_string(i) + " of layout " + l.to_string() +
                        " is not one arithmetic progression, which DLPack cannot describe");
  }
  s.read_only = c.is_read_only();
  s.keep = Ref<Object>(tensor.get());
  return s;
}

DLPackVersion negotiate(uint32_t max_major, uint32_t max_minor, const char* what) {
  if (max_major < 1)
    value_error(std::string(what) + ": max_major " + std::to_string(max_major) +
                " predates DLManagedTensorVersioned (DLPack 1.0); export the legacy DLManagedTensor instead");
  if (max_major > DLPACK_MAJOR_VERSION) return {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  return {DLPACK_MAJOR_VERSION, std::min<uint32_t>(max_minor, DLPACK_MINOR_VERSION)};
}

DLManagedTensor* to_legacy(Source source) { return make<DLManagedTensor>(std::move(source)); }

DLManagedTensorVersioned* to_versioned(Source source, DLPackVersion version) {
  const bool read_only = source.read_only;
  DLManagedTensorVersioned* m = make<DLManagedTensorVersioned>(std::move(source));
  m->version = version;
  m->flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return m;
}

}  // namespace sw::dlpack
