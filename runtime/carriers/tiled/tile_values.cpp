#include "carriers/tiled/tile_values.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "base/error.hpp"
#include "strideweave/strideweave.h"

namespace sw {

static std::string coord_str(const TileCoord& c) {
  std::string s = "(";
  for (size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + (c.size() == 1 ? ",)" : ")");
}

static bool fmf_less(const TileCoord& a, const TileCoord& b) {
  // First coordinate fastest: compare reversed tuples.
  for (size_t i = a.size(); i-- > 0;)
    if (a[i] != b[i]) return a[i] < b[i];
  return false;
}

TileSet::TileSet(std::vector<TileCoord> coords, size_t rank)
    : Object(ObjectKind::kTileSet), rank_(coords.empty() ? 0 : rank), coords_(std::move(coords)) {
  for (const TileCoord& c : coords_) {
    if (c.size() != rank_) value_error("TileSet coordinates have mixed ranks");
    for (int64_t v : c)
      if (v < 0) value_error("TileSet coordinate " + coord_str(c) + " has a negative component");
  }
  std::sort(coords_.begin(), coords_.end(), fmf_less);
  for (size_t i = 1; i < coords_.size(); ++i)
    if (coords_[i] == coords_[i - 1]) value_error("TileSet coordinate " + coord_str(coords_[i]) + " is repeated");
}

bool TileSet::contains(const TileCoord& c) const { return std::binary_search(coords_.begin(), coords_.end(), c, fmf_less); }

void TileSet::check_grid(const std::vector<int64_t>& grid, const char* what) const {
  if (coords_.empty()) return;
  if (rank_ != grid.size())
    value_error(std::string(what) + ": tile set of rank " + std::to_string(rank_) + " does not fit a grid of rank " +
                std::to_string(grid.size()));
  for (const TileCoord& c : coords_)
    for (size_t i = 0; i < rank_; ++i)
      if (c[i] >= grid[i])
        value_error(std::string(what) + ": tile " + coord_str(c) + " is outside the grid (axis " + std::to_string(i) +
                    " has " + std::to_string(grid[i]) + " tiles)");
}

TileSelection::TileSelection(std::vector<std::vector<int64_t>> per_axis)
    : Object(ObjectKind::kTileSelection), per_axis_(std::move(per_axis)) {
  if (per_axis_.empty()) value_error("TileSelection needs at least one axis");
  if (per_axis_.size() > SW_MAX_RANK)
    value_error("TileSelection has " + std::to_string(per_axis_.size()) + " axes; the limit is SW_MAX_RANK (" +
                std::to_string(SW_MAX_RANK) + ")");
  for (size_t a = 0; a < per_axis_.size(); ++a) {
    const auto& ax = per_axis_[a];
    if (ax.empty()) value_error("TileSelection axis " + std::to_string(a) + " is empty");
    std::set<int64_t> seen;
    for (int64_t v : ax) {
      if (v < 0) value_error("TileSelection axis " + std::to_string(a) + " has a negative coordinate " + std::to_string(v));
      if (!seen.insert(v).second)
        value_error("TileSelection axis " + std::to_string(a) + " repeats coordinate " + std::to_string(v));
    }
    // The product is checked against the tile limit axis by axis, so it
    // never overflows.
    if (ax.size() > SW_MAX_TILES / count_)
      value_error("TileSelection selects more than SW_MAX_TILES (" + std::to_string(SW_MAX_TILES) +
                  ") tiles: the product of its axis counts is too large");
    count_ *= ax.size();
  }
}

std::vector<int64_t> TileSelection::compact_grid_shape() const {
  std::vector<int64_t> s;
  for (const auto& ax : per_axis_) s.push_back(static_cast<int64_t>(ax.size()));
  return s;
}

TileCoord TileSelection::coordinate(size_t j) const {
  TileCoord c(per_axis_.size());
  for (size_t a = 0; a < per_axis_.size(); ++a) {
    c[a] = per_axis_[a][j % per_axis_[a].size()];
    j /= per_axis_[a].size();
  }
  return c;
}

std::vector<TileCoord> TileSelection::coordinates() const {
  std::vector<TileCoord> out;
  out.reserve(count_);
  for (size_t j = 0; j < count_; ++j) out.push_back(coordinate(j));
  return out;
}

Ref<TileSet> TileSelection::tile_set() const { return make_ref<TileSet>(coordinates(), rank()); }

void TileSelection::check_grid(const std::vector<int64_t>& grid, const char* what) const {
  if (rank() != grid.size())
    value_error(std::string(what) + ": selection of rank " + std::to_string(rank()) + " does not fit a grid of rank " +
                std::to_string(grid.size()));
  for (size_t a = 0; a < rank(); ++a)
    for (int64_t v : per_axis_[a])
      if (v >= grid[a])
        value_error(std::string(what) + ": selection coordinate " + std::to_string(v) + " on axis " + std::to_string(a) +
                    " is outside the grid of " + std::to_string(grid[a]) + " tiles");
}

ResidencyPlan::ResidencyPlan(Ref<TileSet> promote, Ref<TileSet> retain, Ref<TileSet> evict)
    : Object(ObjectKind::kResidencyPlan),
      promote_(promote ? promote : TileSet::empty()),
      retain_(retain ? retain : TileSet::empty()),
      evict_(evict ? evict : TileSet::empty()) {
  size_t rank = 0;
  for (const TileSet* s : {promote_.get(), retain_.get(), evict_.get()}) {
    if (!s->count()) continue;
    if (rank && s->rank() != rank) value_error("ResidencyPlan fields have different ranks");
    rank = s->rank();
  }
  const TileSet* sets[3] = {promote_.get(), retain_.get(), evict_.get()};
  const char* names[3] = {"promote", "retain", "evict"};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      for (const TileCoord& c : sets[i]->coords())
        if (sets[j]->contains(c))
          value_error("ResidencyPlan: tile " + coord_str(c) + " is in both " + names[i] + " and " + names[j]);
}

void ResidencyPlan::check_grid(const std::vector<int64_t>& grid) const {
  promote_->check_grid(grid, "ResidencyPlan.promote");
  retain_->check_grid(grid, "ResidencyPlan.retain");
  evict_->check_grid(grid, "ResidencyPlan.evict");
}

}  // namespace sw
