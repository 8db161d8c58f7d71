// One asynchronous request on a TiledEvictable: fetch the tiles it needs
// (from primary, the secondary tier or implicit zeros), run its work on a
// worker, commit promotions, then carry out evictions. Pins keep required
// tiles resident from submission to the end of the work; residency requests
// also own their tiles so that overlapping requests are refused.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "async/await.hpp"
#include "carriers/tiled/tiled_carrier.hpp"

namespace sw {

class TileRequest final : public Operation {
 public:
  TileRequest(Ref<TiledEvictable> te, Ref<Await> await) : te_(std::move(te)), await_(std::move(await)) {}

  // Configuration, set before submit().
  std::vector<int64_t> reads;     // tiles whose values `work` needs, in its order
  std::vector<int64_t> promotes;  // tiles made primary at commit
  std::vector<int64_t> evicts;    // tiles evicted once the work is done
  bool residency = false;         // an explicit promote/evict: owns its tiles, evictions wait for pins
  bool exclusive = false;         // writes its tiles in place: owns them and refuses pinned ones
  // Runs on a worker with tiles[i] holding tile reads[i]: a primary-kind
  // buffer of T slots (host or device memory).
  std::function<void(const std::vector<Ref<Carrier>>& tiles)> work;
  // Runs on the loop thread after the commit; its object is the await's result.
  std::function<Ref<Object>()> publish;
  // Runs on the loop thread at the terminal state.
  std::function<void(bool succeeded)> cleanup;

  // Validates against the tile table (conflicts, invalid tiles), pins and
  // owns the tiles, then hands the request to the loop. Throws with nothing
  // changed on a conflict.
  void submit();

  void start() override;
  void cancel() override;
  // Retries evictions deferred by pins (loop thread).
  void retry_deferred();

 private:
  void fetch_done();
  void run_work();
  void commit();
  // Runs `job` on a worker, then `next` on the loop thread unless the job
  // failed or the runtime shut down meanwhile (the request then finishes).
  void on_worker(std::function<void()> job, void (TileRequest::*next)());
  void upload_staged();
  void evict_phase();
  void write_evictions();
  void commit_evictions();
  void finish(Status st);
  void unpin();
  std::shared_ptr<TileRequest> self() { return std::static_pointer_cast<TileRequest>(shared_from_this()); }

  Ref<TiledEvictable> te_;
  Ref<Await> await_;
  std::vector<int64_t> pinned_;             // reads and promotes, unique
  std::vector<Ref<Carrier>> fetched_;       // per pinned_ entry: a new buffer, or null when primary
  std::vector<Ref<Carrier>> values_;        // per pinned_ entry: the buffer holding its value
  // Host copies of secondary-tier reads whose buffer is device memory (per
  // pinned_ entry; empty otherwise), uploaded on the worker before `work`;
  // then of evicted dirty tiles' values, downloaded before the writes.
  std::vector<std::vector<std::byte>> staged_;
  std::vector<std::pair<int64_t, Ref<Carrier>>> evict_writes_;  // (tile, buffer) of dirty evictions
  std::vector<int64_t> written_;            // evictions whose dirty values were written
  std::vector<int64_t> deferred_;           // evictions waiting for pins
  int in_flight_ = 0;
  Status error_;
  bool cancelled_ = false, unpinned_ = false, finished_ = false;
  Ref<Object> result_;
};

}  // namespace sw
