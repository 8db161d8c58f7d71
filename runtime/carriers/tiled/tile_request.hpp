// One asynchronous request on a TiledEvictable. It commits as a whole or not
// at all:
//  1. start: fetch the tiles it reads that are not primary (from the
//     secondary tier or implicit zeros) and, at the same time, write the
//     dirty values of the tiles its plan evicts to the secondary tier;
//  2. once fetched, run its work on a worker (into fresh buffers for the
//     tiles it writes: copy on write, so that readers and eviction writes of
//     the old buffer are never raced);
//  3. when every fetch, write and the work succeeded, commit everything in
//     one step under the tile table's lock: written tiles become clean
//     (unless their buffer changed meanwhile), new buffers and promotions
//     are installed, and planned evictions drop tiles no work needs.
// A failure anywhere commits nothing. Pins keep read tiles resident from
// submission to the commit; residency requests and writers also own their
// tiles, so overlapping requests are refused. Explicit evictions (residency
// requests) write first and drop each tile once no work needs it.
//
// A request that asks for it (run_inline) and finds, at submission, nothing
// to move (every tile it pins primary, nothing to evict or write, not a
// residency request) skips the hand-offs: submit() runs steps 2 and 3 on the
// calling thread, with the same pins, the same commit and the same report,
// and the await is terminal when it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "async/await.hpp"
#include "carriers/tiled/commit_group.hpp"
#include "carriers/tiled/tiled_carrier.hpp"

namespace sw {

class TileRequest final : public Operation {
 public:
  TileRequest(Ref<TiledEvictable> te, Ref<Await> await) : te_(std::move(te)), await_(std::move(await)) {}
  // A request dropped before it was submitted reports its plan as failed.
  ~TileRequest() override;

  // Configuration, set before submit().
  std::vector<int64_t> reads;     // tiles whose values `work` reads, in its order
  std::vector<int64_t> promotes;  // tiles made primary at commit
  std::vector<int64_t> evicts;    // tiles evicted once no work needs them
  std::vector<int64_t> writes;    // tiles `work` gives new values, in its order (owned)
  bool residency = false;         // an explicit promote/evict: owns its tiles
                                  // (an explicit evict also its evictions, which wait for pins)
  bool prefetch = false;          // its reads yield to demand transfers (IoPriority::kPrefetch)
  Ref<ResidencyPlan> plan;        // the policy's plan; its outcome is reported at the end
  // Runs on a worker (the calling thread, see run_inline) with tiles[i]
  // holding tile reads[i] and outs[j] a fresh buffer (T slots of the
  // primary kind) for tile writes[j] to fill.
  std::function<void(const std::vector<Ref<Carrier>>& tiles, const std::vector<Ref<Carrier>>& outs)> work;
  // Optional: runs on a worker (the calling thread, see run_inline) on
  // entries of `reads` (read index, tile value) as soon as their values
  // are available, each entry once: in one call for the tiles primary at
  // the start, in one call per fetch as the others land, so that work on
  // resident tiles overlaps the transfers of missing ones and the resident
  // ones' work can run as one job. Calls may overlap one another; `work`
  // runs after the last has returned. An error fails the request.
  std::function<void(const std::vector<std::pair<size_t, Ref<Carrier>>>& entries)> tile_work;
  // Runs on the loop thread (the calling thread, see run_inline) just
  // before the commit; its object is the await's result. A failure here
  // fails the request with nothing committed.
  std::function<Ref<Object>()> publish;
  // Runs on the loop thread (the calling thread, see run_inline) at the
  // terminal state, with the request's status (ok when it committed).
  std::function<void(const Status& status)> cleanup;
  // No movement, run inline: when at submission every tile the request pins
  // is primary and it moves nothing (no fetch, no eviction, no tile it
  // writes, not a residency request), submit() runs it on the calling
  // thread: tile_work on every entry of `reads` in order, then `work`
  // (kernels use the compute pool, the caller included), `publish`, the
  // commit, `cleanup` and the await's completion, all before it returns.
  // The pins hold until the commit as on the loop's path (an eviction of
  // its tiles waits for them, a release or an update is refused), and a
  // failure fails the await, never submit(). The policy's plan was made
  // before submission as always; its outcome is reported on the calling
  // thread. A request that must move tiles goes to the loop as usual.
  bool run_inline = false;

