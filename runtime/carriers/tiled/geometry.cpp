#include "carriers/tiled/geometry.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "core/interleave.hpp"
#include "core/iteration.hpp"
#include "ops/backend.hpp"

namespace sw {

TileGeometry::TileGeometry(std::vector<int64_t> grid_shape, std::vector<int64_t> tile_shape)
    : grid(std::move(grid_shape)), tile(std::move(tile_shape)) {
  for (size_t i = 0; i < grid.size(); ++i) {
    int64_t l;
    if (__builtin_mul_overflow(grid[i], tile[i], &l)) value_error("TiledEvictable: logical extent overflows");
    logical.push_back(l);
    if (__builtin_mul_overflow(tiles, grid[i], &tiles) || __builtin_mul_overflow(tile_size, tile[i], &tile_size))
      value_error("TiledEvictable: size overflows");
  }
  int64_t total;
  if (__builtin_mul_overflow(tiles, tile_size, &total)) value_error("TiledEvictable: size overflows");
  if (static_cast<uint64_t>(tiles) > SW_MAX_TILES)
    value_error("TiledEvictable: " + std::to_string(tiles) + " tiles exceed the limit of SW_MAX_TILES (" +
                std::to_string(SW_MAX_TILES) + "); use larger tiles");
}

int64_t TileGeometry::ordinal(const TileCoord& c) const {
  int64_t r = 0, scale = 1;
  for (size_t i = 0; i < grid.size(); ++i) {
    r += c[i] * scale;
    scale *= grid[i];
  }
  return r;
}

TileCoord TileGeometry::coord(int64_t k) const {
  TileCoord c(grid.size());
  for (size_t i = 0; i < grid.size(); ++i) {
    c[i] = k % grid[i];
    k /= grid[i];
  }
  return c;
}

void TileGeometry::locate(int64_t slot, int64_t* tile_ordinal, int64_t* within) const {
  int64_t k = 0, w = 0, kscale = 1, wscale = 1;
  for (size_t i = 0; i < logical.size(); ++i) {
    const int64_t x = slot % logical[i];
    slot /= logical[i];
    k += (x / tile[i]) * kscale;
    w += (x % tile[i]) * wscale;
    kscale *= grid[i];
    wscale *= tile[i];
  }
  *tile_ordinal = k;
  *within = w;
}

int64_t TileGeometry::run_in_tile(int64_t slot) const {
  int64_t run = 1;  // slots per step of mode i
  for (size_t i = 0; i < logical.size(); ++i) {
    const int64_t x = slot % logical[i];
    slot /= logical[i];
    const int64_t left = tile[i] - x % tile[i];
    // A mode wholly inside one tile, entered at its start, continues into the
    // next mode; otherwise the run ends with this mode's part of the tile.
    if (grid[i] != 1 || x != 0 || i + 1 == logical.size()) return run * left;
    run *= logical[i];
  }
  return run;
}

Ref<TileSelection> full_selection(const TileGeometry& g) {
  std::vector<std::vector<int64_t>> axes(g.rank());
  for (size_t i = 0; i < g.rank(); ++i)
    for (int64_t c = 0; c < g.grid[i]; ++c) axes[i].push_back(c);
  return make_ref<TileSelection>(std::move(axes));
}

static bool is_canonical(const TileGeometry& g, int64_t offset, const Layout& layout) {
  return offset == 0 && layout.is_dense() && layout.extents() == g.logical;
}
static bool is_canonical(const TileGeometry& g, const Tensor& t) { return is_canonical(g, t.offset(), t.layout()); }

void check_footprints(const TileGeometry& g, const Tensor& full) {
  if (full.footprints_checked()) return;
  if (full.shape() != g.logical) {
    std::string s;
    for (int64_t e : full.shape()) s += (s.empty() ? "" : ", ") + std::to_string(e);
    value_error("the tensor's shape (" + s + ") is not the TiledEvictable's logical shape, so its tile footprints cannot match");
  }
  if (!is_canonical(g, full)) {
    const Layout& l = full.layout();
    const int64_t n = l.size();
    std::vector<bool> seen(static_cast<size_t>(g.size()), false);
    std::vector<int64_t> x(g.rank());
    for (int64_t o = 0; o < n; ++o) {
      const int64_t slot = full.offset() + l.index_of_ordinal(o);
      if (slot < 0 || slot >= g.size()) value_error("a logical tile reaches slots outside the carrier's tile footprints");
      // Tensor tile of logical coordinate o.
      int64_t rem = o, k = 0, scale = 1;
      for (size_t i = 0; i < g.rank(); ++i) {
        const int64_t xi = rem % g.logical[i];
        rem /= g.logical[i];
        k += (xi / g.tile[i]) * scale;
        scale *= g.grid[i];
      }
      int64_t carrier_tile, within;
      g.locate(slot, &carrier_tile, &within);
      if (carrier_tile != k)
        value_error("the tensor's logical tile " + std::to_string(k) + " reaches a slot of carrier tile " +
                    std::to_string(carrier_tile) + ": tile footprints differ");
      if (seen[static_cast<size_t>(slot)])
        value_error("the tensor repeats slot " + std::to_string(slot) + " within its tile footprints");
      seen[static_cast<size_t>(slot)] = true;
    }
    // Same count, injective and in range: every footprint slot is reached.
  }
  full.mark_footprints_checked();
}

namespace {

template <typename T>
void copy_run(T* dst, int64_t ds, const T* src, int64_t ss, int64_t n) {
  if (ds == 1 && ss == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[i * ss];
}


void copy_elements(std::byte* dst, int64_t ds, const std::byte* src, int64_t ss, int64_t n, size_t es) {
  switch (es) {
    case 1: return copy_run(reinterpret_cast<uint8_t*>(dst), ds, reinterpret_cast<const uint8_t*>(src), ss, n);
    case 2: return copy_run(reinterpret_cast<uint16_t*>(dst), ds, reinterpret_cast<const uint16_t*>(src), ss, n);
    case 4: return copy_run(reinterpret_cast<uint32_t*>(dst), ds, reinterpret_cast<const uint32_t*>(src), ss, n);
    case 8: return copy_run(reinterpret_cast<uint64_t*>(dst), ds, reinterpret_cast<const uint64_t*>(src), ss, n);
    default:  // a quantized dtype's blocks
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * ds * static_cast<int64_t>(es), src + i * ss * static_cast<int64_t>(es), es);
  }
}

// Where compact tiles sit in the dense compact tensor: its shape and strides,
// each compact tile's origin, and the dense strides within a tile.
struct CompactPlacement {
  std::vector<int64_t> cshape, cstride, base, tstride;
  CompactPlacement(const TileGeometry& g, const std::vector<int64_t>& compact_grid, size_t nt) {
    const size_t r = g.rank();
    cshape.resize(r);
    cstride.resize(r);
    tstride.resize(r);
    int64_t s = 1, t = 1;
    for (size_t i = 0; i < r; ++i) {
      cshape[i] = compact_grid[i] * g.tile[i];
      cstride[i] = s;
      s *= cshape[i];
      tstride[i] = t;
      t *= g.tile[i];
    }
    base.resize(nt);
    for (size_t j = 0; j < nt; ++j) {
      int64_t rem = static_cast<int64_t>(j), b = 0;
      for (size_t i = 0; i < r; ++i) {
        b += (rem % compact_grid[i]) * g.tile[i] * cstride[i];
        rem /= compact_grid[i];
      }
      base[j] = b;
    }
  }
};

// The host kernel of transfer_tiles: tile buffers and the compact tensor in
// host memory.
// `g`, the full tensor's offset and layout and `es` are in storage units (a
// quantized dtype's blocks, see transfer_tiles).
void transfer_host(const TileGeometry& g, int64_t full_offset, const Layout& full_layout,
                   const std::vector<int64_t>& compact_grid, const std::vector<int64_t>& sources,
                   const std::vector<std::byte*>& buffers, std::byte* compact, size_t es, bool to_compact,
                   ThreadPool& pool) {
  const size_t r = g.rank();
  const size_t nt = sources.size();
  const CompactPlacement place(g, compact_grid, nt);
  const std::vector<int64_t>& cshape = place.cshape;
  const std::vector<int64_t>& base = place.base;
  if (is_canonical(g, full_offset, full_layout)) {
    // Within-tile coordinates map to compact strides and dense tile strides.
    auto lc = Layout::flat(g.tile, place.cstride), lt = Layout::flat(g.tile, place.tstride);
    Iteration it;
    if (!build_iteration({lc.get(), lt.get()}, &it)) internal_error("transfer_tiles: flat layouts failed to iterate");
    if (it.dims.size() == 1 && it.dims[0].stride[1] == 1 && it.dims[0].stride[0] > 1) {
      const int64_t S = it.dims[0].stride[0];
      bool groups = static_cast<int64_t>(nt) % S == 0;
      for (size_t j = 0; groups && j < nt; ++j) groups = base[j] == base[j - j % S] + static_cast<int64_t>(j % S);
      if (groups) {
        const int64_t n = it.dims[0].extent;
        // Stream the writes of transfers well beyond the last-level cache.
        const bool stream = static_cast<uint64_t>(nt) * static_cast<uint64_t>(g.tile_size) * es >= (uint64_t{24} << 20);
        pool.parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
          for (size_t g0 = 0; g0 < nt; g0 += static_cast<size_t>(S))
            interleave_elements(compact + base[g0] * static_cast<int64_t>(es), buffers.data() + g0, S, lo, hi, es,
                                to_compact, stream);
        });
        return;
      }
    }
    // Blocks of within-tile ordinals, each copied for every tile, so that the
    // compact block stays in cache while the tiles interleave into it.
    const int64_t block = std::max<int64_t>(1, (int64_t{256} << 10) / static_cast<int64_t>(es * std::max<size_t>(nt, 1)));
    const int64_t blocks = (g.tile_size + block - 1) / block;
    pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t lo = b * block, hi = std::min(g.tile_size, lo + block);
        for (size_t j = 0; j < nt; ++j) {
          std::byte* cbase = compact + base[j] * static_cast<int64_t>(es);
          std::byte* tbase = buffers[j];
          walk(it, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
            std::byte* c = cbase + off[0] * static_cast<int64_t>(es);
            std::byte* tb = tbase + off[1] * static_cast<int64_t>(es);
            if (to_compact)
              copy_elements(c, st[0], tb, st[1], n, es);
            else
              copy_elements(tb, st[1], c, st[0], n, es);
          });
        }
      }
    });
    return;
  }
  // General compatible layout: element by element through the slot map.
  const int64_t total = static_cast<int64_t>(nt) * g.tile_size;
  pool.parallel_for(total, 1 << 14, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> y(r), x(r);
    for (int64_t o = lo; o < hi; ++o) {
      // Compact coordinate y of ordinal o.
      int64_t rem = o;
      for (size_t i = 0; i < r; ++i) {
        y[i] = rem % cshape[i];
        rem /= cshape[i];
      }
      // Compact tile j and the source logical coordinate x.
      int64_t j = 0, scale = 1;
      for (size_t i = 0; i < r; ++i) {
        j += (y[i] / g.tile[i]) * scale;
        scale *= compact_grid[i];
      }
      const TileCoord src = g.coord(sources[static_cast<size_t>(j)]);
      int64_t xo = 0;
      scale = 1;
      for (size_t i = 0; i < r; ++i) {
        xo += (src[i] * g.tile[i] + y[i] % g.tile[i]) * scale;
        scale *= g.logical[i];
      }
      const int64_t slot = full_offset + full_layout.index_of_ordinal(xo);
      int64_t k, w;
      g.locate(slot, &k, &w);
      std::byte* tb = buffers[static_cast<size_t>(j)] + w * static_cast<int64_t>(es);
      std::byte* c = compact + o * static_cast<int64_t>(es);
      if (to_compact)
        std::memcpy(c, tb, es);
      else
        std::memcpy(tb, c, es);
    }
  });
}

}  // namespace

