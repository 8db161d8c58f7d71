// Residency policies: the C vtable wrapper and the built-in LRU policy.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <map>

#include "carriers/tiled/tile_values.hpp"
#include "strideweave/strideweave.h"

namespace sw {

// A policy given at construction, shared by whoever needs it; calls destroy
// once when the last holder is gone.
class Policy {
 public:
  explicit Policy(const sw_residency_policy_t& vtable) : vt_(vtable) {}
  ~Policy();
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Calls plan(); passes the callback's error through unchanged, TYPE for a
  // missing or wrong return, VALUE for a plan that does not fit `grid`.
  Ref<ResidencyPlan> plan(const Ref<TileSet>& required, sw_residency_purpose_t purpose,
                          const std::vector<int64_t>& grid) const;

 private:
  sw_residency_policy_t vt_;
};

const char* purpose_name(sw_residency_purpose_t purpose);

// LRU under a tile budget, with prefetch hints.
class LruPolicy : public Object {
 public:
  explicit LruPolicy(size_t budget) : Object(ObjectKind::kLruPolicy), budget_(budget) {}
  Ref<ResidencyPlan> plan(const TileSet& required);
  void hint(const Ref<TileSet>& tiles);
  sw_lru_stats_t stats() const;

 private:
  void touch(const TileCoord& c);
  mutable std::mutex mutex_;
  size_t budget_;
  std::list<TileCoord> order_;  // most recent first: the tiles the policy believes resident
  std::map<TileCoord, std::list<TileCoord>::iterator> where_;
  Ref<TileSet> hints_;
  sw_lru_stats_t stats_{sizeof(sw_lru_stats_t), 0, 0, 0, 0, 0};
};

}  // namespace sw
