// Residency policies: the C vtable wrapper and the built-in LRU policy.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>

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
  // Reports what came of `plan` (null for changes outside planned requests)
  // to the policy's optional outcome callback. Never throws.
  void outcome(const ResidencyPlan* plan, bool committed, const Ref<TileSet>& promoted,
               const Ref<TileSet>& evicted) const noexcept;
  // Calls the optional attach() of `vtable`; passes its error through.
  static void attach(const sw_residency_policy_t& vtable, const Object& tiled);
  // The optional plan_promotion(): null without one; its error passes
  // through, TYPE for a missing or wrong return, VALUE for a plan that does
  // not fit `grid`.
  Ref<ResidencyPlan> plan_promotion(const Ref<TileSet>& tiles, const std::vector<int64_t>& grid) const;
  // Whether it budgets explicit promotions (has plan_promotion).
  bool budgets_promotions() const { return vt_.plan_promotion != nullptr; }

 private:
  sw_residency_policy_t vt_;
};

const char* purpose_name(sw_residency_purpose_t purpose);

// LRU under a tile budget, with prefetch hints. Its view of the primary
// tier is what committed requests reported (outcome), plus what pending
// plans will promote, minus what they will evict; statistics count committed
// requests only.
class LruPolicy : public Object {
 public:
  // Exactly one of the two is nonzero.
  LruPolicy(size_t budget_tiles, uint64_t budget_bytes)
      : Object(ObjectKind::kLruPolicy), budget_(budget_tiles), budget_bytes_(budget_bytes) {}
  // A TiledEvictable with tiles of `tile_bytes` bytes starts using it; a
  // byte budget becomes whole tiles. STATE while another one uses it.
  void attach(uint64_t tile_bytes);
  void detach();
  Ref<ResidencyPlan> plan(const TileSet& required);
  Ref<ResidencyPlan> plan_promotion(const TileSet& tiles);
  void outcome(const ResidencyPlan* plan, bool committed, const TileSet& promoted, const TileSet& evicted);
  void hint(const Ref<TileSet>& tiles);
  sw_lru_stats_t stats() const;
  size_t budget_tiles() const;

 private:
  // What a plan will do once its request commits.
  struct Pending {
    std::vector<TileCoord> required, promote, evict;
    uint64_t hits = 0, misses = 0, transient = 0;
    bool manual = false;  // an explicit promotion: no request statistics
    Ref<TileSet> hints;   // the hints it took, given back if it fails
  };
  void touch(const TileCoord& c);
  void forget(const TileCoord& c);
  bool in_view(const TileCoord& c) const;
  std::set<TileCoord> view_locked() const;
  void check_budget_locked() const;  // STATE for a byte budget no TiledEvictable has fixed yet
  Ref<ResidencyPlan> register_locked(Pending p, std::vector<TileCoord> retain, size_t rank);

  mutable std::mutex mutex_;
  size_t budget_;
  const uint64_t budget_bytes_;
  bool attached_ = false;
  std::list<TileCoord> order_;  // committed primary tiles, most recent first
  std::map<TileCoord, std::list<TileCoord>::iterator> where_;
  std::map<const ResidencyPlan*, Pending> pending_;
  std::map<TileCoord, int> arriving_, leaving_;  // counts over pending plans
  Ref<TileSet> hints_;
  sw_lru_stats_t stats_{sizeof(sw_lru_stats_t), 0, 0, 0, 0, 0, 0};
};

}  // namespace sw
