// The expert-indexed matmul over a TiledEvictable (sw_tiled_expert_matmul):
// every token's experts computed on the tiles' own memory, and its VJP.
//
// The experts tensor has grid (1, 1, E) and tile (K, N, 1): tile e is expert
// e's (K, N) matrix, first mode fastest, one contiguous buffer (a row-major
// (E, N, K) weight file is exactly this). A call gathers each expert's token
// rows of x into one small (m, K) block, multiplies it by the tile buffer in
// place (the GEMM reads the expert's bytes once) and spreads the (m, N)
// product back to the tokens' slots; a gated call sums the slots weighted by
// their gates. One TileRequest carries the call: experts resident at the
// start are computed at once on a worker while the missing ones are read,
// each of those as soon as its read lands (TileRequest::tile_work). A call
// whose experts are all resident and whose plan moves nothing runs on the
// calling thread (TileRequest::run_inline): the GEMMs on the compute pool,
// no hand-off to the loop or a worker, the await terminal on return. Rows
// that lie consecutively (one token, or a token's own rows) are multiplied
// in place: the GEMM reads x's rows and writes the products' slots directly.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "autograd/node.hpp"
#include "base/error.hpp"
#include "base/text.hpp"
#include "carriers/tiled/experts.hpp"
#include "carriers/tiled/tiled_carrier.hpp"
#include "carriers/tiled/tiled_grad.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"
#include "ops/ops.hpp"

namespace sw {

namespace {

using namespace experts;

constexpr const char* kOp = "expert_matmul";

// Runs `each` on every distinct expert u of `r` on its tile memory
// (through one TileRequest, the policy consulted with the experts for
// `purpose`) on workers, then `finish()` and `publish` (the await's result)
// on the loop thread; all of it on the calling thread when every expert is
// resident and the plan moves nothing. Calls of `each` are serialised.
Ref<Await> run_experts(TiledEvictable& te, const std::shared_ptr<const Routing>& r, sw_residency_purpose_t purpose,
                       std::function<void(const Experts&)> each, std::function<void()> finish,
                       std::function<Ref<Object>()> publish) {
  auto await = make_ref<Await>(te.runtime_ref(), SW_AWAIT_PROJECTION);
  auto req = request(te, await, r, purpose, std::make_shared<std::mutex>(), std::move(each));
  // `finish` is small (the gated sum and the result's rounding): it runs on
  // the loop thread with the publication rather than costing a worker hop.
  req->publish = [finish = std::move(finish), publish = std::move(publish)]() -> Ref<Object> {
    finish();
    return publish();
  };
  const Ref<Await> result = join_step(*req);  // within a step, it commits with the step
  req->submit();
  return result;
}

// The cotangent of the per-slot products (T, k, N) in the accumulation
// dtype, from the result's cotangent; and the gates' cotangent (T, k).
template <typename A>
void slot_cotangents(const Routing& r, const A* G, const A* gate, const A* Y, A* dY, A* dgate) {
  const int64_t S = r.T * r.k;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t t = s % r.T;
    A dot = 0;
    for (int64_t n = 0; n < r.N; ++n) {
      const A gn = G[t + r.T * n];
      dY[s + S * n] = gate[s] * gn;
      if (Y) dot += gn * Y[s + S * n];
    }
    if (dgate) dgate[s] = dot;
  }
}

class ExpertMatmulNode final : public Node {
 public:
  ExpertMatmulNode(Ref<TiledEvictable> te, std::shared_ptr<const Routing> r, Ref<Tensor> x, Ref<Tensor> gates,
                   Ref<Tensor> y)
      : te_(std::move(te)), r_(std::move(r)), x_(std::move(x)), gates_(std::move(gates)), y_(std::move(y)) {}
  const char* name() const override { return kOp; }

