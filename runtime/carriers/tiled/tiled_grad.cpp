#include "carriers/tiled/tiled_grad.hpp"

#include <cstring>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw {

namespace {

std::vector<int64_t> ordinals_of(const TileGeometry& g, const TileSelection& sel) {
  std::vector<int64_t> out;
  for (size_t j = 0; j < sel.count(); ++j) out.push_back(g.ordinal(sel.coordinate(j)));
  return out;
}

TiledEvictable& tiled_of(const Tensor& t) { return static_cast<TiledEvictable&>(t.carrier()); }

void add_tile_values(sw_dtype_t dtype, std::byte* dst, const std::byte* src, int64_t n) {
  if (dtype == SW_DTYPE_F32) {
    float* d = reinterpret_cast<float*>(dst);
    const float* s = reinterpret_cast<const float*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  } else if (dtype == SW_DTYPE_F64) {
    double* d = reinterpret_cast<double*>(dst);
    const double* s = reinterpret_cast<const double*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  } else {
    const size_t es = dtype_size(dtype);
    for (int64_t i = 0; i < n; ++i)
      double_to_element(dtype, element_to_double(dtype, dst + i * es) + element_to_double(dtype, src + i * es), dst + i * es);
  }
}

}  // namespace

void add_tiles(Carrier& dst, const Carrier& src, int64_t n) {
  const sw_dtype_t d = dst.dtype();
  if (dst.host_data() && src.host_data()) return add_tile_values(d, dst.host_data(), src.host_data(), n);
  auto in_tile = Layout::dense({n});
  auto a = Tensor::create(Ref<Carrier>(&dst), 0, in_tile);
  auto b = Tensor::create(Ref<Carrier>(const_cast<Carrier*>(&src)), 0, in_tile);
  ComputeBackend& be = backend_for(dst);
  if (d == SW_DTYPE_F32) return be.binary(BinaryOp::kAdd, *a, *b, *a);
  if (d == SW_DTYPE_F16 || d == SW_DTYPE_BF16) {
    // Widened to f32, added, rounded once: as add_tile_values on the host.
    auto wa = be.empty(dst.runtime_ref(), SW_DTYPE_F32, {n}), wb = be.empty(dst.runtime_ref(), SW_DTYPE_F32, {n});
    be.unary(UnaryOp::kCopy, *a, 0.0, *wa);
    be.unary(UnaryOp::kCopy, *b, 0.0, *wb);
    be.binary(BinaryOp::kAdd, *wa, *wb, *wa);
    return be.unary(UnaryOp::kCopy, *wa, 0.0, *a);
  }
  // Integers and f64 (which a device may lack) add on the host.
  const size_t bytes = dst.bytes_of(static_cast<size_t>(n));
  std::vector<std::byte> x(bytes), y(bytes);
  dst.read_slots(0, static_cast<size_t>(n), x.data());
  src.read_slots(0, static_cast<size_t>(n), y.data());
  add_tile_values(d, x.data(), y.data(), n);
  dst.write_slots(0, static_cast<size_t>(n), x.data());
}

Ref<Tensor> tiled_gradient_from_compact(TiledEvictable& te, const Tensor& primal, const TileSelection& sel,
                                        const Ref<Tensor>& compact_in) {
  const TileGeometry& g = te.geometry();
  Ref<Tensor> compact = compact_in->dtype() == te.dtype() && compact_in->layout().is_dense() && compact_in->offset() == 0
                            ? compact_in
                            : ops::copy_as(*compact_in, te.dtype());
  auto grad = TiledEvictable::fresh_like(te, true);
  const auto ks = ordinals_of(g, sel);
  std::vector<Ref<Carrier>> bufs;
  for (size_t j = 0; j < ks.size(); ++j) bufs.push_back(te.new_tile_buffer(false));
  transfer_tiles(g, primal, sel.compact_grid_shape(), ks, bufs, *compact, false, te.runtime().compute());
  for (size_t j = 0; j < ks.size(); ++j) grad->set_tile(ks[j], bufs[j]);
  return grad->full_tensor_like(primal);
}

Ref<Tensor> tiled_gradient_from_dense(TiledEvictable& te, const Tensor& primal, const Ref<Tensor>& dense_in) {
  return tiled_gradient_from_compact(te, primal, *full_selection(te.geometry()), dense_in);
}

