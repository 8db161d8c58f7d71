#include "carriers/tiled/policy.hpp"

#include <set>

#include "base/error.hpp"
#include "base/object.hpp"

namespace sw {

const char* purpose_name(sw_residency_purpose_t p) {
  switch (p) {
    case SW_PURPOSE_OPERATION: return "operation";
    case SW_PURPOSE_PROJECTION: return "projection";
    case SW_PURPOSE_SCATTER: return "scatter";
    case SW_PURPOSE_BACKWARD: return "backward";
    default: return "unknown";
  }
}

Policy::~Policy() {
  if (vt_.destroy) vt_.destroy(vt_.user_data);
}

namespace {

// Adopts what a policy callback returned: its error passes through (and a
// plan it returned anyway is released), TYPE for a missing or wrong return,
// VALUE for a plan that does not fit `grid`.
Ref<ResidencyPlan> adopt_plan(sw_error_t* e, sw_residency_plan_t* out, const std::string& what,
                              const std::vector<int64_t>& grid) {
  if (e) {
    Error err(e->code, e->message);
    if (!e->is_static) delete e;
    if (out) reinterpret_cast<Object*>(out)->release();
    throw err;
  }
  if (!out) type_error("the residency policy returned no ResidencyPlan for " + what);
  auto* obj = reinterpret_cast<Object*>(out);
  if (obj->object_kind() != ObjectKind::kResidencyPlan) {
    obj->release();
    type_error("the residency policy returned something other than a ResidencyPlan for " + what);
  }
  auto plan = Ref<ResidencyPlan>::adopt(static_cast<ResidencyPlan*>(obj));
  plan->check_grid(grid);
  return plan;
}

const sw_tile_set_t* set_handle(const Ref<TileSet>& s) {
  return reinterpret_cast<const sw_tile_set_t*>(static_cast<const Object*>(s.get()));
}

}  // namespace

Ref<ResidencyPlan> Policy::plan(const Ref<TileSet>& required, sw_residency_purpose_t purpose,
                                const std::vector<int64_t>& grid) const {
  sw_residency_plan_t* out = nullptr;
  sw_error_t* e = vt_.plan(vt_.user_data, set_handle(required), purpose, &out);
  return adopt_plan(e, out, std::string("a ") + purpose_name(purpose) + " request", grid);
}

Ref<ResidencyPlan> Policy::plan_promotion(const Ref<TileSet>& tiles, const std::vector<int64_t>& grid) const {
  if (!vt_.plan_promotion) return nullptr;
  sw_residency_plan_t* out = nullptr;
  sw_error_t* e = vt_.plan_promotion(vt_.user_data, set_handle(tiles), &out);
  return adopt_plan(e, out, "an explicit promotion", grid);
}

void Policy::attach(const sw_residency_policy_t& vt, const Object& tiled) {
  if (!vt.attach) return;
  if (sw_error_t* e = vt.attach(vt.user_data, reinterpret_cast<const sw_carrier_t*>(&tiled))) {
    Error err(e->code, e->message);
    if (!e->is_static) delete e;
    throw err;
  }
}

void Policy::outcome(const ResidencyPlan* plan, bool committed, const Ref<TileSet>& promoted,
                     const Ref<TileSet>& evicted) const noexcept {
  if (!vt_.outcome) return;
  auto handle = [](const Object* o) { return reinterpret_cast<const sw_tile_set_t*>(o); };
  vt_.outcome(vt_.user_data, reinterpret_cast<const sw_residency_plan_t*>(static_cast<const Object*>(plan)), committed,
              handle(promoted.get()), handle(evicted.get()));
}

void LruPolicy::touch(const TileCoord& c) {
  auto it = where_.find(c);
  if (it != where_.end()) order_.erase(it->second);
  order_.push_front(c);
  where_[c] = order_.begin();
}

void LruPolicy::forget(const TileCoord& c) {
  auto it = where_.find(c);
  if (it == where_.end()) return;
  order_.erase(it->second);
  where_.erase(it);
}

bool LruPolicy::in_view(const TileCoord& c) const {
  auto count = [](const std::map<TileCoord, int>& m, const TileCoord& k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  };
  return (where_.count(c) || count(arriving_, c) > 0) && count(leaving_, c) == 0;
}

void LruPolicy::attach(uint64_t tile_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (attached_)
    state_error("the LRU policy already serves a TiledEvictable; create one LRU policy per TiledEvictable");
  if (budget_bytes_) {
    const uint64_t tiles = budget_bytes_ / tile_bytes;
    if (tiles == 0)
      value_error("the LRU budget of " + std::to_string(budget_bytes_) + " bytes holds no tile of " +
                  std::to_string(tile_bytes) + " bytes");
    budget_ = static_cast<size_t>(tiles);
  }
  attached_ = true;
}

void LruPolicy::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  attached_ = false;
}

void LruPolicy::check_budget_locked() const {
  if (budget_ == 0)
    state_error("the LRU policy's byte budget becomes tiles when a TiledEvictable attaches; it has none yet");
}

size_t LruPolicy::budget_tiles() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return budget_;
}

// The view: committed primary tiles, plus what pending plans promote, minus
// what they evict.
std::set<TileCoord> LruPolicy::view_locked() const {
  std::set<TileCoord> view;
  for (const auto& [c, it] : where_)
    if (in_view(c)) view.insert(c);
  for (const auto& [c, n] : arriving_)
    if (n > 0 && in_view(c)) view.insert(c);
  return view;
}