  std::vector<Ref<Tensor>> apply(const Ref<Tensor>& g) override {
    const Routing& r = *r_;
    const sw_dtype_t dt = te_->dtype(), acc = acc_dtype(dt);
    ComputeBackend& be = backend_for(*te_->primary_carrier());
    const Ref<Runtime>& rt = te_->runtime_ref();
    const int64_t S = r.T * r.k;
    // The per-slot cotangent dY (T, k, N) and the gates' cotangent.
    Ref<Tensor> dY, dgate;
    Ref<Tensor> G = ops::copy_as(*g, acc);
    if (gates_) {
      dY = be.empty(rt, acc, {r.T, r.k, r.N});
      const bool want_gates = !edges_[2].empty();
      if (want_gates) dgate = be.empty(rt, acc, {r.T, r.k});
      if (acc == SW_DTYPE_F64)
        slot_cotangents<double>(r, data<double>(*G), data<double>(*gates_), want_gates ? data<double>(*y_) : nullptr,
                                data<double>(*dY), want_gates ? data<double>(*dgate) : nullptr);
      else
        slot_cotangents<float>(r, data<float>(*G), data<float>(*gates_), want_gates ? data<float>(*y_) : nullptr,
                               data<float>(*dY), want_gates ? data<float>(*dgate) : nullptr);
    } else {
      dY = G;
    }
    // The products run on operands of the weights' dtype (a half cotangent
    // rounded once, never a widened copy of the weights).
    Ref<Tensor> dYw = dY->dtype() == dt ? dY : ops::copy_as(*dY, dt);

    Ref<Tensor> dW, dx;
    if (!edges_[0].empty()) {
      // dW_u = X_u^T dY_u, into a compact (K, N, U) of the experts used.
      const int64_t U = static_cast<int64_t>(r.experts.size());
      auto compact = be.empty(rt, acc, {r.K, r.N, U});
      for (size_t u = 0; u < r.experts.size(); ++u) {
        auto to = compact->view(static_cast<int64_t>(u) * r.K * r.N, Layout::dense({r.K, r.N}));
        be.matmul(*transposed(rows_of(be, rt, x_, r.x_rows(), r.K, r.x_pick(u))),
                  *rows_of(be, rt, dYw, S, r.N, r.slots[u]), *to);
      }
      std::vector<std::vector<int64_t>> axes{{0}, {0}, r.experts};
      TileSelection sel(std::move(axes));
      dW = tiled_gradient_from_compact(*te_, *saved_tensor(0), sel, compact);
    }
    if (!edges_[1].empty()) {
      // dX_u = dY_u W_u^T, on the expert tiles again (read where they are).
      dx = be.empty(rt, acc, r.per_slot_x ? std::vector<int64_t>{r.T, r.k, r.K} : std::vector<int64_t>{r.T, r.K});
      std::memset(dx->host_base(), 0, static_cast<size_t>(dx->numel()) * dtype_size(acc));
      auto routing = r_;
      Ref<Tensor> dYk = dYw, into = dx;
      auto each = [routing, dYk, into, &be, rt, acc, S](const Experts& experts) {
        const Routing& r = *routing;
        // The experts' products as one job, then each added into its rows.
        Products dX;
        for (const auto& [u, W] : experts) {
          const auto& slots = r.slots[u];
          dX.add(rows_of(be, rt, dYk, S, r.N, slots), transposed(W),
                 be.empty(rt, acc, {static_cast<int64_t>(slots.size()), r.K}));
        }
        dX.run(be);
        const int64_t rows = r.x_rows();
        for (size_t j = 0; j < experts.size(); ++j) {
          const auto& slots = r.slots[experts[j].first];
          const int64_t m = static_cast<int64_t>(slots.size());
          auto add = [&](auto* dst, const auto* src) {
            for (int64_t c = 0; c < r.K; ++c)
              for (int64_t i = 0; i < m; ++i) dst[r.x_row(slots[i]) + rows * c] += src[i + m * c];
          };
          if (acc == SW_DTYPE_F64)
            add(data<double>(*into), data<double>(*dX.ops[j][2]));
          else
            add(data<float>(*into), data<float>(*dX.ops[j][2]));
        }
      };
      wait_tensor(run_experts(*te_, r_, SW_PURPOSE_BACKWARD, each, [] {}, [into] { return Ref<Object>(into.get()); }));
      if (saved_tensor(1)->dtype() != acc) dx = ops::copy_as(*dx, saved_tensor(1)->dtype());
    }
    Ref<Tensor> dg;
    if (gates_ && !edges_[2].empty()) dg = ops::copy_as(*dgate, saved_tensor(2)->dtype());
    return {dW, dx, dg};
  }

