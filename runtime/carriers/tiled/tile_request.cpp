#include "carriers/tiled/tile_request.hpp"

#include <algorithm>
#include <unordered_map>

#include "base/error.hpp"

namespace sw {

namespace {

Status cancelled_status() { return Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request completed"); }


}  // namespace

TileRequest::~TileRequest() {
  // Never submitted (refused, or dropped after its plan was made): the plan
  // was not carried out.
  if (plan && !reported_ && te_->policy()) te_->policy()->outcome(plan.get(), false, TileSet::empty(), TileSet::empty());
}

std::vector<int64_t> TileRequest::pinned_tiles() const {
  std::vector<int64_t> all = reads;
  all.insert(all.end(), promotes.begin(), promotes.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

void TileRequest::validate_locked(const std::vector<int64_t>& pinned) const {
  const char* what = residency ? "residency request" : !writes.empty() ? "update" : "tiled request";
  for (const auto* list : {&pinned, &evicts, &writes})
    for (int64_t k : *list) te_->check_no_owner(k, what);
  for (const auto* list : {&pinned, &writes})
    for (int64_t k : *list) te_->check_valid(k, what);
  for (int64_t k : writes)
    if (te_->tiles_[static_cast<size_t>(k)].pins)
      state_error(std::string(what) + ": tile " + std::to_string(k) +
                  " is in use by pending tiled work; wait for it first");
  if (explicit_eviction())
    for (int64_t k : evicts) {
      const Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if (t.primary && t.dirty && te_->secondary_->is_read_only())
        state_error("evict: tile " + std::to_string(k) + " is dirty and the secondary tier is read-only");
    }
}

void TileRequest::check() const {
  const std::vector<int64_t> pinned = pinned_tiles();
  std::lock_guard<std::mutex> lock(te_->mutex_);
  validate_locked(pinned);
}

void TileRequest::submit() {
  pinned_ = pinned_tiles();
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    validate_locked(pinned_);
    for (int64_t k : pinned_) ++te_->tiles_[static_cast<size_t>(k)].pins;
    if (residency)
      for (int64_t k : pinned_) te_->tiles_[static_cast<size_t>(k)].owner = this;
    if (explicit_eviction())
      for (int64_t k : evicts) te_->tiles_[static_cast<size_t>(k)].owner = this;
    for (int64_t k : writes) te_->tiles_[static_cast<size_t>(k)].owner = this;
    ++te_->pending_;
    // Nothing to move: the pinned buffers stay primary until the commit.
    // (A shut-down runtime refuses the request below, as it refuses any.)
    if (run_inline && !residency && evicts.empty() && writes.empty() &&
        !te_->runtime().is_shut_down() &&
        std::all_of(pinned_.begin(), pinned_.end(),
                    [&](int64_t k) { return static_cast<bool>(te_->tiles_[static_cast<size_t>(k)].primary); })) {
      here_ = true;
      values_.reserve(pinned_.size());
      for (int64_t k : pinned_) values_.push_back(te_->tiles_[static_cast<size_t>(k)].primary);
    }
  }
  if (explicit_eviction()) remaining_ = evicts;
  const bool deferred = group && !here_ && group->defers_starts();
  if (group) group->join(self(), deferred);
  if (here_) return run_here();
  if (deferred) return;  // started by the group's launch()
  submitted_ = true;
  try {
    te_->runtime().submit(shared_from_this());
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(te_->mutex_);
      release_locked();
      --te_->pending_;
    }
    submitted_ = false;
    throw;
  }
}

// ---- the request proper -------------------------------------------------------

void TileRequest::work_point() {
  Runtime& rt = te_->runtime();
  rt.hold_here(FaultKind::kTileWork);
  rt.check_fault(FaultKind::kTileWork, "tiled work");
}

void TileRequest::run_here() {
  // The request is the calling thread's alone: it is not on the loop, and
  // no other request refers to it (it owns no tile and marks none).
  if (!error_.ok()) return fail(error_);  // its group failed before it ran
  fetched_.assign(pinned_.size(), nullptr);
  Status st = capture([&] {
    work_point();
    if (tile_work) {
      std::vector<std::pair<size_t, Ref<Carrier>>> jobs;
      jobs.reserve(reads.size());
      for (size_t r = 0; r < reads.size(); ++r) {
        const size_t i =
            static_cast<size_t>(std::lower_bound(pinned_.begin(), pinned_.end(), reads[r]) - pinned_.begin());
        jobs.emplace_back(r, values_[i]);
      }
      tile_work(jobs);
    }
    if (work) {
      std::vector<Ref<Carrier>> ordered;
      ordered.reserve(reads.size());
      for (int64_t k : reads)
        ordered.push_back(values_[static_cast<size_t>(std::lower_bound(pinned_.begin(), pinned_.end(), k) -
                                                      pinned_.begin())]);
      work(ordered, outs_);
    }
  });
  if (!st.ok()) return fail(st);
  if (group) return group->ready(this);
  commit();
}

bool TileRequest::capturable(int64_t k, bool pinned_by_me) const {
  const Tile& t = te_->tiles_[static_cast<size_t>(k)];
  if (!t.primary || !t.dirty || t.writer || t.secondary_readers) return false;
  if (te_->secondary_->is_read_only()) return false;  // dirty tiles stay primary
  if (explicit_eviction()) return true;                // owned: nothing else can hold it
  // A policy eviction leaves tiles other work needs for a later plan.
  return t.pins == (pinned_by_me ? 1 : 0) && (!t.owner || t.owner == this);
}

void TileRequest::capture_locked(int64_t k) {
  Tile& t = te_->tiles_[static_cast<size_t>(k)];
  t.writer = this;
  captures_.push_back(Capture{k, t.primary, {}, false});
}

void TileRequest::start() {
  started_ = true;
  if (cancelled_) return fail(cancelled_status());
  if (!error_.ok()) return fail(error_);  // its group failed before it started
  if (explicit_eviction()) return start_eviction();
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
    // The plan's evictions write their dirty values now, beside the fetches;
    // the tiles are dropped only at the commit.
    for (int64_t k : evicts)
      if (capturable(k, std::binary_search(pinned_.begin(), pinned_.end(), k))) capture_locked(k);
  }
  Status st = capture([&] {
    for (const Need& n : needs) {
      fetched_[n.i] = n.secondary ? te_->new_tile_buffer(false, pinned_[n.i]) : te_->new_tile_buffer(true);
      values_[n.i] = fetched_[n.i];
      if (n.secondary && !fetched_[n.i]->host_data()) staged_[n.i].resize(T * te_->element_size());
    }
    for (size_t j = 0; j < writes.size(); ++j) outs_.push_back(te_->new_tile_buffer(false));
    if (!captures_.empty()) te_->ensure_secondary_storage();
  });
  if (!st.ok()) return fail(st);
  ops_ = 1;  // held until everything is issued
  fetches_ = 1;
  for (const Need& n : needs) {
    if (!n.secondary) continue;
    ++ops_;
    ++fetches_;
    auto me = self();
    const bool in_place = staged_[n.i].empty();
    std::byte* into = in_place ? fetched_[n.i]->host_data() : staged_[n.i].data();
    const bool whole_blocks = in_place && fetched_[n.i]->host_blocks_owned();
    const size_t entry = n.i;
    // A prefetch's reads yield to those of work that waits for its values.
    te_->secondary_->read_async(
        static_cast<size_t>(pinned_[n.i]) * T, T, into,
        [me, entry](Status s) {
          if (!s.ok() && me->error_.ok()) me->error_ = s;
          if (s.ok() && me->tile_work) me->run_tile_work({entry});
          me->fetch_done();
          me->op_done();
        },
        prefetch ? IoPriority::kPrefetch : IoPriority::kDemand, whole_blocks);
  }
  if (tile_work) {
    // Tiles primary at the start, and implicit zeros (filled at creation).
    std::vector<bool> fetching(pinned_.size(), false);
    for (const Need& n : needs) fetching[n.i] = n.secondary;
    std::vector<size_t> ready;
    for (size_t i = 0; i < pinned_.size(); ++i)
      if (!fetching[i]) ready.push_back(i);
    if (!ready.empty()) run_tile_work(std::move(ready));
  }
  write_captures();
  fetch_done();
  op_done();
}

void TileRequest::write_captures() {
  const size_t T = static_cast<size_t>(te_->geo_.tile_size);
  for (size_t i = 0; i < captures_.size(); ++i) {
    ++ops_;
    auto me = self();
    auto write = [me, i, T] {
      Capture& c = me->captures_[i];
      const std::byte* from = c.staged.empty() ? c.buffer->host_data() : c.staged.data();
      me->te_->write_secondary(static_cast<size_t>(c.tile) * T, T, from, [me, i](Status s) {
        if (s.ok())
          me->captures_[i].written = true;
        else if (me->error_.ok())
          me->error_ = s;
        me->op_done();
      });
    };
    if (captures_[i].buffer->host_data()) {
      write();
      continue;
    }
    // Device memory: download the value on a worker first.
    te_->runtime().run_on_worker(
        [me, i, T] {
          Capture& c = me->captures_[i];
          c.staged.resize(T * c.buffer->element_size());
          c.buffer->read_slots(0, T, c.staged.data());
        },
        [me, write](Status s) {
          if (!s.ok() && me->error_.ok()) me->error_ = s;
          if (!me->error_.ok() || me->cancelled_) return me->op_done();
          write();
        });
  }
}

void TileRequest::run_tile_work(std::vector<size_t> entries) {
  if (!error_.ok() || cancelled_) return;
  std::vector<std::pair<size_t, Ref<Carrier>>> jobs;
  for (size_t i : entries)
    for (size_t r = 0; r < reads.size(); ++r)
      if (reads[r] == pinned_[i]) jobs.emplace_back(r, values_[i]);
  if (jobs.empty()) return;
  ++ops_;
  ++fetches_;
  auto me = self();
  te_->runtime().run_on_worker(
      [me, entries, jobs = std::move(jobs)] {
        me->work_point();
        const size_t T = static_cast<size_t>(me->te_->geo_.tile_size);
        for (size_t i : entries) {
          if (me->staged_[i].empty()) continue;  // device memory: upload the host copy first
          me->fetched_[i]->write_slots(0, T, me->staged_[i].data());
          me->staged_[i] = {};
        }
        me->tile_work(jobs);
      },
      [me](Status s) {
        if (!s.ok() && me->error_.ok()) me->error_ = s;
        me->fetch_done();
        me->op_done();
      });
}

void TileRequest::fetch_done() {
  if (--fetches_ > 0) return;
  fetches_settled();
}

void TileRequest::fetches_settled() {
  if (work_started_) return;
  work_started_ = true;
  if (error_.ok() && !cancelled_) run_work();
}

void TileRequest::run_work() {
  const bool uploads = std::any_of(staged_.begin(), staged_.end(), [](const auto& v) { return !v.empty(); });
  if (!work && !uploads) return;
  // Buffers in `reads` order.
  std::unordered_map<int64_t, Ref<Carrier>> by_tile;
  for (size_t i = 0; i < pinned_.size(); ++i) by_tile[pinned_[i]] = values_[i];
  auto ordered = std::make_shared<std::vector<Ref<Carrier>>>();
  for (int64_t k : reads) ordered->push_back(by_tile[k]);
  ++ops_;
  auto me = self();
  te_->runtime().run_on_worker(
      [me, ordered] {
        const size_t T = static_cast<size_t>(me->te_->geo_.tile_size);
        for (size_t i = 0; i < me->staged_.size(); ++i) {
          if (me->staged_[i].empty()) continue;
          me->fetched_[i]->write_slots(0, T, me->staged_[i].data());
          me->staged_[i] = {};
        }
        if (me->work) {
          me->work_point();
          me->work(*ordered, me->outs_);
        }
      },
      [me](Status s) {
        if (!s.ok() && me->error_.ok()) me->error_ = s;
        me->op_done();
      });
}

void TileRequest::op_done() {
  if (--ops_ > 0) return;
  ops_settled();
}

void TileRequest::ops_settled() {
  if (finished_) return;
  if (!error_.ok()) return fail(error_);
  if (cancelled_) return fail(cancelled_status());
  if (explicit_eviction()) return drop_evictions();
  if (group) return group->ready(this);
  commit();
}

Status TileRequest::publish_result() {
  if (!publish || published_) return {};
  published_ = true;
  return capture([&] { result_ = publish(); });
}

void TileRequest::commit() {
  Status st = publish_result();
  if (!st.ok()) return fail(st);
  std::vector<int64_t> promoted, evicted;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (const Capture& c : captures_) {
      Tile& t = te_->tiles_[static_cast<size_t>(c.tile)];
      t.secondary_valid = true;
      // A tile written again since its capture (a new buffer) stays dirty.
      if (t.primary == c.buffer) t.dirty = false;
    }
    for (size_t j = 0; j < writes.size(); ++j) {
      Tile& t = te_->tiles_[static_cast<size_t>(writes[j])];
      if (!t.primary) promoted.push_back(writes[j]);
      t.primary = outs_[j];
      t.dirty = true;
      t.implicit = false;
    }
    for (int64_t k : promotes) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      const size_t i = static_cast<size_t>(std::lower_bound(pinned_.begin(), pinned_.end(), k) - pinned_.begin());
      if (!t.primary && fetched_[i]) {
        t.primary = fetched_[i];
        promoted.push_back(k);
      }
    }
    release_locked();
    // The plan's evictions, of tiles no work needs any more. A clean tile's
    // value is on the secondary tier (or is its implicit zero).
    for (int64_t k : evicts) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if (!t.primary || t.dirty || t.pins || t.owner || t.writer) continue;
      t.primary = nullptr;
      evicted.push_back(k);
    }
  }
  report(true, promoted, evicted);
  finish(Status{});
}

