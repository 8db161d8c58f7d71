#include "carriers/tiled/tile_request.hpp"

#include <algorithm>
#include <unordered_map>

#include "base/error.hpp"

namespace sw {

void TileRequest::submit() {
  std::vector<int64_t> all = reads;
  all.insert(all.end(), promotes.begin(), promotes.end());
  pinned_ = all;
  std::sort(pinned_.begin(), pinned_.end());
  pinned_.erase(std::unique(pinned_.begin(), pinned_.end()), pinned_.end());
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    const char* what = residency ? "residency request" : "tiled request";
    for (int64_t k : pinned_) te_->check_no_owner(k, what);
    for (int64_t k : evicts) te_->check_no_owner(k, what);
    for (int64_t k : pinned_) te_->check_valid(k, what);
    if (exclusive)
      for (int64_t k : pinned_)
        if (te_->tiles_[static_cast<size_t>(k)].pins)
          state_error("update: tile " + std::to_string(k) + " is in use by pending tiled work; wait for it first");
    if (residency)
      for (int64_t k : evicts) {
        const Tile& t = te_->tiles_[static_cast<size_t>(k)];
        if (t.primary && t.dirty && te_->secondary_->is_read_only())
          state_error("evict: tile " + std::to_string(k) + " is dirty and the secondary tier is read-only");
      }
    for (int64_t k : pinned_) ++te_->tiles_[static_cast<size_t>(k)].pins;
    if (residency || exclusive) {
      for (int64_t k : pinned_) te_->tiles_[static_cast<size_t>(k)].owner = this;
      for (int64_t k : evicts) te_->tiles_[static_cast<size_t>(k)].owner = this;
    }
    ++te_->pending_;
  }
  try {
    te_->runtime().submit(shared_from_this());
  } catch (...) {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (int64_t k : pinned_) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      --t.pins;
      if (t.owner == this) t.owner = nullptr;
    }
    for (int64_t k : evicts)
      if (te_->tiles_[static_cast<size_t>(k)].owner == this) te_->tiles_[static_cast<size_t>(k)].owner = nullptr;
    --te_->pending_;
    throw;
  }
}

void TileRequest::start() {
  if (cancelled_) return finish(Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request ran"));
  fetched_.assign(pinned_.size(), nullptr);
  values_.assign(pinned_.size(), nullptr);
  staged_.assign(pinned_.size(), {});
  const size_t T = static_cast<size_t>(te_->geo_.tile_size);
  struct Need { size_t i; bool secondary; };
  std::vector<Need> needs;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (size_t i = 0; i < pinned_.size(); ++i) {
      const Tile& t = te_->tiles_[static_cast<size_t>(pinned_[i])];
      if (t.primary)
        values_[i] = t.primary;  // pinned: stays resident
      else
        needs.push_back({i, t.secondary_valid});
    }
  }
  Status st = capture([&] {
    for (const Need& n : needs) {
      fetched_[n.i] = te_->new_tile_buffer(!n.secondary);
      values_[n.i] = fetched_[n.i];
      if (n.secondary && !fetched_[n.i]->host_data()) staged_[n.i].resize(T * te_->element_size());
    }
  });
  if (!st.ok()) return finish(st);
  in_flight_ = 1;  // held until every read is issued
  for (const Need& n : needs) {
    if (!n.secondary) continue;
    ++in_flight_;
    auto me = self();
    std::byte* into = staged_[n.i].empty() ? fetched_[n.i]->host_data() : staged_[n.i].data();
    te_->secondary_->read_async(static_cast<size_t>(pinned_[n.i]) * T, T, into, [me](Status s) {
      if (!s.ok() && me->error_.ok()) me->error_ = s;
      me->fetch_done();
    });
  }
  fetch_done();
}

void TileRequest::fetch_done() {
  if (--in_flight_ > 0) return;
  if (!error_.ok()) return finish(error_);
  if (cancelled_) return finish(Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request completed"));
  run_work();
}

void TileRequest::upload_staged() {
  const size_t T = static_cast<size_t>(te_->geo_.tile_size);
  for (size_t i = 0; i < staged_.size(); ++i) {
    if (staged_[i].empty()) continue;
    fetched_[i]->write_slots(0, T, staged_[i].data());
    staged_[i] = {};
  }
}

void TileRequest::run_work() {
  const bool uploads = std::any_of(staged_.begin(), staged_.end(), [](const auto& v) { return !v.empty(); });
  if (!work && !uploads) return commit();
  // Buffers in `reads` order.
  std::unordered_map<int64_t, Ref<Carrier>> by_tile;
  for (size_t i = 0; i < pinned_.size(); ++i) by_tile[pinned_[i]] = values_[i];
  auto ordered = std::make_shared<std::vector<Ref<Carrier>>>();
  for (int64_t k : reads) ordered->push_back(by_tile[k]);
  auto me = self();
  on_worker([me, ordered] {
    me->upload_staged();
    if (me->work) me->work(*ordered);
  }, &TileRequest::commit);
}

void TileRequest::on_worker(std::function<void()> job, void (TileRequest::*next)()) {
  in_flight_ = 1;
  auto me = self();
  te_->runtime().run_on_worker(std::move(job), [me, next](Status s) {
    me->in_flight_ = 0;
    if (!s.ok()) return me->finish(s);
    if (me->cancelled_) return me->finish(Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request completed"));
    ((*me).*next)();
  });
}

void TileRequest::commit() {
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    std::unordered_map<int64_t, size_t> index;
    for (size_t i = 0; i < pinned_.size(); ++i) index[pinned_[i]] = i;
    for (int64_t k : promotes) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      const size_t i = index[k];
      if (!t.primary && fetched_[i]) t.primary = fetched_[i];
      if (t.owner == this) t.owner = nullptr;
    }
  }
  unpin();
  if (publish) {
    Status st = capture([&] { result_ = publish(); });
    if (!st.ok()) return finish(st);
  }
  fetched_.clear();
  values_.clear();
  staged_.clear();
  evict_phase();
}

