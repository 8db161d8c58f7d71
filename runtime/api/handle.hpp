// Handle <-> object conversion and argument checks for the extern "C" layer.
// The C shim holds no logic: it checks arguments, calls the core, and lets
// sw::guard turn exceptions into sw_error_t*.
#pragma once

#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/object.hpp"
#include "core/carrier.hpp"
#include "core/layout.hpp"
#include "core/runtime.hpp"
#include "core/tensor.hpp"
#include "async/await.hpp"
#include "carriers/tiled/tile_values.hpp"
#include "device/bridge.hpp"
#include "ops/ops.hpp"

namespace sw::api {

template <typename T> constexpr ObjectKind kind_of();
template <> constexpr ObjectKind kind_of<Runtime>() { return ObjectKind::kRuntime; }
template <> constexpr ObjectKind kind_of<Layout>() { return ObjectKind::kLayout; }
template <> constexpr ObjectKind kind_of<Carrier>() { return ObjectKind::kCarrier; }
template <> constexpr ObjectKind kind_of<Tensor>() { return ObjectKind::kTensor; }
template <> constexpr ObjectKind kind_of<Await>() { return ObjectKind::kAwait; }
template <> constexpr ObjectKind kind_of<TileSet>() { return ObjectKind::kTileSet; }
template <> constexpr ObjectKind kind_of<TileSelection>() { return ObjectKind::kTileSelection; }
template <> constexpr ObjectKind kind_of<ResidencyPlan>() { return ObjectKind::kResidencyPlan; }
template <> constexpr ObjectKind kind_of<Device>() { return ObjectKind::kDevice; }
template <> constexpr ObjectKind kind_of<DeviceAllocation>() { return ObjectKind::kDeviceAllocation; }
template <> constexpr ObjectKind kind_of<DeviceView>() { return ObjectKind::kDeviceView; }

inline const char* kind_name(ObjectKind k) {
  switch (k) {
    case ObjectKind::kRuntime: return "runtime";
    case ObjectKind::kLayout: return "layout";
    case ObjectKind::kCarrier: return "carrier";
    case ObjectKind::kTensor: return "tensor";
    case ObjectKind::kAwait: return "await handle";
    case ObjectKind::kNode: return "autograd node";
    case ObjectKind::kTileSet: return "TileSet";
    case ObjectKind::kTileSelection: return "TileSelection";
    case ObjectKind::kResidencyPlan: return "ResidencyPlan";
    case ObjectKind::kLruPolicy: return "LRU policy";
    case ObjectKind::kDevice: return "device";
    case ObjectKind::kDeviceAllocation: return "device allocation";
    case ObjectKind::kDeviceView: return "device view";
    default: return "unknown object";
  }
}

// The object behind a handle; TYPE for NULL or another kind of handle.
template <typename T, typename H>
T* get(H* handle, const char* arg) {
  if (!handle) type_error(std::string(arg) + ": expected a " + kind_name(kind_of<T>()) + ", got NULL");
  auto* obj = reinterpret_cast<Object*>(const_cast<std::remove_const_t<H>*>(handle));
  if (obj->object_kind() != kind_of<T>())
    type_error(std::string(arg) + ": expected a " + kind_name(kind_of<T>()) + ", got a " +
               kind_name(obj->object_kind()));
  return static_cast<T*>(obj);
}

template <typename T, typename H>
Ref<T> ref(H* handle, const char* arg) {
  return Ref<T>(get<T>(handle, arg));
}

template <typename H, typename T>
H* to_handle(Ref<T> obj) {
  return reinterpret_cast<H*>(static_cast<Object*>(obj.detach()));
}

template <typename P>
void require(P* p, const char* arg) {
  if (!p) value_error(std::string(arg) + " must not be NULL");
}

template <typename T>
void retain_handle(T* h) {
  if (h) reinterpret_cast<Object*>(h)->retain();
}
template <typename T>
void release_handle(T* h) {
  if (h) reinterpret_cast<Object*>(h)->release();
}

// Creating a carrier through the ABI is an allocation for the
// SW_FAULT_ALLOCATION hook: called once the arguments are checked and before
// anything is allocated, so an injected failure leaves nothing behind.
inline void count_allocation(Runtime& rt, const char* what) { rt.check_fault(FaultKind::kAllocation, what); }

// Copies `count` extents, rejecting NULL with count > 0 and negative extents.
std::vector<int64_t> extents_arg(const int64_t* extents, size_t count, const char* arg);

// A public unary op code as the ops layer's (VALUE for an unknown one).
ops::Unary unary_of(sw_unary_op_t op);

}  // namespace sw::api
