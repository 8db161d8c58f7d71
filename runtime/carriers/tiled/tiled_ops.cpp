// The TiledEvictable requests: promote, evict, project, scatter, and the
// blocking materialisation used by direct ops and backward; with the gather
// and scatter autograd nodes.
#include <algorithm>
#include <cstring>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "carriers/tiled/tile_request.hpp"
#include "carriers/tiled/tiled_carrier.hpp"
#include "carriers/tiled/tiled_grad.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw {

namespace {

std::vector<int64_t> compact_shape(const TileGeometry& g, const TileSelection& sel) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < g.rank(); ++i) s.push_back(static_cast<int64_t>(sel.per_axis()[i].size()) * g.tile[i]);
  return s;
}

std::vector<int64_t> selection_ordinals(const TileGeometry& g, const TileSelection& sel) {
  std::vector<int64_t> out;
  out.reserve(sel.count());
  for (size_t j = 0; j < sel.count(); ++j) out.push_back(g.ordinal(sel.coordinate(j)));
  return out;
}

// The gather node of a projection: backward scatter-adds the compact
// cotangent into a fresh TiledEvictable gradient.
class GatherNode final : public Node {
 public:
  GatherNode(Ref<TiledEvictable> te, Ref<TileSelection> sel) : te_(std::move(te)), sel_(std::move(sel)) {}
  const char* name() const override { return "project"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    return {tiled_gradient_from_compact(*te_, *saved_tensor(0), *sel_, g)};
  }

 private:
  Ref<TiledEvictable> te_;
  Ref<TileSelection> sel_;
};

class ScatterNode final : public Node {
 public:
  ScatterNode(Ref<TiledEvictable> te, Ref<TileSelection> sel, bool add) : te_(std::move(te)), sel_(std::move(sel)), add_(add) {}
  const char* name() const override { return "scatter"; }
  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    // The compact input receives the cotangent at the selected tiles.
    Ref<Tensor> compact = project_any(g, *te_, *sel_);
    Ref<Tensor> tmpl;
    if (add_ && !edges_[1].empty()) tmpl = tiled_gradient_from_compact(*te_, *saved_tensor(0), *sel_, compact);
    return {edges_[0].empty() ? nullptr : compact, tmpl};
  }

 private:
  Ref<TiledEvictable> te_;
  Ref<TileSelection> sel_;
  bool add_;
};

}  // namespace

Ref<Await> TiledEvictable::promote_async(const Ref<TileSet>& tiles, bool prefetch) {
  const char* what = prefetch ? "prefetch" : "promote";
  check_live(what);
  auto ks = ordinals(*tiles, what);
  auto await = make_ref<Await>(runtime_ref(), SW_AWAIT_RESIDENCY);
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(this), await);
  req->promotes = ks;
  req->residency = true;
  req->prefetch = prefetch;
  // A policy that budgets makes room: its plan's evictions go with the
  // promotion (its errors refuse it before anything changes).
  if (policy_) {
    req->plan = policy_->plan_promotion(tiles, geo_.grid);
    if (req->plan)
      for (const TileCoord& c : req->plan->evict()->coords())
        if (!tiles->contains(c)) req->evicts.push_back(geo_.ordinal(c));
  }
  req->submit();
  return await;
}

Ref<Await> TiledEvictable::evict_async(const Ref<TileSet>& tiles) {
  check_live("evict");
  auto ks = ordinals(*tiles, "evict");
  auto await = make_ref<Await>(runtime_ref(), SW_AWAIT_RESIDENCY);
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(this), await);
  req->evicts = ks;
  req->residency = true;
  req->submit();
  return await;
}

