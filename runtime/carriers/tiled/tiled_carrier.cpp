#include "carriers/tiled/tiled_carrier.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <unordered_map>

#include "async/loop.hpp"
#include "autograd/node.hpp"
#include "base/error.hpp"
#include "carriers/host/memory_carrier.hpp"
#include "carriers/tiled/tile_request.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw {

namespace {

std::string coord_str(const TileCoord& c) {
  std::string s = "(";
  for (size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + (c.size() == 1 ? ",)" : ")");
}

bool is_storage_kind(sw_carrier_kind_t k) {
  return k == SW_CARRIER_HOST || k == SW_CARRIER_FILE || k == SW_CARRIER_ZSTD || k == SW_CARRIER_REMOTE;
}

}  // namespace

TiledEvictable::TiledEvictable(Ref<Runtime> rt, sw_dtype_t dtype, TileGeometry geo)
    : Carrier(std::move(rt), SW_CARRIER_TILED, dtype, static_cast<size_t>(geo.size())), geo_(std::move(geo)) {
  tiles_.resize(static_cast<size_t>(geo_.tiles));
}

TiledEvictable::~TiledEvictable() {
  // Tier carriers are owned: end the claims so they can be destroyed.
  for (Carrier* c : {primary_seed_.get(), secondary_.get()})
    if (c && c->is_owned()) c->unclaim();
}

Ref<TiledEvictable> TiledEvictable::create(const Ref<Carrier>& primary, const Ref<Carrier>& secondary,
                                           std::vector<int64_t> grid, std::vector<int64_t> tile,
                                           const sw_residency_policy_t* policy, bool count_allocation) {
  if (!primary->is_compute())
    type_error(std::string("TiledEvictable: the primary tier must be a compute carrier, not ") + primary->kind_name());
  if (!is_storage_kind(secondary->kind()))
    type_error(std::string("TiledEvictable: the secondary tier must be a host, file, zstd or remote carrier, not ") +
               secondary->kind_name());
  if (primary->dtype() != secondary->dtype())
    type_error(std::string("TiledEvictable: tier dtypes differ (") + dtype_name(primary->dtype()) + " and " +
               dtype_name(secondary->dtype()) + ")");
  if (&primary->runtime() != &secondary->runtime()) value_error("TiledEvictable: the tiers belong to different runtimes");
  if (grid.empty()) value_error("TiledEvictable: the grid needs at least one mode");
  for (size_t i = 0; i < grid.size(); ++i) {
    if (grid[i] < 1) value_error("TiledEvictable: grid extent " + std::to_string(grid[i]) + " on mode " + std::to_string(i) + " is < 1");
    if (tile[i] < 1) value_error("TiledEvictable: tile extent " + std::to_string(tile[i]) + " on mode " + std::to_string(i) + " is < 1");
  }
  if (grid.size() > SW_MAX_RANK) value_error("TiledEvictable: rank exceeds SW_MAX_RANK");
  const int64_t block = dtype_block_elements(primary->dtype());
  if (block > 1 && tile[0] % block)
    value_error("TiledEvictable: a tile holds whole " + std::string(dtype_name(primary->dtype())) +
                " blocks, but its first extent " + std::to_string(tile[0]) + " is not a multiple of the block's " +
                std::to_string(block) + " elements");
  TileGeometry geo(grid, tile);
  const size_t n = static_cast<size_t>(geo.size());
  for (const Ref<Carrier>* c : {&primary, &secondary}) {
    if ((*c)->size() != 0 && (*c)->size() != n)
      value_error(std::string("TiledEvictable: the ") + (c == &primary ? "primary" : "secondary") + " tier holds " +
                  std::to_string((*c)->size()) + " slots; it must be empty or hold the full extent of " +
                  std::to_string(n));
  }
  primary->check_mutable("TiledEvictable (primary tier)");
  if (secondary->is_read_only())
    secondary->check_live("TiledEvictable (secondary tier)");
  else
    secondary->check_mutable("TiledEvictable (secondary tier)");
  if (secondary->is_owned()) state_error("TiledEvictable (secondary tier): the carrier is already owned");
  if (policy && !policy->plan) type_error("TiledEvictable: the residency policy has no plan function");
  if (primary.get() == secondary.get()) value_error("TiledEvictable: the tiers must be different carriers");
  if (count_allocation) primary->runtime().check_fault(FaultKind::kAllocation, "TiledEvictable");

  Ref<TiledEvictable> te = Ref<TiledEvictable>::adopt(new TiledEvictable(primary->runtime_ref(), primary->dtype(), geo));
  primary->claim("a TiledEvictable", true);
  try {
    secondary->claim("a TiledEvictable");
  } catch (...) {
    primary->unclaim();
    throw;
  }
  te->primary_seed_ = primary;
  te->secondary_ = secondary;
  const bool full_primary = primary->size() == n, full_secondary = secondary->size() == n;
  // A full primary seed is cut into tile buffers by copies on its backend.
  Ref<Tensor> seed = full_primary ? Tensor::create(primary, 0, Layout::dense({geo.size()})) : nullptr;
  auto in_tile = Layout::dense({geo.tile_size});
  for (int64_t k = 0; k < geo.tiles; ++k) {
    Tile& t = te->tiles_[static_cast<size_t>(k)];
    t.secondary_valid = full_secondary;
    if (full_primary) {
      t.primary = te->new_tile_buffer(false);
      te->copy_tile(*seed->view(k * geo.tile_size, in_tile), t.primary);
      // Dirty either way: the secondary tier holds no copy, or a seed that
      // may hold other values.
      t.dirty = true;
    }
  }
  // The policy is taken last: after a failure above (a tile buffer) it is
  // still the caller's, and its destroy must not run.
  // Its attach() comes first: an error there fails the creation with the
  // policy still the caller's.
  if (policy) Policy::attach(*policy, *te);
  std::shared_ptr<Policy> taken = policy ? std::make_shared<Policy>(*policy) : nullptr;
  // Its values now live in the per-tile buffers. The seed stays claimed (a
  // disposed carrier cannot be claimed) and keeps its size; its storage goes.
  if (full_primary) primary->drop_tier_storage();
  te->policy_ = std::move(taken);
  if (full_primary) {
    std::vector<int64_t> all(static_cast<size_t>(geo.tiles));
    for (int64_t k = 0; k < geo.tiles; ++k) all[static_cast<size_t>(k)] = k;
    te->report_residency(all, {});
  }
  return te;
}

Ref<TiledEvictable> TiledEvictable::fresh_like(const TiledEvictable& like, bool gradient) {
  Ref<Carrier> primary = like.primary_seed_->create_empty_like();
  Ref<Carrier> secondary;
  try {
    secondary = like.secondary_->create_empty_like();
  } catch (const Error&) {
    secondary = make_ref<HostCarrier>(like.runtime_ref(), like.dtype(), 0);
  }
  auto te = create(primary, secondary, like.geo_.grid, like.geo_.tile, nullptr);
  if (gradient)
    for (Tile& t : te->tiles_) t.implicit = true;
  return te;
}

Ref<Carrier> TiledEvictable::new_tile_buffer(bool zero, int64_t read_from) const {
  runtime().check_fault(FaultKind::kAllocation, "tile buffer");
  ComputeBackend& be = backend_for(*primary_seed_);
  if (read_from >= 0 && !zero) {
    const size_t phase = secondary_->read_phase(static_cast<size_t>(read_from * geo_.tile_size));
    // Only at a remainder that keeps every element aligned to its size (a
    // quantized dtype's blocks need no alignment).
    if (phase && (dtype_is_quantized(dtype()) || phase % dtype_size(dtype()) == 0))
      return be.read_target(runtime_ref(), dtype(), static_cast<size_t>(geo_.tile_size), phase);
  }
  auto t = zero ? be.zeros(runtime_ref(), dtype(), {geo_.tile_size}) : be.empty(runtime_ref(), dtype(), {geo_.tile_size});
  return t->carrier_ref();
}

void TiledEvictable::ensure_secondary_storage() {
  if (secondary_->size() == 0) secondary_->allocate(static_cast<size_t>(geo_.size()));
}

sw_tile_state_t TiledEvictable::tile_state(const TileCoord& c) const {
  check_live("tile_state");
  auto set = make_ref<TileSet>(std::vector<TileCoord>{c}, c.size());
  set->check_grid(geo_.grid, "tile_state");
  std::lock_guard<std::mutex> lock(mutex_);
  const Tile& t = tiles_[static_cast<size_t>(geo_.ordinal(c))];
  sw_tile_state_t s{};
  s.struct_size = sizeof s;
  s.location = t.primary ? SW_TILE_PRIMARY : t.secondary_valid ? SW_TILE_SECONDARY : t.implicit ? SW_TILE_IMPLICIT : SW_TILE_INVALID;
  s.valid = s.location != SW_TILE_INVALID;
  s.dirty = t.primary && t.dirty;
  return s;
}

Ref<TileSet> TiledEvictable::tiles(sw_tile_set_kind_t kind) const {
  check_live("tiles");
  std::vector<TileCoord> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t k = 0; k < geo_.tiles; ++k) {
    const Tile& t = tiles_[static_cast<size_t>(k)];
    bool in = false;
    switch (kind) {
      case SW_TILES_PRIMARY: in = static_cast<bool>(t.primary); break;
      case SW_TILES_SECONDARY: in = !t.primary && t.secondary_valid; break;
      case SW_TILES_VALID: in = t.primary || t.secondary_valid || t.implicit; break;
      case SW_TILES_DIRTY: in = t.primary && t.dirty; break;
      default: value_error("tiles: unknown tile set kind " + std::to_string(static_cast<int>(kind)));
    }
    if (in) out.push_back(geo_.coord(k));
  }
  return make_ref<TileSet>(std::move(out), geo_.rank());
}

