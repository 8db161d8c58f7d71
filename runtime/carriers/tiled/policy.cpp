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

Ref<ResidencyPlan> LruPolicy::plan(const TileSet& required) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The view: committed primary tiles, plus what pending plans promote,
  // minus what they evict.
  std::set<TileCoord> view;
  for (const auto& [c, it] : where_)
    if (in_view(c)) view.insert(c);
  for (const auto& [c, n] : arriving_)
    if (n > 0 && in_view(c)) view.insert(c);
  Pending p;
  std::vector<TileCoord> retain;
  for (const TileCoord& c : required.coords()) {
    p.required.push_back(c);
    if (view.count(c)) {
      ++p.hits;
      retain.push_back(c);
    } else {
      ++p.misses;
      p.promote.push_back(c);
    }
  }
  std::set<TileCoord> after(view);
  after.insert(p.promote.begin(), p.promote.end());
  // Hints while the budget allows.
  if (hints_) {
    for (const TileCoord& c : hints_->coords()) {
      if (required.contains(c) || after.count(c)) continue;
      if (after.size() >= budget_) break;
      p.promote.push_back(c);
      after.insert(c);
    }
    hints_ = nullptr;
  }
  // Over budget: evict the least recent committed tiles this request does
  // not need. Tiles other pending plans bring in are in use and stay.
  std::set<TileCoord> needed(required.coords().begin(), required.coords().end());
  needed.insert(p.promote.begin(), p.promote.end());
  for (auto victim = order_.rbegin(); victim != order_.rend() && after.size() > budget_; ++victim) {
    if (needed.count(*victim) || !view.count(*victim)) continue;
    p.evict.push_back(*victim);
    after.erase(*victim);
  }
  for (const TileCoord& c : p.promote) ++arriving_[c];
  for (const TileCoord& c : p.evict) ++leaving_[c];
  const size_t rank = required.rank();
  auto mk = [&](std::vector<TileCoord> v) { return make_ref<TileSet>(std::move(v), rank); };
  auto plan = make_ref<ResidencyPlan>(mk(p.promote), mk(retain), mk(p.evict));
  pending_[plan.get()] = std::move(p);
  return plan;
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
      if (committed) {
        ++stats_.requests;
        stats_.hits += p.hits;
        stats_.misses += p.misses;
        stats_.promoted += p.promote.size();
        stats_.evicted += evicted.count();
        used = std::move(p.required);
      }
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
