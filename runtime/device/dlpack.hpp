// DLPack export of host-visible device views and of tensors on host-addressable
// carriers, as the legacy DLManagedTensor or the versioned
// DLManagedTensorVersioned, with the structs of the vendored
// third_party/dlpack/include/dlpack/dlpack.h.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

#include "core/tensor.hpp"
#include "device/bridge.hpp"

namespace sw::dlpack {

// What one export lends: the memory, its dtype, shape and element strides,
// whether it is read-only, and the object that keeps it alive.
struct Source {
  Ref<Object> keep;
  void* data = nullptr;
  sw_dtype_t dtype{};
  size_t rank = 0;
  int64_t shape[SW_MAX_RANK] = {};
  int64_t strides[SW_MAX_RANK] = {};
  bool read_only = false;
};

// `what` names the public function in error messages.
// UNSUPPORTED when the view's memory is not host visible; STALE_HANDLE after
// a restart of its device.
Source of_view(const Ref<DeviceView>& view, const char* what);
// STATE for a released carrier or one a TiledEvictable holds as a tier;
// UNSUPPORTED for a carrier whose memory is not host addressable, or for a
// top-level mode whose leaves do not walk one arithmetic progression.
Source of_tensor(const Ref<Tensor>& tensor, const char* what);

// The version a versioned export reports to a consumer that reads up to
// max_major.max_minor: DLPack 1.x, at most the consumer's minor version when
// its major is 1 (everything an export holds exists since 1.0). VALUE below
// 1.0, which has no versioned struct.
DLPackVersion negotiate(uint32_t max_major, uint32_t max_minor, const char* what);

// New managed tensors that hold `source.keep` until their deleter, which
// frees them, runs; the versioned one flags a read-only source
// DLPACK_FLAG_BITMASK_READ_ONLY.
DLManagedTensor* to_legacy(Source source);
DLManagedTensorVersioned* to_versioned(Source source, DLPackVersion version);

}  // namespace sw::dlpack
