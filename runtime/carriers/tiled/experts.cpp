#include "carriers/tiled/experts.hpp"

#include <cstring>
#include <mutex>

#include "base/error.hpp"
#include "base/text.hpp"
#include "core/dtype.hpp"
#include "ops/ops.hpp"

namespace sw::experts {

std::vector<int64_t> Routing::x_pick(size_t u) const {
  std::vector<int64_t> pick;
  pick.reserve(slots[u].size());
  for (int64_t s : slots[u]) pick.push_back(x_row(s));
  return pick;
}

void route(const char* op, const Tensor& ids, const Tensor& x, const Tensor* gates, int64_t E, const char* kname,
           Routing* r) {
  if (ids.rank() != 2) value_error(std::string(op) + ": ids must be (tokens, k), not " + shape_text(ids.shape()));
  r->T = ids.shape()[0];
  r->k = ids.shape()[1];
  const int64_t K = r->K;
  const bool shared_x = x.rank() == 2 && x.shape()[0] == r->T && x.shape()[1] == K;
  const bool slot_x = x.rank() == 3 && x.shape()[0] == r->T && x.shape()[1] == r->k && x.shape()[2] == K;
  if (!shared_x && !slot_x)
    value_error(std::string(op) + ": x must be (tokens, " + kname + ") = " + shape_text({r->T, K}) + " or (tokens, k, " +
                kname + ") = " + shape_text({r->T, r->k, K}) + ", not " + shape_text(x.shape()));
  r->per_slot_x = slot_x;
  if (gates && gates->shape() != ids.shape())
    value_error(std::string(op) + ": gates must be (tokens, k) = " + shape_text(ids.shape()) + ", not " +
                shape_text(gates->shape()));
  auto id64 = ops::copy_as(ids, SW_DTYPE_I64);
  const int64_t S = r->S();
  r->ids.assign(data<int64_t>(*id64), data<int64_t>(*id64) + S);
  r->experts.clear();
  r->slots.clear();
  std::vector<int64_t> index_of(static_cast<size_t>(E), -1);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t e = r->ids[static_cast<size_t>(s)];
    if (e < 0 || e >= E)
      index_error(std::string(op) + ": expert id " + std::to_string(e) + " at (token " + std::to_string(s % r->T) +
                  ", slot " + std::to_string(s / r->T) + ") is outside [0, " + std::to_string(E) + ")");
    int64_t& u = index_of[static_cast<size_t>(e)];
    if (u < 0) {
      u = static_cast<int64_t>(r->experts.size());
      r->experts.push_back(e);
      r->slots.emplace_back();
    }
    r->slots[static_cast<size_t>(u)].push_back(s);
  }
}

void check_experts(const TiledEvictable& te, const Tensor& full, const char* op, const std::string& what) {
  te.check_live(op);
  te.check_full(full, op);
  const TileGeometry& g = te.geometry();
  if (g.rank() != 3 || g.grid[0] != 1 || g.grid[1] != 1 || g.tile[2] != 1)
    value_error(std::string(op) + ": " + what + " must be one per tile, grid (1, 1, E) and tile (K, N, 1); this " +
                "TiledEvictable has grid " + shape_text(g.grid) + " and tile " + shape_text(g.tile));
  if (full.offset() != 0 || !full.layout().equals(*Layout::dense(g.logical)))
    value_error(std::string(op) + ": " + what + " tensor must be the TiledEvictable's full tensor (dense, offset 0; " +
                "sw_tiled_full_tensor), not a view of it");
  const Carrier& primary = *te.primary_carrier();
  if (primary.kind() != SW_CARRIER_CPU)
    unsupported_error(std::string(op) + ": " + what + "' primary tier is a " + primary.kind_name() +
                      " carrier; only a CPU primary is supported (project the experts and call matmul instead)");
  if (!dtype_is_float(te.dtype()) && !dtype_is_quantized(te.dtype()))
    type_error(std::string(op) + " supports f32, f64, f16, bf16 and block-quantized experts, not " +
               dtype_name(te.dtype()));
}

void check_host_operand(const Tensor& t, const char* op, const char* what) {
  if (t.carrier().kind() != SW_CARRIER_CPU || !t.host_base())
    type_error(std::string(op) + ": " + what + " must be a CPU tensor, not one on a " + t.carrier().kind_name() +
               " carrier");
}

sw_dtype_t check_call(const char* op, sw_dtype_t dt, sw_dtype_t out_dtype, const Tensor& x, const Tensor& ids,
                      const Tensor* gates, std::vector<StoragePin>* pins) {
  const bool quantized = dtype_is_quantized(dt);
  const bool half = dt == SW_DTYPE_F16 || dt == SW_DTYPE_BF16;
  if (quantized) {
    if (out_dtype == SW_DTYPE_INVALID) out_dtype = SW_DTYPE_F32;
    if (out_dtype != SW_DTYPE_F32 && out_dtype != SW_DTYPE_BF16 && out_dtype != SW_DTYPE_F16)
      type_error(std::string(op) + ": the result of " + dtype_name(dt) + " experts is f32, bf16 or f16, not " +
                 dtype_name(out_dtype));
  } else {
    if (out_dtype == SW_DTYPE_INVALID) out_dtype = dt;
    if (out_dtype != dt && !(half && out_dtype == SW_DTYPE_F32))
      type_error(std::string(op) + ": the result of " + dtype_name(dt) + " experts is " + dtype_name(dt) +
                 (half ? " or f32" : "") + ", not " + dtype_name(out_dtype));
  }
  *pins = gates ? ops::check_operands(op, {&x, &ids, gates}) : ops::check_operands(op, {&x, &ids});
  check_host_operand(x, op, "x");
  check_host_operand(ids, op, "ids");
  if (gates) check_host_operand(*gates, op, "gates");
  if (quantized ? !dtype_is_float(x.dtype()) : x.dtype() != dt)
    type_error(std::string(op) + ": x is " + dtype_name(x.dtype()) + ", the experts " + dtype_name(dt) +
               (quantized ? " (x must be a float tensor)" : ""));
  if (ids.dtype() != SW_DTYPE_I32 && ids.dtype() != SW_DTYPE_I64)
    type_error(std::string(op) + ": ids must be i32 or i64, not " + dtype_name(ids.dtype()));
  if (gates && !dtype_is_float(gates->dtype()))
    type_error(std::string(op) + ": gates must be a float tensor, not " + dtype_name(gates->dtype()));
  return out_dtype;
}