// Shared by project() and materialize(); `run_inline` for a caller that
// waits at once (TileRequest::run_inline).
static Ref<Await> project_impl(TiledEvictable& te, const Ref<Tensor>& full, const Ref<TileSelection>& sel,
                               Ref<Carrier> destination, sw_residency_purpose_t purpose, bool record,
                               bool run_inline = false) {
  te.check_live("project");
  te.check_full(*full, "project");
  sel->check_grid(te.geometry().grid, "project");
  const TileGeometry& g = te.geometry();
  const std::vector<int64_t> cshape = compact_shape(g, *sel);
  const size_t n = static_cast<size_t>(checked_product(cshape));
  const Carrier& kind = *te.primary_carrier();
  if (destination) {
    Carrier& d = *destination;
    if (d.kind() == SW_CARRIER_TILED || d.kind() != kind.kind() || !d.is_compute())
      type_error(std::string("project: the destination must be a ") + kind.kind_name() + " carrier, not " + d.kind_name());
    d.check_mutable("project (destination)");
    if (d.dtype() != te.dtype())
      type_error(std::string("project: the destination's dtype ") + dtype_name(d.dtype()) + " differs from " +
                 dtype_name(te.dtype()));
    if (d.size() < n && !d.is_allocatable())
      value_error("project: the destination holds " + std::to_string(d.size()) + " slots, the projection needs " +
                  std::to_string(n) + "; it cannot be allocated to fit (it is not empty, or its memory belongs to the host)");
  }
  auto await = make_ref<Await>(te.runtime_ref(), SW_AWAIT_PROJECTION);
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(&te), await);
  req->reads = selection_ordinals(g, *sel);
  req->run_inline = run_inline;
  // The policy may only optimise; its errors surface before any work. The
  // request reports the plan's outcome, refused or not.
  if (te.policy()) {
    req->plan = te.policy()->plan(sel->tile_set(), purpose, g.grid);
    for (const TileCoord& c : req->plan->promote()->coords()) req->promotes.push_back(g.ordinal(c));
    for (const TileCoord& c : req->plan->evict()->coords()) req->evicts.push_back(g.ordinal(c));
  } else {
    req->promotes = req->reads;  // without a policy, projected tiles stay primary
  }
  bool allocated = false;
  if (!destination) {
    destination = backend_for(kind).empty(te.runtime_ref(), te.dtype(), {static_cast<int64_t>(n)})->carrier_ref();
  }
  destination->claim("a pending projection");
  try {
    if (destination->size() == 0 && n > 0) {
      destination->allocate(n, false);  // the gather writes every slot
      allocated = true;
    }
  } catch (...) {
    destination->unclaim();
    throw;
  }
  Ref<Carrier> dst = destination;
  Ref<TileSelection> selection = sel;
  Ref<Tensor> source = full;
  Ref<TiledEvictable> owner(&te);
  const std::vector<int64_t> cgrid = sel->compact_grid_shape();
  req->work = [owner, source, dst, cgrid, cshape, selection](const std::vector<Ref<Carrier>>& tiles,
                                                              const std::vector<Ref<Carrier>>&) {
    const TileGeometry& geo = owner->geometry();
    transfer_tiles(geo, *source, cgrid, selection_ordinals(geo, *selection), tiles,
                   *Tensor::create(dst, 0, Layout::dense(cshape)), true, owner->runtime().compute());
  };
  req->publish = [owner, source, dst, cshape, selection, record]() -> Ref<Object> {
    dst->unclaim();
    dst->bump_version();
    auto result = Tensor::create(dst, 0, Layout::dense(cshape));
    if (record) {
      auto node = make_ref<GatherNode>(owner, selection);
      node->save(source);
      node->connect({source.get()});
      attach(result, node);
    }
    return Ref<Object>(result.get());
  };
  req->cleanup = [dst, allocated](const Status& st) {
    if (st.ok()) return;
    if (dst->is_owned()) dst->unclaim();
    if (allocated) dst->deallocate();
  };
  // Within a step of several requests (a backward pass), the request
  // commits with the step; the caller waits for its result.
  const Ref<Await> result = join_step(*req);
  try {
    req->submit();
  } catch (...) {
    dst->unclaim();
    if (allocated) dst->deallocate();
    throw;
  }
  return result;
}

Ref<Await> TiledEvictable::project(const Ref<Tensor>& full, const Ref<TileSelection>& selection,
                                   Ref<Carrier> destination) {
  const bool record = grad_enabled() && full->requires_grad();
  return project_impl(*this, full, selection, std::move(destination), SW_PURPOSE_PROJECTION, record);
}

Ref<Tensor> TiledEvictable::materialize(const Ref<Tensor>& full, sw_residency_purpose_t purpose) {
  // Nothing to move: the copy runs here rather than on a worker.
  auto await = project_impl(*this, full, full_selection(geo_), nullptr, purpose, false, true);
  Status st = await->wait(-1);
  if (!st.ok()) st.raise();
  Ref<Object> r = await->result();
  return Ref<Tensor>(static_cast<Tensor*>(r.get()));
}

// The argument rules shared by scatter and update.
static void check_compact_write(const TiledEvictable& te, const Tensor& compact, const Tensor& full,
                                const TileSelection& sel, sw_scatter_reduction_t reduction, const char* what) {
  te.check_live(what);
  const Carrier& kind = *te.primary_carrier();
  if (compact.carrier().kind() != kind.kind() || !compact.carrier().is_compute())
    type_error(std::string(what) + ": the compact tensor must be backed by a " + kind.kind_name() + " carrier, not " +
               compact.carrier().kind_name());
  te.check_full(full, what);
  compact.carrier().check_live(what);
  if (reduction != SW_SCATTER_REPLACE && reduction != SW_SCATTER_ADD)
    value_error(std::string(what) + ": reduction " + std::to_string(static_cast<int>(reduction)) +
                " is neither replace nor add");
  if (compact.dtype() != te.dtype())
    type_error(std::string(what) + ": the compact dtype " + dtype_name(compact.dtype()) + " differs from " +
               dtype_name(te.dtype()));
  sel.check_grid(te.geometry().grid, what);
  if (compact.shape() != compact_shape(te.geometry(), sel))
    value_error(std::string(what) + ": the compact shape differs from the selected region's shape");
}