void TiledEvictable::check_no_owner(int64_t k, const char* what) const {
  if (tiles_[static_cast<size_t>(k)].owner)
    state_error(std::string(what) + ": tile " + coord_str(geo_.coord(k)) +
                " is covered by another incomplete residency request or update; wait for it first");
}

void TiledEvictable::check_valid(int64_t k, const char* what) const {
  const Tile& t = tiles_[static_cast<size_t>(k)];
  if (!t.primary && !t.secondary_valid && !t.implicit)
    state_error(std::string(what) + ": tile " + coord_str(geo_.coord(k)) +
                " is invalid: it holds no value until a scatter initialises it");
}

std::vector<int64_t> TiledEvictable::ordinals(const TileSet& set, const char* what) const {
  set.check_grid(geo_.grid, what);
  std::vector<int64_t> out;
  for (const TileCoord& c : set.coords()) out.push_back(geo_.ordinal(c));
  return out;
}

void TiledEvictable::check_full(const Tensor& t, const char* what) const {
  if (&t.carrier() != this)
    type_error(std::string(what) + ": the tensor is backed by a " + t.carrier().kind_name() +
               " carrier, not by this TiledEvictable");
  check_footprints(geo_, t);
}

Ref<Tensor> TiledEvictable::full_tensor_like(const Tensor& like) {
  return Tensor::create(Ref<Carrier>(this), like.offset(), like.layout_ref());
}