  // The group of requests this one commits with (commit_group.hpp), or
  // null: set before submit(). A member that does not run inline waits for
  // the group's launch() to start.
  std::shared_ptr<CommitGroup> group;
  // For a member of an open group: completed with the published result as
  // soon as the work is done (the commit comes later), or with the failure.
  Ref<Await> published;

  // Validates against the tile table (conflicts, invalid tiles), pins and
  // owns the tiles, then hands the request to the loop (or runs it here,
  // see run_inline). Throws with nothing changed on a conflict.
  void submit();
  // What submit() refuses (STATE: a tile covered by another incomplete
  // residency request or update, an invalid tile, ...), checked without
  // submitting: an operation made of several requests checks each of them
  // before it submits any, so a refusal leaves nothing started.
  void check() const;

  // An explicit eviction (sw_tiled_evict): owns the tiles it evicts and
  // drops each once no work needs it. The evictions an explicit promotion's
  // plan asks for are planned evictions, as any request's.
  bool explicit_eviction() const { return residency && promotes.empty() && !evicts.empty(); }

  void start() override;
  // The tile work on the tiles primary at the start, held back by start().
  void started() override;
  void cancel() override;
  // Retries an explicit eviction waiting for other work (loop thread).
  void retry();

 // The request's lifecycle. Each state says what the request waits for;
  // the transitions allowed between them are legal_transition()'s, and to()
  // is the one place the state changes (it aborts on an illegal one in debug
  // builds). What is not a state: cancelled_ (a shutdown asked for, seen at
  // the next step), on_loop_ (who runs it, fixed at the hand-off) and
  // reported_ (the plan's outcome, reported once).
  enum class State : uint8_t {
    kConfigured,  // built; not submitted (or refused)
    kDeferred,    // pins taken; a closed group's member waiting for its launch()
    kQueued,      // handed to the loop; start() not run yet
    kInline,      // running on the calling thread (run_inline, nothing to move)
    kMoving,      // started: fetches, eviction writes and tile work in flight
    kWorking,     // every fetch settled: `work` (and uploads) in flight, or skipped after a failure
    kEvicting,    // an explicit eviction: its writes in flight, or its tiles being dropped
    kParked,      // an explicit eviction waiting in te_->deferred_ for pins, writers or readers
    kReady,       // its work is done: waits for its group's commit (or commits now)
    kPublished,   // its `publish` ran (or it has none): the commit follows
    kReleased,    // pins, owners and writer marks released: the report and the end follow
    kFinished,    // terminal: the await completed
  };
  static constexpr bool legal_transition(State from, State to) {
    using S = State;
    switch (from) {
      case S::kConfigured: return to == S::kInline || to == S::kDeferred || to == S::kQueued;
      case S::kDeferred: return to == S::kQueued;
      // A refused hand-off or a failure at start() releases at once.
      case S::kQueued: return to == S::kMoving || to == S::kEvicting || to == S::kReleased;
      case S::kInline: return to == S::kReady || to == S::kReleased;
      case S::kMoving: return to == S::kWorking || to == S::kReleased;
      case S::kWorking: return to == S::kReady || to == S::kReleased;
      case S::kEvicting: return to == S::kParked || to == S::kReleased;
      case S::kParked: return to == S::kEvicting || to == S::kReleased;
      case S::kReady: return to == S::kPublished || to == S::kReleased;
      case S::kPublished: return to == S::kReleased;
      case S::kReleased: return to == S::kFinished;
      case S::kFinished: return false;
    }
    return false;
  }
  static const char* state_name(State s);

