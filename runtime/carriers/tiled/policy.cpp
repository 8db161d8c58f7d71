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

Ref<ResidencyPlan> Policy::plan(const Ref<TileSet>& required, sw_residency_purpose_t purpose,
                                const std::vector<int64_t>& grid) const {
  sw_residency_plan_t* out = nullptr;
  sw_error_t* e = vt_.plan(vt_.user_data, reinterpret_cast<const sw_tile_set_t*>(static_cast<const Object*>(required.get())),
                           purpose, &out);
  if (e) {
    Error err(e->code, e->message);
    if (!e->is_static) delete e;
    if (out) reinterpret_cast<Object*>(out)->release();
    throw err;
  }
  if (!out) type_error(std::string("the residency policy returned no ResidencyPlan for a ") + purpose_name(purpose) + " request");
  auto* obj = reinterpret_cast<Object*>(out);
  if (obj->object_kind() != ObjectKind::kResidencyPlan) {
    obj->release();
    type_error(std::string("the residency policy returned something other than a ResidencyPlan for a ") +
               purpose_name(purpose) + " request");
  }
  auto plan = Ref<ResidencyPlan>::adopt(static_cast<ResidencyPlan*>(obj));
  plan->check_grid(grid);
  return plan;
}

void LruPolicy::touch(const TileCoord& c) {
  auto it = where_.find(c);
  if (it != where_.end()) order_.erase(it->second);
  order_.push_front(c);
  where_[c] = order_.begin();
}

Ref<ResidencyPlan> LruPolicy::plan(const TileSet& required) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;
  std::vector<TileCoord> promote, retain, evict;
  for (const TileCoord& c : required.coords()) {
    if (where_.count(c)) {
      ++stats_.hits;
      retain.push_back(c);
    } else {
      ++stats_.misses;
      promote.push_back(c);
    }
  }
  // Required tiles become most recent, then hints while the budget allows.
  for (const TileCoord& c : required.coords()) touch(c);
  if (hints_) {
    for (const TileCoord& c : hints_->coords()) {
      if (where_.size() >= budget_ && !where_.count(c)) break;
      if (required.contains(c) || where_.count(c)) continue;
      promote.push_back(c);
      touch(c);
    }
    hints_ = nullptr;
  }
  // Over budget: evict the least recent tiles the request does not need.
  std::set<TileCoord> keep(promote.begin(), promote.end());
  for (const TileCoord& c : retain) keep.insert(c);
  while (where_.size() > budget_) {
    auto victim = std::prev(order_.end());
    while (keep.count(*victim) && victim != order_.begin()) --victim;
    if (keep.count(*victim)) break;  // the request alone exceeds the budget
    evict.push_back(*victim);
    where_.erase(*victim);
    order_.erase(victim);
  }
  stats_.promoted += promote.size();
  stats_.evicted += evict.size();
  const size_t rank = required.rank();
  auto mk = [&](std::vector<TileCoord> v) { return make_ref<TileSet>(std::move(v), rank); };
  return make_ref<ResidencyPlan>(mk(promote), mk(retain), mk(evict));
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