Ref<Await> TiledEvictable::update(const Ref<Tensor>& full, const Ref<Tensor>& compact_in,
                                  const Ref<TileSelection>& sel, sw_scatter_reduction_t reduction) {
  check_compact_write(*this, *compact_in, *full, *sel, reduction, "update");
  full->carrier().check_mutable("update");
  Ref<Tensor> compact = ops::copy_as(*compact_in, compact_in->dtype());
  auto await = make_ref<Await>(runtime_ref(), SW_AWAIT_MOVE);
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(this), await);
  const bool add = reduction == SW_SCATTER_ADD;
  // New values go to fresh buffers swapped in at the commit (copy on write):
  // a replace reads nothing, an add reads the old values.
  req->writes = selection_ordinals(geo_, *sel);
  if (add) req->reads = req->writes;
  // The written tiles become primary: a policy that budgets makes room as
  // for an explicit promotion.
  if (policy_) {
    const Ref<TileSet> written = sel->tile_set();
    req->plan = policy_->plan_promotion(written, geo_.grid);
    if (req->plan)
      for (const TileCoord& c : req->plan->evict()->coords())
        if (!written->contains(c)) req->evicts.push_back(geo_.ordinal(c));
  }
  Ref<TiledEvictable> self(this);
  Ref<TileSelection> selection = sel;
  Ref<Tensor> target = full;
  req->work = [self, compact, selection, target, add](const std::vector<Ref<Carrier>>& tiles,
                                                      const std::vector<Ref<Carrier>>& outs) {
    const TileGeometry& geo = self->geometry();
    const auto ks = selection_ordinals(geo, *selection);
    transfer_tiles(geo, *target, selection->compact_grid_shape(), ks, outs, *compact, false, self->runtime().compute());
    if (add)
      for (size_t j = 0; j < ks.size(); ++j) add_tiles(*outs[j], *tiles[j], geo.tile_size);
  };
  req->publish = [self]() -> Ref<Object> {
    self->bump_version();
    return nullptr;
  };
  req->submit();
  return await;
}

Ref<Await> TiledEvictable::scatter(const Ref<Tensor>& compact_in, const Ref<Tensor>& full_template,
                                   const Ref<TileSelection>& sel, sw_scatter_reduction_t reduction) {
  check_compact_write(*this, *compact_in, *full_template, *sel, reduction, "scatter");
  auto await = make_ref<Await>(runtime_ref(), SW_AWAIT_MOVE);
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(this), await);
  if (policy_) {
    req->plan = policy_->plan(sel->tile_set(), SW_PURPOSE_SCATTER, geo_.grid);
    for (const TileCoord& c : req->plan->promote()->coords()) req->promotes.push_back(geo_.ordinal(c));
    for (const TileCoord& c : req->plan->evict()->coords()) req->evicts.push_back(geo_.ordinal(c));
  }
  const bool add = reduction == SW_SCATTER_ADD;
  const bool record = grad_enabled() && (compact_in->requires_grad() || (add && full_template->requires_grad()));
  // Work on a private dense copy: later writes to the input cannot reach the request.
  Ref<Tensor> compact = ops::copy_as(*compact_in, compact_in->dtype());
  auto result_te = fresh_like(*this, false);
  if (add) req->reads = selection_ordinals(geo_, *sel);
  auto buffers = std::make_shared<std::vector<Ref<Carrier>>>();
  Ref<TiledEvictable> self(this);
  Ref<TileSelection> selection = sel;
  Ref<Tensor> tmpl = full_template, compact_keep = compact_in;
  req->work = [self, result_te, compact, selection, buffers, add, tmpl](const std::vector<Ref<Carrier>>& tiles,
                                                                        const std::vector<Ref<Carrier>>&) {
    const TileGeometry& geo = self->geometry();
    const auto ks = selection_ordinals(geo, *selection);
    for (size_t j = 0; j < ks.size(); ++j) buffers->push_back(result_te->new_tile_buffer(false));
    transfer_tiles(geo, *tmpl, selection->compact_grid_shape(), ks, *buffers, *compact, false,
                   self->runtime().compute());
    if (add)
      for (size_t j = 0; j < ks.size(); ++j) add_tiles(*(*buffers)[j], *tiles[j], geo.tile_size);
  };
  req->publish = [self, result_te, selection, buffers, tmpl, compact_keep, record, add]() -> Ref<Object> {
    const auto ks = selection_ordinals(self->geometry(), *selection);
    for (size_t j = 0; j < ks.size(); ++j) result_te->set_tile(ks[j], (*buffers)[j]);
    result_te->bump_version();
    auto result = result_te->full_tensor_like(*tmpl);
    if (record) {
      auto node = make_ref<ScatterNode>(self, selection, add);
      node->save(tmpl);
      node->connect({compact_keep.get(), add ? tmpl.get() : nullptr});
      attach(result, node);
    }
    return Ref<Object>(result.get());
  };
  req->submit();
  return await;
}

}  // namespace sw