void transfer_tiles(const TileGeometry& g, const Tensor& full, const std::vector<int64_t>& compact_grid,
                    const std::vector<int64_t>& sources, const std::vector<Ref<Carrier>>& tiles,
                    const Tensor& compact, bool to_compact, ThreadPool& pool) {
  // Values move in storage units: a quantized dtype's blocks, whole (a tile's
  // first extent is a multiple of the block), through a geometry, a full
  // layout and a compact tensor counted in blocks.
  const sw_dtype_t dtype = compact.dtype();
  const int64_t block = dtype_block_elements(dtype);
  const size_t es = dtype_block_bytes(dtype);
  TileGeometry ug = g;
  if (block > 1) {
    ug.tile[0] /= block;
    ug.logical[0] /= block;
    ug.tile_size /= block;
  }
  const Tensor::Units full_units = full.units();
  const size_t nt = sources.size();
  std::vector<std::byte*> host(nt);
  bool on_host = compact.host_base() != nullptr;
  bool one_kind = compact.carrier().is_compute();
  for (size_t j = 0; j < nt; ++j) {
    host[j] = tiles[j]->host_data();
    on_host = on_host && host[j];
    one_kind = one_kind && tiles[j]->kind() == compact.carrier().kind();
  }
  if (on_host)
    return transfer_host(ug, full_units.offset, *full_units.layout, compact_grid, sources, host, compact.host_base(),
                         es, to_compact, pool);
  if (one_kind && is_canonical(g, full)) {
    // Device memory: one strided copy per tile on the tiles' compute backend,
    // queued behind the work already recorded there.
    const CompactPlacement place(g, compact_grid, nt);
    ComputeBackend& be = backend_for(compact.carrier());
    auto in_tile = Layout::flat(g.tile, place.tstride), in_compact = Layout::flat(g.tile, place.cstride);
    for (size_t j = 0; j < nt; ++j) {
      auto t = Tensor::create(tiles[j], 0, in_tile);
      auto c = compact.view(compact.offset() + place.base[j], in_compact);
      if (to_compact)
        be.unary(UnaryOp::kCopy, *t, 0.0, *c);
      else
        be.unary(UnaryOp::kCopy, *c, 0.0, *t);
    }
    return;
  }
  // Anything else (a general slot map off the host) runs the host kernel on
  // staged copies.
  const size_t T = static_cast<size_t>(g.tile_size);
  std::vector<std::vector<std::byte>> staged(nt, std::vector<std::byte>(compact.carrier().bytes_of(T)));
  for (size_t j = 0; j < nt; ++j) {
    host[j] = staged[j].data();
    if (!to_compact) continue;
    tiles[j]->read_slots(0, T, host[j]);
  }
  const size_t n = static_cast<size_t>(compact.numel()), at = static_cast<size_t>(compact.offset());
  std::vector<std::byte> values(compact.carrier().bytes_of(n));
  if (!to_compact) compact.carrier().read_slots(at, n, values.data());
  transfer_host(ug, full_units.offset, *full_units.layout, compact_grid, sources, host, values.data(), es, to_compact,
                pool);
  if (to_compact) return compact.carrier().write_slots(at, n, values.data());
  for (size_t j = 0; j < nt; ++j) tiles[j]->write_slots(0, T, host[j]);
}

}  // namespace sw