 private:
  friend class CommitGroup;
  friend Ref<Await> join_step(TileRequest& req);
  // One tile the request pins (an entry of reads and promotes).
  struct Entry {
    int64_t tile;
    Ref<Carrier> fetched;  // a new buffer (a secondary-tier read, an implicit zero), or null when primary
    Ref<Carrier> value;    // the buffer holding its value
    // The host copy of a secondary-tier read whose buffer is device memory
    // (empty otherwise), uploaded on the worker before `work`.
    std::vector<std::byte> staged;
  };
  struct Capture {
    int64_t tile;
    Ref<Carrier> buffer;           // the primary buffer whose value is written
    std::vector<std::byte> staged;  // its host copy when the buffer is device memory
  };

  void to(State next);
  // reads and promotes, sorted and unique.
  std::vector<int64_t> pinned_tiles() const;
  // The entry of tile k (one of reads and promotes), and whether k is one.
  size_t entry_of(int64_t k) const;
  bool pins_tile(int64_t k) const;
  // submit()'s refusals (tile lock held).
  void validate_locked(const std::vector<int64_t>& pinned) const;
  // Capturing dirty tiles for their eviction writes, under the tile lock.
  bool capturable(int64_t k, bool pinned_by_me) const;
  void capture_locked(int64_t k);
  // Issues the writes of captures_ (downloading device buffers first).
  void write_captures();
  // The work on the calling thread (run_inline with nothing to move).
  void run_here();
  // Where a test's fault or hold of tiled work (FaultKind::kTileWork) catches
  // one compute job of the request, before it starts.
  void work_point();
  void fetch_done();
  // fetches_ reached 0: `work` runs (or never, after a failure).
  void fetches_settled();
  // ops_ reached 0: the commit (the group's, for a member) or the failure.
  void ops_settled();
  // Hands tile_work the read entries of entries_[i]s (a worker job, counted
  // as a fetch so that `work` waits for it).
  void run_tile_work(std::vector<size_t> entries);
  void run_work();
  void op_done();
  // Runs `publish` once (a failure is returned, not raised).
  Status publish_result();
  void commit();
  // Fails the request with `st` (its group failed): at once when nothing
  // of it is in flight, else once what it issued has settled, or at its
  // start. Nothing once it is terminal.
  void abort(Status st);
  // Explicit eviction: write phase, then drops as tiles stop being busy.
  void start_eviction();
  void drop_evictions();
  void fail(Status st);
  void finish(Status st);
  void report(bool committed, const std::vector<int64_t>& promoted, const std::vector<int64_t>& evicted);
  // Writer marks, owners and pins (tile lock held), once: to kReleased.
  void release_locked();
  std::shared_ptr<TileRequest> self() { return std::static_pointer_cast<TileRequest>(shared_from_this()); }

  Ref<TiledEvictable> te_;
  Ref<Await> await_;
  State state_ = State::kConfigured;
  std::vector<Entry> entries_;              // reads and promotes, by tile, unique
  std::vector<Ref<Carrier>> outs_;          // per writes entry: the fresh buffer `work` fills
  std::vector<Capture> captures_;           // dirty tiles this request writes to the secondary tier
  std::vector<int64_t> remaining_;          // explicit evictions not yet dropped
  std::vector<size_t> resident_;            // entries primary at the start, for started(),
                                            // which start() holds a read and an op for
  int ops_ = 0;                             // outstanding reads, writes and worker jobs (+1 while issuing)
  int fetches_ = 0;                         // outstanding reads (+1 while issuing)
  Status error_;
  bool cancelled_ = false;                  // the runtime shuts down: fails at its next step
  bool on_loop_ = false;                    // handed to the runtime (which is told when it is terminal)
  bool reported_ = false;                   // the plan's outcome was reported
  Ref<Object> result_;
};

}  // namespace sw