void refuse_quantized_grad(const char* op, sw_dtype_t dt, bool record) {
  if (record && dtype_is_quantized(dt))
    unsupported_error(std::string(op) + ": gradients through " + dtype_name(dt) +
                      " experts are not supported (block-quantized experts are for inference); call it with grad " +
                      "mode off or with inputs that do not require grad");
}

bool consecutive(const std::vector<int64_t>& v) {
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[0] + static_cast<int64_t>(i)) return false;
  return !v.empty();
}

Ref<Tensor> gather_rows(ComputeBackend& be, const Ref<Runtime>& rt, const Tensor& src, int64_t rows, int64_t cols,
                        const std::vector<int64_t>& pick) {
  const int64_t m = static_cast<int64_t>(pick.size());
  const size_t es = dtype_size(src.dtype());
  auto out = be.empty(rt, src.dtype(), {m, cols});
  const std::byte* from = src.host_base();
  std::byte* to = out->host_base();
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(to + static_cast<size_t>(r + m * c) * es, from + static_cast<size_t>(pick[r] + rows * c) * es, es);
  return out;
}

Ref<Tensor> rows_of(ComputeBackend& be, const Ref<Runtime>& rt, const Ref<Tensor>& src, int64_t rows, int64_t cols,
                    const std::vector<int64_t>& pick) {
  if (!consecutive(pick)) return gather_rows(be, rt, *src, rows, cols, pick);
  const int64_t m = static_cast<int64_t>(pick.size());
  return src->view(src->offset() + pick[0], Layout::make({Mode::make_leaf(m, 1), Mode::make_leaf(cols, rows)}));
}

void scatter_rows(const Tensor& block, const Tensor& dst, int64_t rows, int64_t cols, const std::vector<int64_t>& pick) {
  const int64_t m = static_cast<int64_t>(pick.size());
  const size_t es = dtype_size(dst.dtype());
  const std::byte* from = block.host_base();
  std::byte* to = dst.host_base();
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(to + static_cast<size_t>(pick[r] + rows * c) * es, from + static_cast<size_t>(r + m * c) * es, es);
}

Ref<Tensor> expert_matrix(const Ref<Carrier>& tile, int64_t K, int64_t N) {
  return Tensor::create(tile, 0, Layout::dense({K, N}));
}

Ref<Tensor> transposed(const Ref<Tensor>& m) { return m->view(m->offset(), m->layout().permute({1, 0})); }

void Products::run(ComputeBackend& be) const {
  std::vector<ComputeBackend::MatmulCall> calls;
  calls.reserve(ops.size());
  for (const auto& [a, b, out] : ops) calls.push_back({a.get(), b.get(), out.get()});
  be.matmuls(calls);
}

std::shared_ptr<TileRequest> request(TiledEvictable& te, const Ref<Await>& await,
                                     const std::shared_ptr<const Routing>& r, sw_residency_purpose_t purpose,
                                     std::shared_ptr<std::mutex> serial, std::function<void(const Experts&)> each) {
  const TileGeometry& g = te.geometry();
  auto req = std::make_shared<TileRequest>(Ref<TiledEvictable>(&te), await);
  req->reads = r->experts;  // tile ordinal e is expert e (grid (1, 1, E))
  if (te.policy()) {
    std::vector<std::vector<int64_t>> axes{{0}, {0}, r->experts};
    auto sel = make_ref<TileSelection>(std::move(axes));
    req->plan = te.policy()->plan(sel->tile_set(), purpose, g.grid);
    for (const TileCoord& c : req->plan->promote()->coords()) req->promotes.push_back(g.ordinal(c));
    for (const TileCoord& c : req->plan->evict()->coords()) req->evicts.push_back(g.ordinal(c));
  } else {
    req->promotes = req->reads;  // as a projection: the experts stay primary
  }
  req->run_inline = true;  // all resident and nothing to move: no hand-offs
  const int64_t K = g.tile[0], N = g.tile[1];
  req->tile_work = [K, N, serial = std::move(serial),
                    each = std::move(each)](const std::vector<std::pair<size_t, Ref<Carrier>>>& tiles) {
    Experts experts;
    experts.reserve(tiles.size());
    for (const auto& [u, tile] : tiles) experts.emplace_back(u, expert_matrix(tile, K, N));
    std::lock_guard<std::mutex> lock(*serial);
    each(experts);
  };
  return req;
}

Ref<Tensor> wait_tensor(const Ref<Await>& a) {
  Status st = a->wait(-1);
  if (!st.ok()) st.raise();
  return Ref<Tensor>(static_cast<Tensor*>(a->result().get()));
}

}  // namespace sw::experts
