#include "carriers/tiled/tile_request.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "base/error.hpp"

namespace sw {

namespace {

Status cancelled_status() { return Status::make(SW_ERROR_CANCELLED, "the runtime shut down before the request completed"); }

// The lifecycle's shape, checked where it is written: the loop's path, the
// calling thread's, an explicit eviction's, and what never happens.
using S = TileRequest::State;
constexpr bool path(std::initializer_list<S> states) {
  for (auto it = states.begin(); it + 1 < states.end(); ++it)
    if (!TileRequest::legal_transition(it[0], it[1])) return false;
  return true;
}
static_assert(path({S::kConfigured, S::kQueued, S::kMoving, S::kWorking, S::kReady, S::kPublished, S::kReleased,
                    S::kFinished}));
static_assert(path({S::kConfigured, S::kDeferred, S::kQueued, S::kMoving, S::kWorking, S::kReleased, S::kFinished}));
static_assert(path({S::kConfigured, S::kInline, S::kReady, S::kPublished, S::kReleased, S::kFinished}));
static_assert(path({S::kConfigured, S::kQueued, S::kEvicting, S::kParked, S::kEvicting, S::kReleased, S::kFinished}));
// Nothing leaves the terminal state, nothing skips the release, nothing
// works before it started, and nothing commits twice or goes back.
static_assert(!TileRequest::legal_transition(S::kFinished, S::kQueued));
static_assert(!TileRequest::legal_transition(S::kFinished, S::kReleased));
static_assert(!TileRequest::legal_transition(S::kReady, S::kFinished));
static_assert(!TileRequest::legal_transition(S::kPublished, S::kFinished));
static_assert(!TileRequest::legal_transition(S::kQueued, S::kWorking));
static_assert(!TileRequest::legal_transition(S::kConfigured, S::kMoving));
static_assert(!TileRequest::legal_transition(S::kPublished, S::kReady));
static_assert(!TileRequest::legal_transition(S::kWorking, S::kMoving));
static_assert(!TileRequest::legal_transition(S::kInline, S::kMoving));
static_assert(!TileRequest::legal_transition(S::kDeferred, S::kReleased));
static_assert(!TileRequest::legal_transition(S::kReleased, S::kReleased));

}  // namespace

const char* TileRequest::state_name(State s) {
  switch (s) {
    case State::kConfigured: return "configured";
    case State::kDeferred: return "deferred";
    case State::kQueued: return "queued";
    case State::kInline: return "inline";
    case State::kMoving: return "moving";
    case State::kWorking: return "working";
    case State::kEvicting: return "evicting";
    case State::kParked: return "parked";
    case State::kReady: return "ready";
    case State::kPublished: return "published";
    case State::kReleased: return "released";
    case State::kFinished: return "finished";
  }
  return "?";
}

void TileRequest::to(State next) {
#ifndef NDEBUG
  if (!legal_transition(state_, next)) {
    std::fprintf(stderr, "TileRequest: illegal transition %s -> %s\n", state_name(state_), state_name(next));
    std::abort();
  }
#endif
  state_ = next;
}

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

size_t TileRequest::entry_of(int64_t k) const {
  return static_cast<size_t>(
      std::lower_bound(entries_.begin(), entries_.end(), k, [](const Entry& e, int64_t t) { return e.tile < t; }) -
      entries_.begin());
}

bool TileRequest::pins_tile(int64_t k) const {
  const size_t i = entry_of(k);
  return i < entries_.size() && entries_[i].tile == k;
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
  const std::vector<int64_t> pinned = pinned_tiles();
  bool here = false;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    validate_locked(pinned);
    entries_.clear();
    entries_.reserve(pinned.size());
    for (int64_t k : pinned) entries_.push_back(Entry{k, nullptr, nullptr, {}});
    for (int64_t k : pinned) ++te_->tiles_[static_cast<size_t>(k)].pins;
    if (residency)
      for (int64_t k : pinned) te_->tiles_[static_cast<size_t>(k)].owner = this;
    if (explicit_eviction())
      for (int64_t k : evicts) te_->tiles_[static_cast<size_t>(k)].owner = this;
    for (int64_t k : writes) te_->tiles_[static_cast<size_t>(k)].owner = this;
    ++te_->pending_;
    // Nothing to move: the pinned buffers stay primary until the commit.
    // (A shut-down runtime refuses the request below, as it refuses any.)
    if (run_inline && !residency && evicts.empty() && writes.empty() &&
        !te_->runtime().is_shut_down() &&
        std::all_of(pinned.begin(), pinned.end(),
                    [&](int64_t k) { return static_cast<bool>(te_->tiles_[static_cast<size_t>(k)].primary); })) {
      here = true;
      for (Entry& e : entries_) e.value = te_->tiles_[static_cast<size_t>(e.tile)].primary;
    }
  }
  if (explicit_eviction()) remaining_ = evicts;
  const bool deferred = group && !here && group->defers_starts();
  to(here ? State::kInline : deferred ? State::kDeferred : State::kQueued);
  if (group) group->join(self(), deferred);
  if (here) return run_here();
  if (deferred) return;  // started by the group's launch()
  on_loop_ = true;
  try {
    te_->runtime().submit(shared_from_this());
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(te_->mutex_);
      release_locked();
      --te_->pending_;
    }
    on_loop_ = false;
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
  Status st = capture([&] {
    work_point();
    if (tile_work) {
      std::vector<std::pair<size_t, Ref<Carrier>>> jobs;
      jobs.reserve(reads.size());
      for (size_t r = 0; r < reads.size(); ++r) jobs.emplace_back(r, entries_[entry_of(reads[r])].value);
      tile_work(jobs);
    }
    if (work) {
      std::vector<Ref<Carrier>> ordered;
      ordered.reserve(reads.size());
      for (int64_t k : reads) ordered.push_back(entries_[entry_of(k)].value);
      work(ordered, outs_);
    }
  });
  if (!st.ok()) return fail(st);
  to(State::kReady);
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
  captures_.push_back(Capture{k, t.primary, {}});
}