 private:
  Ref<TiledEvictable> te_;
  std::shared_ptr<const Routing> r_;
  Ref<Tensor> x_;      // dense copy of x, the weights' dtype
  Ref<Tensor> gates_;  // dense copy of the gates, the accumulation dtype (or null)
  Ref<Tensor> y_;      // the per-slot products (T, k, N), accumulation dtype (gated calls)
};

}  // namespace

Ref<Await> TiledEvictable::expert_matmul(const Ref<Tensor>& full, const Ref<Tensor>& x, const Ref<Tensor>& ids,
                                         const Ref<Tensor>& gates, sw_dtype_t out_dtype) {
  check_experts(*this, *full, kOp, "the experts");
  const TileGeometry& g = geo_;
  const sw_dtype_t dt = dtype();
  std::vector<StoragePin> pins;
  out_dtype = check_call(kOp, dt, out_dtype, *x, *ids, gates.get(), &pins);

  auto r = std::make_shared<Routing>();
  r->K = g.tile[0];
  r->N = g.tile[1];
  route(kOp, *ids, *x, gates.get(), g.grid[2], "K", r.get());

  // Snapshots of the small operands: later writes to them cannot reach the request.
  const sw_dtype_t acc = acc_dtype(dt);
  const int64_t S = r->S();
  const bool record =
      grad_enabled() && (full->requires_grad() || x->requires_grad() || (gates && gates->requires_grad()));
  refuse_quantized_grad(kOp, dt, record);
  Ref<Tensor> xd = ops::copy_as(*x, operand_dtype(dt));
  Ref<Tensor> gd = gates ? ops::copy_as(*gates, acc) : nullptr;

  ComputeBackend& be = backend_for(*primary_seed_);
  const Ref<Runtime>& rt = runtime_ref();
  Ref<Tensor> Y = be.empty(rt, acc, {r->T, r->k, r->N});  // per-slot products
  auto each = [r, xd, Y, &be, rt, S](const Experts& experts) {
    // The experts' products as one job, each into its rows of Y: in place
    // when they are consecutive, else through a block copied there after.
    Products products;
    std::vector<std::pair<size_t, Ref<Tensor>>> scattered;
    for (const auto& [u, W] : experts) {
      const auto& slots = r->slots[u];
      Ref<Tensor> Yu;
      if (consecutive(slots)) {
        Yu = rows_of(be, rt, Y, S, r->N, slots);
      } else {
        Yu = be.empty(rt, Y->dtype(), {static_cast<int64_t>(slots.size()), r->N});
        scattered.emplace_back(u, Yu);
      }
      products.add(rows_of(be, rt, xd, r->x_rows(), r->K, r->x_pick(u)), W, Yu);
    }
    products.run(be);
    for (const auto& [u, Yu] : scattered) scatter_rows(*Yu, *Y, S, r->N, r->slots[u]);
  };
  auto result = std::make_shared<Ref<Tensor>>();
  auto finish = [r, Y, gd, result, &be, rt, acc, out_dtype] {
    Ref<Tensor> out = Y;
    if (gd) {
      out = be.empty(rt, acc, {r->T, r->N});
      if (acc == SW_DTYPE_F64)
        gated_sum<double>(*r, data<double>(*Y), data<double>(*gd), data<double>(*out));
      else
        gated_sum<float>(*r, data<float>(*Y), data<float>(*gd), data<float>(*out));
    }
    *result = out->dtype() == out_dtype ? out : ops::copy_as(*out, out_dtype);
  };
  Ref<TiledEvictable> self(this);
  Ref<Tensor> source = full, xin = x, gin = gates;
  auto publish = [self, r, source, xin, gin, xd, gd, Y, result, record]() -> Ref<Object> {
    Ref<Tensor> out = *result;
    if (record) {
      auto node = make_ref<ExpertMatmulNode>(self, r, xd, gd, gd ? Y : nullptr);
      node->save(source);
      node->save(xin);
      if (gin) node->save(gin);
      node->connect({source.get(), xin.get(), gin.get()});
      attach(out, node);
    }
    return Ref<Object>(out.get());
  };
  return run_experts(*this, r, SW_PURPOSE_PROJECTION, each, finish, publish);
}

}  // namespace sw