void TiledEvictable::check_disposable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_ > 0)
    state_error("release: " + std::to_string(pending_) +
                " request(s) involving this TiledEvictable are not terminal; wait for them first");
}

void TiledEvictable::dispose_storage() {
  std::vector<Tile> drop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop.swap(tiles_);
  }
  for (Carrier* c : {primary_seed_.get(), secondary_.get()}) {
    if (c->is_owned()) c->unclaim();
    c->dispose();
  }
}

void TiledEvictable::request_done() {
  std::lock_guard<std::mutex> lock(mutex_);
  --pending_;
}

void TiledEvictable::wake_deferred() const {
  std::vector<std::shared_ptr<TileRequest>> retry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : deferred_)
      if (auto r = w.lock()) retry.push_back(std::move(r));
    deferred_.clear();
  }
  if (retry.empty()) return;
  runtime().on_loop([retry] {
    for (const auto& r : retry) r->retry();
  });
}

Ref<TileSet> TiledEvictable::tile_set_of(const std::vector<int64_t>& ordinals) const {
  std::vector<TileCoord> coords;
  coords.reserve(ordinals.size());
  for (int64_t k : ordinals) coords.push_back(geo_.coord(k));
  return make_ref<TileSet>(std::move(coords), geo_.rank());
}

void TiledEvictable::report_residency(const std::vector<int64_t>& promoted, const std::vector<int64_t>& evicted) const {
  if (!policy_ || (promoted.empty() && evicted.empty())) return;
  policy_->outcome(nullptr, true, tile_set_of(promoted), tile_set_of(evicted));
}

