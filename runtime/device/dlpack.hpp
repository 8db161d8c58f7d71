// DLPack export (dlpack.h v0.8 layout, defined privately so the library needs
// no dlpack.h): host-visible device views and CPU tensors.
#pragma once

#include <cstdint>

#include "core/tensor.hpp"
#include "device/bridge.hpp"

namespace sw::dlpack {

// Returns a DLManagedTensor* that keeps `view` / `tensor` alive until its deleter runs.
void* export_view(const Ref<DeviceView>& view);
void* export_tensor(const Ref<Tensor>& tensor);

}  // namespace sw::dlpack
