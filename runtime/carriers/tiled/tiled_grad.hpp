// Gradients of tensors backed by a TiledEvictable: fresh TiledEvictables of
// the same geometry whose untouched tiles are implicit zeros.
#pragma once

#include "carriers/tiled/tiled_carrier.hpp"

namespace sw {

// A gradient for `primal` (a full tensor on `te`) holding `compact` (dense,
// the selected region) at the selected tiles and implicit zero elsewhere.
Ref<Tensor> tiled_gradient_from_compact(TiledEvictable& te, const Tensor& primal, const TileSelection& sel,
                                        const Ref<Tensor>& compact);
// A gradient for `primal` holding the dense full tensor `dense`.
Ref<Tensor> tiled_gradient_from_dense(TiledEvictable& te, const Tensor& primal, const Ref<Tensor>& dense);
// The selected region of a full tensor (tiled or dense), as a dense compact tensor.
Ref<Tensor> project_any(const Ref<Tensor>& full, const TiledEvictable& geometry_of, const TileSelection& sel);
// a + b where either may be a tiled gradient; the result is tiled if either is.
Ref<Tensor> add_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b);
// dst[i] += src[i] for the n slots of two tile buffers of one primary kind:
// in place on the host; on a device's compute backend for f32, f16 and bf16
// (widened to f32, rounded once), through host copies for other dtypes.
void add_tiles(Carrier& dst, const Carrier& src, int64_t n);

}  // namespace sw