void TiledEvictable::end_secondary_read(int64_t k) const {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = --tiles_[static_cast<size_t>(k)].secondary_readers == 0;
  }
  if (last) wake_deferred();
}

void TiledEvictable::write_secondary(size_t first, size_t count, const std::byte* src, IoDone done) {
  writes_.push_back({first, count, src, std::move(done)});
  if (!writing_) start_next_write();
}

void TiledEvictable::start_next_write() {
  if (writes_.empty()) return;
  SecondaryWrite w = std::move(writes_.front());
  writes_.pop_front();
  writing_ = true;
  Ref<TiledEvictable> self(this);
  IoDone done = std::move(w.done);
  secondary_->write_async(w.first, w.count, w.src, [self, done](Status st) {
    // Start the next write before `done`, which may queue more.
    self->writing_ = false;
    self->start_next_write();
    done(std::move(st));
  });
}

// ---- blocking tile access -------------------------------------------------------

bool TiledEvictable::tile_is_zero(int64_t k) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Tile& t = tiles_[static_cast<size_t>(k)];
  return !t.primary && !t.secondary_valid && t.implicit;
}

// ---- one tile's value, in steps ------------------------------------------------------

TiledEvictable::TileSource TiledEvictable::source_locked(int64_t k, const char* what) const {
  check_valid(k, what);
  Tile& t = tiles_[static_cast<size_t>(k)];
  TileSource s{t.primary, !t.primary && t.secondary_valid};
  // No eviction writes this tile's secondary copy while it is being read.
  if (s.stored) ++t.secondary_readers;
  return s;
}

void TiledEvictable::read_secondary(int64_t k, std::byte* dst) const {
  const size_t T = static_cast<size_t>(geo_.tile_size);
  secondary_->read_slots(static_cast<size_t>(k) * T, T, dst);
}

Ref<Carrier> TiledEvictable::load_tile(int64_t k, bool stored) const {
  if (!stored) return new_tile_buffer(true);  // its implicit zero
  Ref<Carrier> buf = new_tile_buffer(false, k);
  if (buf->host_data()) {
    read_secondary(k, buf->host_data());
  } else {
    const size_t T = static_cast<size_t>(geo_.tile_size);
    std::vector<std::byte> staged(bytes_of(T));
    read_secondary(k, staged.data());
    buf->write_slots(0, T, staged.data());
  }
  return buf;
}

void TiledEvictable::copy_tile(const Tensor& from, const Ref<Carrier>& to) const {
  backend_for(*to).unary(UnaryOp::kCopy, from, 0.0, *Tensor::create(to, 0, Layout::dense({geo_.tile_size})));
}

Ref<Carrier> TiledEvictable::clone_tile(const Ref<Carrier>& buffer) const {
  Ref<Carrier> fresh = new_tile_buffer(false);
  copy_tile(*Tensor::create(buffer, 0, Layout::dense({geo_.tile_size})), fresh);
  return fresh;
}

void TiledEvictable::fill_tiles(const std::vector<SlotRun>& runs, const std::byte* src,
                                std::unordered_map<int64_t, Ref<Carrier>>& target) const {
  const size_t T = static_cast<size_t>(geo_.tile_size);
  // Device tiles are patched in host copies and written back whole, once
  // every copy was read.
  std::unordered_map<int64_t, std::vector<std::byte>> staged;
  for (auto& [k, buf] : target) {
    if (buf->host_data()) continue;
    auto& v = staged[k];
    v.resize(bytes_of(T));
    buf->read_slots(0, T, v.data());
  }
  for (const SlotRun& r : runs) {
    geo_.for_each_piece(static_cast<int64_t>(r.first), static_cast<int64_t>(r.count),
                        [&](int64_t k, int64_t w, int64_t, int64_t n) {
                          auto it = staged.find(k);
                          std::byte* base = it == staged.end() ? target[k]->host_data() : it->second.data();
                          std::memcpy(base + bytes_of(static_cast<size_t>(w)), src,
                                      bytes_of(static_cast<size_t>(n)));
                          src += bytes_of(static_cast<size_t>(n));
                        });
  }
  for (auto& [k, v] : staged) target[k]->write_slots(0, T, v.data());
}