// ---- explicit evictions ----------------------------------------------------------

void TileRequest::start_eviction() {
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    // Another eviction still writing one of the tiles, or a blocking read of
    // a secondary copy, goes first: this one writes after it.
    for (int64_t k : remaining_) {
      const Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if ((t.writer && t.writer != this) || t.secondary_readers) {
        parked_ = true;
        te_->deferred_.push_back(self());
        return;
      }
    }
    for (int64_t k : remaining_)
      if (capturable(k, false)) capture_locked(k);
  }
  if (!captures_.empty()) {
    Status st = capture([&] { te_->ensure_secondary_storage(); });
    if (!st.ok()) return fail(st);
  }
  ops_ = 1;
  write_captures();
  op_done();
}

void TileRequest::drop_evictions() {
  std::vector<int64_t> evicted, next;
  bool unwritten = false;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (const Capture& c : captures_) {
      Tile& t = te_->tiles_[static_cast<size_t>(c.tile)];
      t.secondary_valid = true;
      if (t.primary == c.buffer) t.dirty = false;
      if (t.writer == this) t.writer = nullptr;
    }
    captures_.clear();
    for (int64_t k : remaining_) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      const bool busy = t.pins > 0 || t.writer;
      // A tile that pending work is still fetching is not primary yet, but
      // that work may promote it: the eviction, issued later, waits for it
      // so that it has the last word.
      if (!t.primary && !busy) {
        if (t.owner == this) t.owner = nullptr;
        continue;
      }
      if (busy || t.dirty) {
        unwritten = unwritten || (t.dirty && !busy);
        next.push_back(k);
        continue;
      }
      t.primary = nullptr;
      evicted.push_back(k);
      if (t.owner == this) t.owner = nullptr;
    }
    remaining_ = next;
    if (!remaining_.empty() && !unwritten) {
      parked_ = true;
      te_->deferred_.push_back(self());
    }
  }
  report(true, {}, evicted);
  if (remaining_.empty()) return finish(Status{});
  if (unwritten) start_eviction();  // a tile promoted dirty meanwhile: write it too
}