void TileRequest::evict_phase() {
  if (evicts.empty()) return finish(Status{});
  evict_writes_.clear();
  Status st = capture([&] {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (int64_t k : evicts) {
      const Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if (!t.primary || !t.dirty) continue;
      if (!residency && (t.pins > 0 || (t.owner && t.owner != this))) continue;  // a policy eviction waits for a later plan
      if (te_->secondary_->is_read_only()) continue;  // keep dirty tiles primary
      evict_writes_.emplace_back(k, t.primary);
    }
    if (!evict_writes_.empty()) te_->ensure_secondary_storage();
  });
  if (!st.ok()) return finish(st);
  const bool device = std::any_of(evict_writes_.begin(), evict_writes_.end(),
                                  [](const auto& w) { return !w.second->host_data(); });
  if (!device) return write_evictions();
  // Device buffers: download their values on a worker first.
  auto me = self();
  on_worker([me] {
    const size_t T = static_cast<size_t>(me->te_->geo_.tile_size);
    me->staged_.assign(me->evict_writes_.size(), {});
    for (size_t i = 0; i < me->evict_writes_.size(); ++i) {
      const Ref<Carrier>& buf = me->evict_writes_[i].second;
      if (buf->host_data()) continue;
      me->staged_[i].resize(T * buf->element_size());
      buf->read_slots(0, T, me->staged_[i].data());
    }
  }, &TileRequest::write_evictions);
}

void TileRequest::write_evictions() {
  const size_t T = static_cast<size_t>(te_->geo_.tile_size);
  in_flight_ = 1;
  for (size_t i = 0; i < evict_writes_.size(); ++i) {
    ++in_flight_;
    auto me = self();
    const int64_t tile = evict_writes_[i].first;
    const std::byte* from = i < staged_.size() && !staged_[i].empty() ? staged_[i].data() : evict_writes_[i].second->host_data();
    te_->write_secondary(static_cast<size_t>(tile) * T, T, from, [me, tile](Status s) {
      if (!s.ok() && me->error_.ok()) me->error_ = s;
      if (s.ok()) me->written_.push_back(tile);
      if (--me->in_flight_ == 0) me->commit_evictions();
    });
  }
  if (--in_flight_ == 0) commit_evictions();
}

void TileRequest::commit_evictions() {
  if (!error_.ok()) return finish(error_);
  std::vector<int64_t> remaining;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    const std::vector<int64_t>& todo = deferred_.empty() ? evicts : deferred_;
    for (int64_t k : todo) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      const bool wrote = std::find(written_.begin(), written_.end(), k) != written_.end();
      if (wrote) {
        // The secondary tier now holds the value, whatever happens next.
        t.secondary_valid = true;
        t.dirty = false;
      }
      const bool busy = t.pins > 0 || (t.owner && t.owner != this);
      // A tile that pending work is still fetching is not primary yet, but
      // that work may promote it: an explicit eviction waits for it too, so
      // that the eviction, issued later, has the last word.
      if (!t.primary && !(residency && busy)) {
        if (t.owner == this) t.owner = nullptr;
        continue;
      }
      if (busy) {
        if (residency) remaining.push_back(k);  // waits until the work no longer needs it
        continue;
      }
      if (t.dirty) continue;  // read-only secondary, or written by nobody: keep the value
      t.primary = nullptr;
      if (wrote) t.implicit = false;
      if (t.owner == this) t.owner = nullptr;
    }
    deferred_ = remaining;
    if (!remaining.empty()) te_->deferred_.push_back(self());
  }
  if (remaining.empty()) finish(Status{});
}

void TileRequest::retry_deferred() {
  if (!finished_ && !deferred_.empty()) commit_evictions();
}

void TileRequest::unpin() {
  if (unpinned_) return;
  unpinned_ = true;
  std::vector<std::shared_ptr<TileRequest>> retry;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (int64_t k : pinned_) --te_->tiles_[static_cast<size_t>(k)].pins;
    for (auto& w : te_->deferred_)
      if (auto r = w.lock()) retry.push_back(r);
    te_->deferred_.clear();
  }
  for (auto& r : retry)
    if (r.get() != this) r->retry_deferred();
}

void TileRequest::cancel() {
  cancelled_ = true;
  if (in_flight_ == 0) finish(Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request completed"));
}

void TileRequest::finish(Status st) {
  if (finished_) return;
  finished_ = true;
  auto keep = shared_from_this();
  if (!st.ok()) {
    // Nothing was committed for the failed phase: release pins and owners.
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (Tile& t : te_->tiles_)
      if (t.owner == this) t.owner = nullptr;
  } else {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (Tile& t : te_->tiles_)
      if (t.owner == this) t.owner = nullptr;
  }
  unpin();
  fetched_.clear();
  values_.clear();
  staged_.clear();
  evict_writes_.clear();
  if (cleanup) capture([&] { cleanup(st.ok()); });
  te_->request_done();
  if (st.ok())
    await_->succeed(result_);
  else
    await_->fail(std::move(st));
  te_->runtime().finished(this);
}

}  // namespace sw