Ref<ResidencyPlan> LruPolicy::register_locked(Pending p, std::vector<TileCoord> retain, size_t rank) {
  for (const TileCoord& c : p.promote) ++arriving_[c];
  for (const TileCoord& c : p.evict) ++leaving_[c];
  auto mk = [&](std::vector<TileCoord> v) { return make_ref<TileSet>(std::move(v), rank); };
  auto plan = make_ref<ResidencyPlan>(mk(p.promote), mk(std::move(retain)), mk(p.evict));
  pending_[plan.get()] = std::move(p);
  return plan;
}

Ref<ResidencyPlan> LruPolicy::plan(const TileSet& required) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_budget_locked();
  const std::set<TileCoord> view = view_locked();
  const std::set<TileCoord> needed(required.coords().begin(), required.coords().end());
  std::set<TileCoord> after(view);
  // Victims, least recent first: committed tiles in the view this request
  // does not need. Tiles other pending plans bring in are in use and stay.
  // Evicts them until at most `limit` tiles stay.
  auto victim = order_.rbegin();
  Pending p;
  auto shrink_to = [&](size_t limit) {
    for (; victim != order_.rend() && after.size() > limit; ++victim) {
      if (needed.count(*victim) || !after.count(*victim)) continue;
      p.evict.push_back(*victim);
      after.erase(*victim);
    }
    return after.size() <= limit;
  };
  // Back within the budget first (evictions deferred earlier are planned
  // again), then room for each miss in turn.
  shrink_to(budget_);
  std::vector<TileCoord> retain;
  for (const TileCoord& c : required.coords()) {
    p.required.push_back(c);
    if (view.count(c)) {
      ++p.hits;
      retain.push_back(c);
      continue;
    }
    ++p.misses;
    if (shrink_to(budget_ - 1)) {
      p.promote.push_back(c);
      after.insert(c);
    } else {
      ++p.transient;  // read for this request only: the budget is full of tiles it needs
    }
  }
  // Hints into the room left.
  if (hints_) {
    for (const TileCoord& c : hints_->coords()) {
      if (after.size() >= budget_) break;
      if (needed.count(c) || after.count(c)) continue;
      p.promote.push_back(c);
      after.insert(c);
    }
    p.hints = std::move(hints_);
    hints_ = nullptr;
  }
  return register_locked(std::move(p), std::move(retain), required.rank());
}

Ref<ResidencyPlan> LruPolicy::plan_promotion(const TileSet& tiles) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_budget_locked();
  if (tiles.count() > budget_)
    value_error("promote: " + std::to_string(tiles.count()) + " tiles exceed the LRU budget of " +
                std::to_string(budget_) + " tiles");
  const std::set<TileCoord> wanted(tiles.coords().begin(), tiles.coords().end());
  std::set<TileCoord> after = view_locked();
  Pending p;
  p.manual = true;
  p.required = tiles.coords();  // each a use once it commits, the primary ones too
  for (const TileCoord& c : tiles.coords())
    if (!after.count(c)) p.promote.push_back(c);  // arriving, for other plans' view
  after.insert(wanted.begin(), wanted.end());
  for (auto victim = order_.rbegin(); victim != order_.rend() && after.size() > budget_; ++victim) {
    if (wanted.count(*victim) || !after.count(*victim)) continue;
    p.evict.push_back(*victim);
    after.erase(*victim);
  }
  return register_locked(std::move(p), {}, tiles.rank());
}

void LruPolicy::outcome(const ResidencyPlan* plan, bool committed, const TileSet& promoted, const TileSet& evicted) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto drop = [](std::map<TileCoord, int>& m, const TileCoord& c) {
    auto it = m.find(c);
    if (it != m.end() && --it->second <= 0) m.erase(it);
  };
  std::vector<TileCoord> used;
  if (plan) {
    auto it = pending_.find(plan);
    if (it != pending_.end()) {
      Pending& p = it->second;
      for (const TileCoord& c : p.promote) drop(arriving_, c);
      for (const TileCoord& c : p.evict) drop(leaving_, c);
      if (committed && !p.manual) {
        ++stats_.requests;
        stats_.hits += p.hits;
        stats_.misses += p.misses;
        stats_.transient += p.transient;
        stats_.promoted += p.promote.size();
        stats_.evicted += evicted.count();
      }
      if (committed) used = std::move(p.required);
      // A request that failed (or was never submitted) consumed nothing:
      // its hints stand for the next plan, unless newer ones replaced them.
      if (!committed && p.hints && !hints_) hints_ = std::move(p.hints);
      pending_.erase(it);
    }
  }
  if (!committed) return;
  // What is primary now; a tile promoted by hand is a use like any other.
  for (const TileCoord& c : promoted.coords()) touch(c);
  for (const TileCoord& c : evicted.coords()) forget(c);
  for (const TileCoord& c : used)
    if (where_.count(c)) touch(c);
}

void LruPolicy::hint(const Ref<TileSet>& tiles) {
  std::lock_guard<std::mutex> lock(mutex_);
  hints_ = tiles;
}

sw_lru_stats_t LruPolicy::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace sw