void TileRequest::retry() {
  if (finished_ || !parked_) return;
  parked_ = false;
  if (cancelled_) return fail(cancelled_status());
  start_eviction();
}

// ---- the end -----------------------------------------------------------------------

void TileRequest::release_locked() {
  if (released_) return;
  released_ = true;
  for (int64_t k : pinned_) --te_->tiles_[static_cast<size_t>(k)].pins;
  for (const auto* list : {&pinned_, &evicts, &writes})
    for (int64_t k : *list) {
      Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if (t.owner == this) t.owner = nullptr;
    }
  for (const Capture& c : captures_) {
    Tile& t = te_->tiles_[static_cast<size_t>(c.tile)];
    if (t.writer == this) t.writer = nullptr;
  }
}

void TileRequest::report(bool committed, const std::vector<int64_t>& promoted, const std::vector<int64_t>& evicted) {
  const std::shared_ptr<Policy>& policy = te_->policy();
  if (!policy) return;
  if (plan) {
    if (reported_) return;
    reported_ = true;
    policy->outcome(plan.get(), committed, te_->tile_set_of(committed ? promoted : std::vector<int64_t>{}),
                    te_->tile_set_of(committed ? evicted : std::vector<int64_t>{}));
  } else if (committed && (!promoted.empty() || !evicted.empty())) {
    policy->outcome(nullptr, true, te_->tile_set_of(promoted), te_->tile_set_of(evicted));
  }
}

