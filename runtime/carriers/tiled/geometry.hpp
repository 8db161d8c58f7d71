// Canonical tile geometry of a TiledEvictable and the one gather routine that
// moves values between tile buffers and compact dense tensors.
#pragma once

#include <algorithm>

#include <cstdint>
#include <vector>

#include "base/thread_pool.hpp"
#include "carriers/tiled/tile_values.hpp"
#include "core/tensor.hpp"

namespace sw {

struct TileGeometry {
  std::vector<int64_t> grid, tile, logical;
  int64_t tiles = 1;     // number of tiles
  int64_t tile_size = 1; // elements per tile (T)

  TileGeometry() = default;
  TileGeometry(std::vector<int64_t> grid_shape, std::vector<int64_t> tile_shape);

  int64_t size() const { return tiles * tile_size; }
  size_t rank() const { return grid.size(); }
  int64_t ordinal(const TileCoord& c) const;  // first grid mode fastest
  TileCoord coord(int64_t ordinal) const;
  // Canonical slot -> (tile ordinal, within-tile index).
  void locate(int64_t slot, int64_t* tile_ordinal, int64_t* within) const;
  // How many slots from `slot` on stay in its tile at consecutive within-tile
  // indices (at least 1).
  int64_t run_in_tile(int64_t slot) const;
  // Walks canonical slots [first, first + count) as pieces that each lie in
  // one tile at consecutive within-tile indices: f(tile ordinal, within-tile
  // index, offset of the piece from `first`, piece length). Consecutive slots
  // may step from tile to tile (an (expert, out, in) tensor with one expert
  // per tile does so every slot), and may come back to a tile.
  template <typename F>
  void for_each_piece(int64_t first, int64_t count, F&& f) const {
    for (int64_t done = 0; done < count;) {
      int64_t k, w;
      locate(first + done, &k, &w);
      const int64_t n = std::min(count - done, run_in_tile(first + done));
      f(k, w, done, n);
      done += n;
    }
  }
  bool operator==(const TileGeometry& o) const { return grid == o.grid && tile == o.tile; }
};

// Every tile, in grid order: its compact tensor is the whole logical tensor.
Ref<TileSelection> full_selection(const TileGeometry& g);

// Throws VALUE (message contains "tile footprints") unless `full` (a tensor
// over a carrier with this geometry) is tile-footprint compatible. The verdict
// is cached in the tensor.
void check_footprints(const TileGeometry& g, const Tensor& full);

// The one gather routine. `sources[j]` is the tile ordinal packed at compact
// tile j (first mode fastest over `compact_grid`), `tiles[j]` the buffer of
// its values (T slots, within-tile first mode fastest). Gathers into, or
// (to_compact false) scatters out of, the dense compact tensor `compact`.
// The mapping of logical coordinates to tile slots follows `full`'s offset
// and layout. Host memory runs the host kernel, parallel over `pool`; device
// buffers with a canonical `full` take one strided copy per tile on their
// compute backend; anything else runs the host kernel on staged copies.
void transfer_tiles(const TileGeometry& g, const Tensor& full, const std::vector<int64_t>& compact_grid,
                    const std::vector<int64_t>& sources, const std::vector<Ref<Carrier>>& tiles,
                    const Tensor& compact, bool to_compact, ThreadPool& pool);

}  // namespace sw
