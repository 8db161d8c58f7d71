// Immutable tile values: TileSet, TileSelection, ResidencyPlan.
#pragma once

#include <cstdint>
#include <vector>

#include "base/object.hpp"

namespace sw {

using TileCoord = std::vector<int64_t>;

class TileSet : public Object {
 public:
  // Validates (VALUE: negative entry, duplicate) and sorts first coordinate fastest.
  TileSet(std::vector<TileCoord> coords, size_t rank);
  static Ref<TileSet> empty() { return make_ref<TileSet>(std::vector<TileCoord>{}, 0); }

  size_t rank() const { return rank_; }
  size_t count() const { return coords_.size(); }
  const std::vector<TileCoord>& coords() const { return coords_; }
  bool contains(const TileCoord& c) const;
  bool equals(const TileSet& o) const { return rank_ == o.rank_ && coords_ == o.coords_; }

  // VALUE unless every coordinate has `grid.size()` entries within `grid`.
  void check_grid(const std::vector<int64_t>& grid, const char* what) const;

 private:
  size_t rank_;
  std::vector<TileCoord> coords_;
};

class TileSelection : public Object {
 public:
  explicit TileSelection(std::vector<std::vector<int64_t>> per_axis);

  size_t rank() const { return per_axis_.size(); }
  const std::vector<std::vector<int64_t>>& per_axis() const { return per_axis_; }
  std::vector<int64_t> compact_grid_shape() const;
  size_t count() const { return count_; }
  // Source coordinate of compact ordinal j (first mode fastest).
  TileCoord coordinate(size_t j) const;
  std::vector<TileCoord> coordinates() const;
  Ref<TileSet> tile_set() const;
  bool equals(const TileSelection& o) const { return per_axis_ == o.per_axis_; }
  void check_grid(const std::vector<int64_t>& grid, const char* what) const;

 private:
  std::vector<std::vector<int64_t>> per_axis_;
  size_t count_ = 1;
};

class ResidencyPlan : public Object {
 public:
  ResidencyPlan(Ref<TileSet> promote, Ref<TileSet> retain, Ref<TileSet> evict);

  const Ref<TileSet>& promote() const { return promote_; }
  const Ref<TileSet>& retain() const { return retain_; }
  const Ref<TileSet>& evict() const { return evict_; }
  void check_grid(const std::vector<int64_t>& grid) const;

 private:
  Ref<TileSet> promote_, retain_, evict_;
};

}  // namespace sw
