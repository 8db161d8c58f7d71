// TiledEvictable: one logical tensor cut into tiles that live in a primary
// (compute) tier or a secondary (storage) tier, move asynchronously, and are
// gathered into compact tensors. See the public header for the contract.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "async/await.hpp"
#include "carriers/tiled/geometry.hpp"
#include "carriers/tiled/policy.hpp"
#include "core/carrier.hpp"

namespace sw {

class TileRequest;

// One tile's entry in the tile table (guarded by the TiledEvictable's mutex).
// A primary buffer is never modified while anyone else holds a reference to
// it: writers put new values in a fresh buffer and swap it in (copy on
// write), so readers and eviction writes of the old buffer see one
// consistent value.
struct Tile {
  Ref<Carrier> primary;          // T slots of the primary kind while primary-resident
  bool secondary_valid = false;  // the secondary tier holds a value of this tile (the current one unless dirty)
  bool implicit = false;         // the value is an implicit zero (when no copy says otherwise)
  bool dirty = false;            // primary value not yet in the secondary tier
  int pins = 0;                  // tiled work that still needs the value
  int secondary_readers = 0;     // blocking reads of the secondary copy in progress
  const void* owner = nullptr;   // an incomplete residency request or update covering the tile
  const void* writer = nullptr;  // the request writing the value to the secondary tier
};

class TiledEvictable final : public Carrier {
 public:
  static Ref<TiledEvictable> create(const Ref<Carrier>& primary, const Ref<Carrier>& secondary,
                                    std::vector<int64_t> grid, std::vector<int64_t> tile,
                                    const sw_residency_policy_t* policy, bool count_allocation = false);
  // A fresh carrier with `like`'s geometry and tier kinds: tiles implicit zero
  // (a gradient) or invalid (a partial scatter result). No policy.
  static Ref<TiledEvictable> fresh_like(const TiledEvictable& like, bool gradient);
  ~TiledEvictable() override;

  const TileGeometry& geometry() const { return geo_; }
  const Ref<Carrier>& primary_carrier() const { return primary_seed_; }
  const Ref<Carrier>& secondary_carrier() const { return secondary_; }
  bool has_policy() const { return static_cast<bool>(policy_); }
  const std::shared_ptr<Policy>& policy() const { return policy_; }
  // A zero-filled or uninitialised tile buffer on the primary kind. Given
  // `read_from`, the tile whose secondary values it will receive, a host
  // buffer starts at the secondary's read phase for that tile, so a direct
  // read lands in place (Carrier::read_phase).
  Ref<Carrier> new_tile_buffer(bool zero, int64_t read_from = -1) const;

  sw_tile_state_t tile_state(const TileCoord& c) const;
  Ref<TileSet> tiles(sw_tile_set_kind_t kind) const;

  // `prefetch`: the same request, its secondary-tier reads queued behind
  // those of work that waits for its values (sw_tiled_prefetch_async).
  Ref<Await> promote_async(const Ref<TileSet>& tiles, bool prefetch = false);
  Ref<Await> evict_async(const Ref<TileSet>& tiles);
  Ref<Await> project(const Ref<Tensor>& full, const Ref<TileSelection>& selection, Ref<Carrier> destination);
  Ref<Await> scatter(const Ref<Tensor>& compact, const Ref<Tensor>& full_template, const Ref<TileSelection>& selection,
                     sw_scatter_reduction_t reduction);
  // Public in-place write of the selected tiles (see sw_tiled_update_async).
  Ref<Await> update(const Ref<Tensor>& full, const Ref<Tensor>& compact, const Ref<TileSelection>& selection,
                    sw_scatter_reduction_t reduction);
  // The expert-indexed matmul (see sw_tiled_expert_matmul; expert_matmul.cpp).
  // `gates` may be null; out_dtype SW_DTYPE_INVALID is the experts' dtype.
  Ref<Await> expert_matmul(const Ref<Tensor>& full, const Ref<Tensor>& x, const Ref<Tensor>& ids,
                           const Ref<Tensor>& gates, sw_dtype_t out_dtype);
  // The whole logical tensor as a dense compute tensor (blocking; no node).
  Ref<Tensor> materialize(const Ref<Tensor>& full, sw_residency_purpose_t purpose);
  // The full tensor with `like`'s offset and layout on this carrier.
  Ref<Tensor> full_tensor_like(const Tensor& like);
  // Checks that `t` is a full tensor over this carrier (TYPE, VALUE "tile footprints").
  void check_full(const Tensor& t, const char* what) const;

  // Gradient building on fresh carriers (blocking).
  void set_tile(int64_t k, Ref<Carrier> values);  // primary, valid, dirty
  bool tile_is_zero(int64_t k) const;             // implicit and not materialised
  void read_tile(int64_t k, std::byte* dst) const;
  // A new primary-kind buffer holding tile k's value (VALUE/STATE as read).
  Ref<Carrier> copy_of_tile(int64_t k) const;
  // A TileRequest ends: the carrier may be disposed once none is pending.
  void request_done();
  // Lets explicit evictions waiting for pins, writers or readers retry (on
  // the loop thread). Call with the tile lock not held.
  void wake_deferred() const;
  // The tile set of tile ordinals.
  Ref<TileSet> tile_set_of(const std::vector<int64_t>& ordinals) const;
  // Writes tile values to the secondary tier (loop thread). Carriers require
  // concurrent writes to be serialised by their caller (a zstd frame holding
  // several tiles is rewritten whole), so writes run one at a time in order.
  void write_secondary(size_t first, size_t count, const std::byte* src, IoDone done);