void TileRequest::start() {
  if (cancelled_) return fail(cancelled_status());
  if (!error_.ok()) return fail(error_);  // its group failed before it started
  if (explicit_eviction()) return start_eviction();
  to(State::kMoving);
  const size_t T = static_cast<size_t>(te_->geo_.tile_size);
  struct Need { size_t i; bool secondary; };
  std::vector<Need> needs;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Tile& t = te_->tiles_[static_cast<size_t>(entries_[i].tile)];
      if (t.primary)
        entries_[i].value = t.primary;  // pinned: stays resident
      else
        needs.push_back({i, t.secondary_valid});
    }
    // The plan's evictions write their dirty values now, beside the fetches;
    // the tiles are dropped only at the commit.
    for (int64_t k : evicts)
      if (capturable(k, pins_tile(k))) capture_locked(k);
  }
  Status st = capture([&] {
    for (const Need& n : needs) {
      Entry& e = entries_[n.i];
      e.fetched = n.secondary ? te_->new_tile_buffer(false, e.tile) : te_->new_tile_buffer(true);
      e.value = e.fetched;
      if (n.secondary && !e.fetched->host_data()) e.staged.resize(te_->bytes_of(T));
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
    Entry& e = entries_[n.i];
    const bool in_place = e.staged.empty();
    std::byte* into = in_place ? e.fetched->host_data() : e.staged.data();
    const bool whole_blocks = in_place && e.fetched->host_blocks_owned();
    const size_t entry = n.i;
    // A prefetch's reads yield to those of work that waits for its values.
    te_->secondary_->read_async(
        static_cast<size_t>(e.tile) * T, T, into,
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
    std::vector<bool> fetching(entries_.size(), false);
    for (const Need& n : needs) fetching[n.i] = n.secondary;
    for (size_t i = 0; i < entries_.size(); ++i)
      if (!fetching[i]) resident_.push_back(i);
    // Run by started(), once every request submitted with this one has
    // issued its reads; held as a read and an op until then.
    if (!resident_.empty()) {
      ++ops_;
      ++fetches_;
    }
  }
  write_captures();
  fetch_done();
  op_done();
}

void TileRequest::started() {
  if (resident_.empty()) return;
  run_tile_work(std::exchange(resident_, {}));
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
      me->te_->write_secondary(static_cast<size_t>(c.tile) * T, T, from, [me](Status s) {
        if (!s.ok() && me->error_.ok()) me->error_ = s;
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
          c.staged.resize(c.buffer->bytes_of(T));
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
      if (reads[r] == entries_[i].tile) jobs.emplace_back(r, entries_[i].value);
  if (jobs.empty()) return;
  ++ops_;
  ++fetches_;
  auto me = self();
  te_->runtime().run_on_worker(
      [me, entries, jobs = std::move(jobs)] {
        me->work_point();
        const size_t T = static_cast<size_t>(me->te_->geo_.tile_size);
        for (size_t i : entries) {
          Entry& e = me->entries_[i];
          if (e.staged.empty()) continue;  // device memory: upload the host copy first
          e.fetched->write_slots(0, T, e.staged.data());
          e.staged = {};
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
  if (state_ != State::kMoving) return;
  to(State::kWorking);
  if (error_.ok() && !cancelled_) run_work();
}

void TileRequest::run_work() {
  const bool uploads = std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.staged.empty(); });
  if (!work && !uploads) return;
  // Buffers in `reads` order.
  auto ordered = std::make_shared<std::vector<Ref<Carrier>>>();
  ordered->reserve(reads.size());
  for (int64_t k : reads) ordered->push_back(entries_[entry_of(k)].value);
  ++ops_;
  auto me = self();
  te_->runtime().run_on_worker(
      [me, ordered] {
        const size_t T = static_cast<size_t>(me->te_->geo_.tile_size);
        for (Entry& e : me->entries_) {
          if (e.staged.empty()) continue;
          e.fetched->write_slots(0, T, e.staged.data());
          e.staged = {};
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
  if (state_ == State::kFinished) return;
  if (!error_.ok()) return fail(error_);
  if (cancelled_) return fail(cancelled_status());
  if (explicit_eviction()) return drop_evictions();
  to(State::kReady);
  if (group) return group->ready(this);
  commit();
}

Status TileRequest::publish_result() {
  if (state_ == State::kPublished) return {};
  to(State::kPublished);
  if (!publish) return {};
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
      const Ref<Carrier>& fetched = entries_[entry_of(k)].fetched;
      if (!t.primary && fetched) {
        t.primary = fetched;
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
  if (state_ != State::kEvicting) to(State::kEvicting);
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    // Another eviction still writing one of the tiles, or a blocking read of
    // a secondary copy, goes first: this one writes after it.
    for (int64_t k : remaining_) {
      const Tile& t = te_->tiles_[static_cast<size_t>(k)];
      if ((t.writer && t.writer != this) || t.secondary_readers) {
        to(State::kParked);
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
      to(State::kParked);
      te_->deferred_.push_back(self());
    }
  }
  report(true, {}, evicted);
  if (remaining_.empty()) return finish(Status{});
  if (unwritten) start_eviction();  // a tile promoted dirty meanwhile: write it too
}

void TileRequest::retry() {
  if (state_ != State::kParked) return;
  if (cancelled_) return fail(cancelled_status());
  start_eviction();
}

// ---- the end -----------------------------------------------------------------------

void TileRequest::release_locked() {
  if (state_ == State::kReleased) return;
  to(State::kReleased);
  for (const Entry& e : entries_) {
    Tile& t = te_->tiles_[static_cast<size_t>(e.tile)];
    --t.pins;
    if (t.owner == this) t.owner = nullptr;
  }
  for (const auto* list : {&evicts, &writes})
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
  if (state_ == State::kFinished) return;
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    release_locked();
  }
  report(false, {}, {});
  finish(std::move(st));
}

void TileRequest::abort(Status st) {
  if (state_ == State::kFinished) return;
  if (error_.ok()) error_ = std::move(st);
  // Settled (waiting for its group, or parked), or run inline: fails now.
  // Still moving: ops_settled() fails it; not started: start() does.
  switch (state_) {
    case State::kInline: case State::kReady: case State::kPublished: case State::kParked: return fail(error_);
    default: return;
  }
}

void TileRequest::cancel() {
  cancelled_ = true;
  if (ops_ == 0 && state_ != State::kFinished) fail(cancelled_status());
}

void TileRequest::finish(Status st) {
  if (state_ == State::kFinished) return;
  auto keep = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(te_->mutex_);
    release_locked();
  }
  to(State::kFinished);
  entries_.clear();
  outs_.clear();
  captures_.clear();
  if (cleanup) capture([&] { cleanup(st); });
  te_->request_done();
  if (st.ok())
    await_->succeed(result_);
  else
    await_->fail(st);
  if (published) published->fail(st.ok() ? Status::make(SW_ERROR_INTERNAL, "committed without publishing") : st);
  if (on_loop_) te_->runtime().finished(this);  // one run inline (or never started) was never the runtime's
  // Pins, owners and writer marks are gone: explicit evictions waiting on
  // them may go on.
  te_->wake_deferred();
  // Last: the group completes its await once every member got here.
  if (group) std::exchange(group, nullptr)->terminal(this, st, result_);
}

}  // namespace sw
