// DLPack structs as dlpack.h v0.8 lays them out; only the fields the export
// fills are used.
#include "device/dlpack.hpp"

#include <memory>

#include "base/error.hpp"
#include "core/dtype.hpp"

namespace sw::dlpack {
namespace {

struct DLDevice {
  int32_t device_type;  // kDLCPU = 1
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4);
static_assert(sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64);

struct Holder {
  DLManagedTensor managed{};
  int64_t shape[SW_MAX_RANK];
  int64_t strides[SW_MAX_RANK];
  Ref<Object> keep;
};

DLDataType dl_dtype(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_F32: return {2, 32, 1};
    case SW_DTYPE_F64: return {2, 64, 1};
    case SW_DTYPE_F16: return {2, 16, 1};
    case SW_DTYPE_BF16: return {4, 16, 1};
    case SW_DTYPE_I32: return {0, 32, 1};
    case SW_DTYPE_I64: return {0, 64, 1};
    case SW_DTYPE_U8: return {1, 8, 1};
    case SW_DTYPE_BOOL: return {6, 8, 1};
    default: type_error("DLPack: unknown dtype");
  }
}

void* make(Ref<Object> keep, void* data, sw_dtype_t dtype, size_t rank, const int64_t* shape,
           const int64_t* strides_elements) {
  auto h = std::make_unique<Holder>();
  for (size_t i = 0; i < rank; ++i) {
    h->shape[i] = shape[i];
    h->strides[i] = strides_elements[i];
  }
  h->keep = std::move(keep);
  DLTensor& t = h->managed.dl_tensor;
  t.data = data;
  t.device = {1, 0};
  t.ndim = static_cast<int32_t>(rank);
  t.dtype = dl_dtype(dtype);
  t.shape = h->shape;
  t.strides = h->strides;
  t.byte_offset = 0;
  h->managed.manager_ctx = h.get();
  h->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Holder*>(self->manager_ctx); };
  return &h.release()->managed;
}

}  // namespace

void* export_view(const Ref<DeviceView>& view) {
  sw_view_info_t info = view->describe();
  if (!info.pointer) unsupported_error("sw_device_view_to_dlpack: the view's memory is not host visible");
  int64_t strides[SW_MAX_RANK];
  const int64_t es = static_cast<int64_t>(dtype_size(info.dtype));
  for (size_t i = 0; i < info.rank; ++i) strides[i] = info.strides_bytes[i] / es;
  return make(Ref<Object>(view.get()), info.pointer, info.dtype, info.rank, info.shape, strides);
}

void* export_tensor(const Ref<Tensor>& tensor) {
  if (tensor->carrier().kind() != SW_CARRIER_CPU)
    unsupported_error(std::string("sw_tensor_to_dlpack: only CPU tensors export, not ") + tensor->carrier().kind_name());
  tensor->carrier().check_live("sw_tensor_to_dlpack");
  const Layout& l = tensor->layout();
  if (l.leaves().size() != l.rank()) unsupported_error("sw_tensor_to_dlpack: nested layouts do not export");
  int64_t strides[SW_MAX_RANK];
  for (size_t i = 0; i < l.rank(); ++i) strides[i] = l.leaves()[i].stride;
  return make(Ref<Object>(tensor.get()), tensor->host_base(), tensor->dtype(), l.rank(), l.extents().data(), strides);
}

}  // namespace sw::dlpack