Ref<Tensor> project_any(const Ref<Tensor>& full, const TiledEvictable& geometry_of, const TileSelection& sel) {
  const TileGeometry& g = geometry_of.geometry();
  if (full->carrier().kind() == SW_CARRIER_TILED) {
    TiledEvictable& te = tiled_of(*full);
    Ref<TileSelection> s(const_cast<TileSelection*>(&sel));
    NoGradGuard no_grad;
    auto await = te.project(full, s, nullptr);
    Status st = await->wait(-1);
    if (!st.ok()) st.raise();
    return Ref<Tensor>(static_cast<Tensor*>(await->result().get()));
  }
  // A dense full tensor: copy each selected tile's region.
  Ref<Tensor> d = ops::contiguous(full);
  const size_t r = g.rank();
  std::vector<int64_t> cshape(r), fstride(r), cstride(r);
  int64_t fs = 1, cs = 1;
  for (size_t i = 0; i < r; ++i) {
    cshape[i] = static_cast<int64_t>(sel.per_axis()[i].size()) * g.tile[i];
    fstride[i] = fs;
    cstride[i] = cs;
    fs *= g.logical[i];
    cs *= cshape[i];
  }
  ComputeBackend& be = backend_for(d->carrier());
  auto out = be.empty(d->runtime_ref(), d->dtype(), cshape);
  for (size_t j = 0; j < sel.count(); ++j) {
    const TileCoord src = sel.coordinate(j);
    int64_t rem = static_cast<int64_t>(j), soff = 0, coff = 0;
    for (size_t i = 0; i < r; ++i) {
      const int64_t cj = rem % static_cast<int64_t>(sel.per_axis()[i].size());
      rem /= static_cast<int64_t>(sel.per_axis()[i].size());
      soff += src[i] * g.tile[i] * fstride[i];
      coff += cj * g.tile[i] * cstride[i];
    }
    auto from = d->view(d->offset() + soff, Layout::flat(g.tile, fstride));
    auto to = out->view(coff, Layout::flat(g.tile, cstride));
    be.unary(UnaryOp::kCopy, *from, 0.0, *to);
  }
  return out;
}

Ref<Tensor> add_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b) {
  const bool ta = a->carrier().kind() == SW_CARRIER_TILED, tb = b->carrier().kind() == SW_CARRIER_TILED;
  if (!ta && !tb) internal_error("add_gradients: neither gradient is tiled");
  if (!ta) return add_gradients(b, a);
  TiledEvictable& te = tiled_of(*a);
  const TileGeometry& g = te.geometry();
  Ref<Tensor> other = b;
  if (!tb) other = tiled_gradient_from_dense(te, *a, b);
  TiledEvictable& to = tiled_of(*other);
  if (!(to.geometry() == g) || other->offset() != a->offset() || !other->layout().equals(a->layout())) {
    // Different slot maps: sum through dense values.
    NoGradGuard no_grad;
    auto da = te.materialize(a, SW_PURPOSE_BACKWARD);
    auto db = to.materialize(other, SW_PURPOSE_BACKWARD);
    return tiled_gradient_from_dense(te, *a, ops::add(da, db));
  }
  auto sum = TiledEvictable::fresh_like(te, true);
  for (int64_t k = 0; k < g.tiles; ++k) {
    const bool za = te.tile_is_zero(k), zb = to.tile_is_zero(k);
    if (za && zb) continue;
    Ref<Carrier> buf = te.copy_of_tile(k);
    if (!zb) add_tiles(*buf, *to.copy_of_tile(k), g.tile_size);
    sum->set_tile(k, buf);
  }
  return sum->full_tensor_like(*a);
}

// ---- the composite's behaviour for ops and autograd ---------------------------

void TiledEvictable::check_operand(const Tensor& t, const char* op) const {
  check_live(op);
  check_full(t, op);
}

Ref<Tensor> TiledEvictable::resolve_operand(const Ref<Tensor>& t, sw_residency_purpose_t purpose, const char* op) const {
  check_operand(*t, op);
  NoGradGuard no_grad;
  return const_cast<TiledEvictable*>(this)->materialize(t, purpose);
}

Ref<Tensor> TiledEvictable::leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) const {
  if (g->carrier().is_composite()) return g;  // already a fresh gradient
  return tiled_gradient_from_dense(const_cast<TiledEvictable&>(*this), leaf, g);
}

Ref<Tensor> TiledEvictable::add_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b) const { return sw::add_gradients(a, b); }

}  // namespace sw