  // A composite: ops take its full tensor as a whole, and its gradients are
  // TiledEvictables too (tiled_grad.cpp).
  bool is_composite() const override { return true; }
  const Carrier& compute_side() const override { return *primary_seed_; }
  void check_operand(const Tensor& t, const char* op) const override;
  Ref<Tensor> resolve_operand(const Ref<Tensor>& t, sw_residency_purpose_t purpose, const char* op) const override;
  Ref<Tensor> leaf_gradient(const Tensor& leaf, const Ref<Tensor>& g) const override;
  Ref<Tensor> add_gradients(const Ref<Tensor>& a, const Ref<Tensor>& b) const override;

  void read_slots(size_t first, size_t count, void* dst) const override;
  void read_runs(const std::vector<SlotRun>& runs, std::byte* dst) const override;
  size_t read_granule() const override { return static_cast<size_t>(geo_.tile_size); }
  void write_slots(size_t first, size_t count, const void* src) override;
  void write_runs(const std::vector<SlotRun>& runs, const std::byte* src) override;
  // Writes the dirty tiles `ks` (just promoted by a public write) to the
  // secondary tier and drops them again.
  void write_through(const std::vector<int64_t>& ks);

 protected:
  void check_disposable() const override;
  void dispose_storage() override;
  void allocate_storage(size_t, bool) override { value_error("a TiledEvictable cannot be reallocated"); }

 private:
  friend class TileRequest;
  TiledEvictable(Ref<Runtime> rt, sw_dtype_t dtype, TileGeometry geo);
  void ensure_secondary_storage();
  // Validation shared by requests (under mutex_): STATE for conflicts and invalid tiles.
  void check_no_owner(int64_t k, const char* what) const;
  void check_valid(int64_t k, const char* what) const;
  // Residency changes outside planned requests, for the policy's view.
  void report_residency(const std::vector<int64_t>& promoted, const std::vector<int64_t>& evicted) const;
  // Counts a blocking read of tile k's secondary copy (under mutex_ to
  // begin); ends it with the lock not held.
  void end_secondary_read(int64_t k) const;
  std::vector<int64_t> ordinals(const TileSet& set, const char* what) const;

  // One tile's value, in steps: where it is read from, loaded from the
  // secondary tier, cloned or copied into a new buffer, patched by a write.
  struct TileSource {
    Ref<Carrier> primary;  // its primary buffer (held: a writer swaps in a new one, never changes it)
    bool stored = false;   // else its secondary copy (counted as read), else its implicit zero
  };
  // Where tile k's value is (VALUE/STATE as `what` reads an invalid tile);
  // a secondary copy is counted as being read until a SecondaryRead ends it.
  TileSource source_locked(int64_t k, const char* what) const;
  struct SecondaryRead {
    const TiledEvictable* te;
    std::vector<int64_t> ks;
    ~SecondaryRead() {
      for (int64_t k : ks) te->end_secondary_read(k);
    }
  };
  void read_secondary(int64_t k, std::byte* dst) const;
  // A new buffer holding tile k's value off the primary tier: its secondary
  // copy (`stored`, blocking read) or its implicit zero.
  Ref<Carrier> load_tile(int64_t k, bool stored) const;
  // One tile's slots copied into `to` on the primary tier's backend.
  void copy_tile(const Tensor& from, const Ref<Carrier>& to) const;
  // A new buffer holding a copy of the tile buffer `buffer`.
  Ref<Carrier> clone_tile(const Ref<Carrier>& buffer) const;
  // Copies the values of `runs`, from `src`, into the tiles' buffers `target`.
  void fill_tiles(const std::vector<SlotRun>& runs, const std::byte* src,
                  std::unordered_map<int64_t, Ref<Carrier>>& target) const;
  // A public write's refusals (STATE), with the tile lock held.
  void check_writable_locked(const std::vector<int64_t>& touched) const;
  // Checks the touched tiles and loads those off the primary tier.
  std::unordered_map<int64_t, Ref<Carrier>> load_off_primary(const std::vector<int64_t>& touched) const;

  TileGeometry geo_;
  Ref<Carrier> primary_seed_;  // kept (claimed) for its kind; storage released at creation
  Ref<Carrier> secondary_;
  std::shared_ptr<Policy> policy_;
  mutable std::mutex mutex_;
  mutable std::vector<Tile> tiles_;
  int pending_ = 0;  // non-terminal requests involving this carrier
  mutable std::vector<std::weak_ptr<TileRequest>> deferred_;  // explicit evictions waiting for pins, writers, readers
  struct SecondaryWrite {
    size_t first, count;
    const std::byte* src;
    IoDone done;
  };
  void start_next_write();
  std::deque<SecondaryWrite> writes_;  // loop thread only
  bool writing_ = false;
};

}  // namespace sw