void TiledEvictable::read_tile(int64_t k, std::byte* dst) const {
  TileSource s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = source_locked(k, "read");
  }
  const SecondaryRead end{this, s.stored ? std::vector<int64_t>{k} : std::vector<int64_t>{}};
  if (s.primary)
    s.primary->read_slots(0, static_cast<size_t>(geo_.tile_size), dst);
  else if (s.stored)
    read_secondary(k, dst);
  else
    std::memset(dst, 0, bytes_of(static_cast<size_t>(geo_.tile_size)));
}

Ref<Carrier> TiledEvictable::copy_of_tile(int64_t k) const {
  TileSource s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = source_locked(k, "read");
  }
  const SecondaryRead end{this, s.stored ? std::vector<int64_t>{k} : std::vector<int64_t>{}};
  return s.primary ? clone_tile(s.primary) : load_tile(k, s.stored);
}

void TiledEvictable::set_tile(int64_t k, Ref<Carrier> values) {
  std::lock_guard<std::mutex> lock(mutex_);
  Tile& t = tiles_[static_cast<size_t>(k)];
  t.primary = std::move(values);
  t.dirty = true;
  t.implicit = false;
}

void TiledEvictable::read_slots(size_t first, size_t count, void* dst) const {
  read_runs({SlotRun{first, count}}, static_cast<std::byte*>(dst));
}

void TiledEvictable::read_runs(const std::vector<SlotRun>& runs, std::byte* dst) const {
  // Canonical slots may interleave tiles: read each touched tile once, from
  // wherever it lives (one value per tile, however often the runs touch it);
  // a piece that is a whole tile is read in place.
  std::unordered_map<int64_t, const std::byte*> values;
  std::deque<std::vector<std::byte>> copies;
  std::byte* out = dst;
  for (const SlotRun& r : runs) {
    geo_.for_each_piece(static_cast<int64_t>(r.first), static_cast<int64_t>(r.count),
                        [&](int64_t k, int64_t w, int64_t done, int64_t n) {
                          std::byte* to = out + bytes_of(static_cast<size_t>(done));
                          auto it = values.find(k);
                          if (it == values.end()) {
                            if (w == 0 && n == geo_.tile_size) {
                              read_tile(k, to);
                              values.emplace(k, to);
                              return;
                            }
                            copies.emplace_back(bytes_of(static_cast<size_t>(geo_.tile_size)));
                            read_tile(k, copies.back().data());
                            it = values.emplace(k, copies.back().data()).first;
                          }
                          std::memcpy(to, it->second + bytes_of(static_cast<size_t>(w)),
                                      bytes_of(static_cast<size_t>(n)));
                        });
    out += bytes_of(r.count);
  }
}

void TiledEvictable::write_slots(size_t first, size_t count, const void* src) {
  write_runs({SlotRun{first, count}}, static_cast<const std::byte*>(src));
}

void TiledEvictable::check_writable_locked(const std::vector<int64_t>& touched) const {
  for (int64_t k : touched) {
    check_no_owner(k, "write");
    check_valid(k, "write");
    if (tiles_[static_cast<size_t>(k)].pins)
      state_error("write: tile " + coord_str(geo_.coord(k)) + " is in use by pending tiled work; wait for it first");
  }
}

std::unordered_map<int64_t, Ref<Carrier>> TiledEvictable::load_off_primary(const std::vector<int64_t>& touched) const {
  std::vector<int64_t> off, stored;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check_writable_locked(touched);
    for (int64_t k : touched) {
      if (tiles_[static_cast<size_t>(k)].primary) continue;
      off.push_back(k);
      if (source_locked(k, "write").stored) stored.push_back(k);
    }
  }
  const SecondaryRead end{this, stored};
  std::unordered_map<int64_t, Ref<Carrier>> loaded;
  for (int64_t k : off) loaded[k] = load_tile(k, std::find(stored.begin(), stored.end(), k) != stored.end());
  return loaded;
}