void TileRequest::fail(Status st) {
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    release_locked();
  }
  report(false, {}, {});
  finish(std::move(st));
}

void TileRequest::abort(Status st) {
  if (finished_) return;
  if (error_.ok()) error_ = std::move(st);
  // Settled (waiting for its group), or run inline: fails now. Still
  // moving: ops_settled() fails it; not started: start() does.
  if (here_ || (started_ && ops_ == 0)) fail(error_);
}

void TileRequest::cancel() {
  cancelled_ = true;
  if (ops_ == 0 && !finished_) fail(cancelled_status());
}

void TileRequest::finish(Status st) {
  if (finished_) return;
  finished_ = true;
  auto keep = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    release_locked();
  }
  fetched_.clear();
  values_.clear();
  staged_.clear();
  outs_.clear();
  captures_.clear();
  if (cleanup) capture([&] { cleanup(st); });
  te_->request_done();
  if (st.ok())
    await_->succeed(result_);
  else
    await_->fail(st);
  if (published) published->fail(st.ok() ? Status::make(SW_ERROR_INTERNAL, "committed without publishing") : st);
  if (submitted_) te_->runtime().finished(this);  // one run inline (or never started) was never the runtime's
  // Pins, owners and writer marks are gone: explicit evictions waiting on
  // them may go on.
  te_->wake_deferred();
  // Last: the group completes its await once every member got here.
  if (group) std::exchange(group, nullptr)->terminal(this, st, result_);
}

}  // namespace sw