void TiledEvictable::write_runs(const std::vector<SlotRun>& runs, const std::byte* src) {
  std::set<int64_t> touched_set;
  for (const SlotRun& r : runs)
    geo_.for_each_piece(static_cast<int64_t>(r.first), static_cast<int64_t>(r.count),
                        [&](int64_t k, int64_t, int64_t, int64_t) { touched_set.insert(k); });
  const std::vector<int64_t> touched(touched_set.begin(), touched_set.end());
  // Every touched tile is checked first, and again when the write lands: a
  // refused write changes nothing. A tile evicted between the two checks
  // needs a copy loaded afresh: retry.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::unordered_map<int64_t, Ref<Carrier>> loaded = load_off_primary(touched);
    std::vector<int64_t> promoted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      check_writable_locked(touched);
      // Where each tile's new value goes: its loaded copy when it is still
      // off the primary tier; its own buffer when nobody else holds it;
      // else a clone of it (a reader or an eviction write holds the old
      // one, which must not change under them).
      std::unordered_map<int64_t, Ref<Carrier>> target;
      bool stale = false;
      for (int64_t k : touched) {
        const Ref<Carrier>& primary = tiles_[static_cast<size_t>(k)].primary;
        if (!primary) {
          auto it = loaded.find(k);
          if (it == loaded.end()) {
            stale = true;
            break;
          }
          target[k] = it->second;
          promoted.push_back(k);
        } else {
          target[k] = primary->is_unique() ? primary : clone_tile(primary);
        }
      }
      if (stale) continue;
      fill_tiles(runs, src, target);
      for (auto& [k, buf] : target) {
        Tile& t = tiles_[static_cast<size_t>(k)];
        t.primary = buf;
        t.dirty = true;
        t.implicit = false;
      }
    }
    report_residency(promoted, {});
    if (!promoted.empty() && policy_ && policy_->budgets_promotions() && !secondary_->is_read_only())
      write_through(promoted);
    return;
  }
  state_error("write: the touched tiles kept changing residency under the write; try again");
}

}  // namespace sw

namespace sw {

// A public write under a policy that budgets promotions does not promote:
// the tiles it brought to the primary tier to patch them are written to the
// secondary tier and dropped again, with the eviction protocol (the writer
// mark keeps other evictions off; a tile that other work pinned meanwhile
// or that was written again stays primary, clean or dirty as it is, for
// the policy to evict later).
void TiledEvictable::write_through(const std::vector<int64_t>& ks) {
  const size_t T = static_cast<size_t>(geo_.tile_size);
  const int marker = 0;
  const void* const me = &marker;
  std::vector<std::pair<int64_t, Ref<Carrier>>> writing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t k : ks) {
      Tile& t = tiles_[static_cast<size_t>(k)];
      if (!t.primary || !t.dirty || t.pins || t.owner || t.writer || t.secondary_readers) continue;
      t.writer = me;
      writing.emplace_back(k, t.primary);
    }
  }
  std::vector<int64_t> evicted;
  std::vector<bool> written(writing.size(), false);
  Status st = capture([&] {
    ensure_secondary_storage();
    std::vector<std::byte> staged;
    for (size_t i = 0; i < writing.size(); ++i) {
      const Ref<Carrier>& buf = writing[i].second;
      const std::byte* from = buf->host_data();
      if (!from) {
        staged.resize(bytes_of(T));
        buf->read_slots(0, T, staged.data());
        from = staged.data();
      }
      secondary_->write_slots(static_cast<size_t>(writing[i].first) * T, T, from);
      written[i] = true;
    }
  });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < writing.size(); ++i) {
      Tile& t = tiles_[static_cast<size_t>(writing[i].first)];
      if (t.writer == me) t.writer = nullptr;
      if (!written[i] || t.primary != writing[i].second) continue;
      t.secondary_valid = true;
      t.dirty = false;
      if (t.pins || t.owner) continue;
      t.primary = nullptr;
      evicted.push_back(writing[i].first);
    }
  }
  report_residency({}, evicted);
  wake_deferred();
  // The write itself succeeded; a tile whose write-through failed stays
  // primary and dirty, its value intact.
  if (!st.ok()) runtime().log(SW_LOG_WARNING, "write: writing through to the secondary tier failed: " + st.message);
}

}  // namespace sw
