// The gated expert feed-forward (sw_tiled_expert_ffn). One call is one
// TileRequest per TiledEvictable, submitted in product order (gate, up,
// down), so that the file tier's request slots read a missing expert's gate
// tile first, then its up tile, then its down tile. Their tile work feeds
// one state machine per call, each expert u going
//
//   gate tile:  a_u = x_u gate_u
//   up tile:    b_u = x_u up_u
//   both:       h_u = act(a_u) * b_u
//   down tile:  y_u = h_u down_u   (once h_u is there too)
//
// as soon as its inputs are there: the experts resident at the start as one
// job per product, each missing one as its reads land. In the fused form
// (one gate_up TiledEvictable, tile (H, 2F, 1), and no up) the call is two
// requests, gate_up then down, and a gate_up tile gives both a_u and b_u at
// once: its two halves are the gate's and the up's dense (H, F) matrices,
// multiplied in place as two products of one job (the same products, on
// the same bytes, as the two TiledEvictables' would be). A down tile that
// lands before its expert's h waits (the down request keeps it pinned, and
// the call's StoragePin keeps its bytes) until the gate or up work that
// completes h multiplies it. The requests are one CommitGroup: none commits
// until all have done their work (by then every product ran), the group
// then publishes the gated sum, and all commit together; a failure
// anywhere fails all of them with nothing committed. The call's await is the
// group's: it completes once all are terminal, and nothing of the call
// changes after it. When every expert is resident in each TiledEvictable and
// no plan moves anything, the requests run inline, one after another, and
// the await is terminal on return.
//
// Values are rounded where the unfused layer rounds them (three expert
// matmuls, sw_unary, sw_binary): a and b to the experts' dtype, act(a)
// and the product too, y to the result's dtype, and the gated sum (f32,
// in choice order) once. With grad mode on and an input requiring grad the
// call runs that composition itself (blocking), which records the nodes; in
// the fused form its first expert matmul is the gate_up one, (T, k, 2F),
// and a and b are its two halves (ops::slice, differentiable).
#include "carriers/tiled/expert_ffn.hpp"

#include <array>
#include <mutex>

#include "base/error.hpp"
#include "base/text.hpp"
#include "carriers/tiled/experts.hpp"
#include "core/dtype.hpp"
#include "ops/op_util.hpp"

namespace sw {

namespace {

using namespace experts;

constexpr const char* kOp = "expert_ffn";

// What the tiles of a request give: the gate product a, the up product b,
// or (a fused gate_up tile) both.
enum class Part { kGate, kUp, kGateUp };

// The kernel op of an activation (the op table's), for the activations the
// expert feed-forward takes.
UnaryOp activation_kernel(ops::Unary a) {
  switch (a) {
    case ops::Unary::kSilu: case ops::Unary::kGelu: case ops::Unary::kRelu: case ops::Unary::kSigmoid:
    case ops::Unary::kTanh: return ops::kernel_of(a);
    default: break;
  }
  value_error(std::string(kOp) + ": the activation must be silu, gelu, relu, sigmoid or tanh, not " + ops::op_name(a));
}

// One call's state. The mutex guards the per-expert progress; the products
// themselves run under `serial` (one job at a time on the compute threads).
struct Call {
  std::shared_ptr<const Routing> r;  // K = H, N = F (the gate's and up's products)
  int64_t H = 0, F = 0;
  sw_dtype_t dt = SW_DTYPE_INVALID, acc = SW_DTYPE_INVALID, out = SW_DTYPE_INVALID;  // dt: operand_dtype
  UnaryOp act = UnaryOp::kSilu;
  ComputeBackend* be = nullptr;
  Ref<Runtime> rt;
  Ref<Tensor> x;  // dense (x_rows, H), the experts' dtype
  Ref<Tensor> Y;  // (T, k, H) of the accumulation dtype: y per slot, rounded to `out`
  Ref<Tensor> gates;  // dense (T, k), accumulation dtype, or null
  std::shared_ptr<std::mutex> serial = std::make_shared<std::mutex>();

  std::mutex m;
  std::vector<Ref<Tensor>> a, b;  // per expert: (m_u, F) accumulation-dtype products, once done
  std::vector<Ref<Tensor>> h;     // per expert: (m_u, F) activations of the experts' dtype, once done
  std::vector<Ref<Tensor>> down;  // per expert: its down tile's (F, H) view, waiting for h
  std::vector<StoragePin> down_pins;
  size_t down_left = 0;  // experts whose down product has not run

  int64_t m_of(size_t u) const { return static_cast<int64_t>(r->slots[u].size()); }

  // a, b or (gate_up tiles) both of some experts, as one job; then h of
  // those whose other half is there, then y of those whose down tile is
  // waiting. A gate_up tile's (H, 2F) matrix is the gate's (H, F) matrix
  // followed by the up's: each product reads its half in place.
  void gate_up(const Experts& experts, Part part) {
    const size_t n = part == Part::kGateUp ? 2 : 1;  // products per expert
    Products p;
    for (const auto& [u, W] : experts) {
      Ref<Tensor> xu = rows_of(*be, rt, x, r->x_rows(), H, r->x_pick(u));
      for (size_t i = 0; i < n; ++i)
        p.add(xu, n == 1 ? W : W->view(W->offset() + static_cast<int64_t>(i) * H * F, Layout::dense({H, F})),
              be->empty(rt, acc, {m_of(u), F}));
    }
    p.run(*be);
    std::vector<std::array<Ref<Tensor>, 2>> halves;
    std::vector<size_t> ready;
    {
      std::lock_guard<std::mutex> lock(m);
      for (size_t i = 0; i < experts.size(); ++i) {
        const size_t u = experts[i].first;
        if (part != Part::kUp) a[u] = p.ops[i * n][2];
        if (part != Part::kGate) b[u] = p.ops[i * n + n - 1][2];
        if (!a[u] || !b[u]) continue;
        ready.push_back(u);
        halves.push_back({a[u], b[u]});
        a[u] = b[u] = nullptr;
      }
    }
    activate(ready, halves);
  }

  // h = act(a) * b, rounded as sw_unary and sw_binary round them.
  void activate(const std::vector<size_t>& us, const std::vector<std::array<Ref<Tensor>, 2>>& halves) {
    if (us.empty()) return;
    const sw_dtype_t compute = compute_dtype(dt);
    std::vector<Ref<Tensor>> hs;
    for (const auto& [au, bu] : halves) {
      Ref<Tensor> s = ops::as_dtype(ops::unary_raw(act, ops::as_dtype(au, dt), compute), dt);
      hs.push_back(ops::as_dtype(ops::binary_raw(BinaryOp::kMul, s, ops::as_dtype(bu, dt), compute), dt));
    }
    Downs waiting;
    {
      std::lock_guard<std::mutex> lock(m);
      for (size_t i = 0; i < us.size(); ++i) {
        const size_t u = us[i];
        if (down[u])
          waiting.push_back({u, hs[i], down[u]});
        else
          h[u] = hs[i];
      }
    }
    multiply_down(waiting);
  }

  // Down tiles that landed: y of those whose h is there, the others wait.
  void down_tiles(const Experts& experts) {
    Downs ready;
    {
      std::lock_guard<std::mutex> lock(m);
      for (const auto& [u, W] : experts) {
        if (h[u]) {
          ready.push_back({u, h[u], W});
        } else {
          down[u] = W;
          down_pins[u] = StoragePin(W->carrier(), kOp);
        }
      }
    }
    multiply_down(ready);
  }

  // y_u = h_u down_u, rounded to `out`, into its slots of Y.
  struct Down {
    size_t u;
    Ref<Tensor> h, W;
  };
  using Downs = std::vector<Down>;
  void multiply_down(const Downs& downs) {
    if (downs.empty()) return;
    Products p;
    for (const Down& d : downs) p.add(d.h, d.W, be->empty(rt, acc, {m_of(d.u), H}));
    p.run(*be);
    const int64_t S = r->S();
    for (size_t i = 0; i < downs.size(); ++i) {
      Ref<Tensor> y = p.ops[i][2];
      if (out != acc) y = ops::copy_as(*ops::copy_as(*y, out), acc);
      scatter_rows(*y, *Y, S, H, r->slots[downs[i].u]);
    }
    std::lock_guard<std::mutex> lock(m);
    for (const Down& d : downs) {
      h[d.u] = nullptr;
      down[d.u] = nullptr;
      down_pins[d.u].reset();
      --down_left;
    }
  }

  // The result: Y as (T, k, H), or its gated sum (T, H); `out` either way.
  // Published once every request did its work, by when every down product
  // ran (each expert's ran in whichever work completed its inputs last).
  Ref<Tensor> result() {
    {
      std::lock_guard<std::mutex> lock(m);
      if (down_left != 0) internal_error(std::string(kOp) + ": publishing with down products outstanding");
    }
    if (!gates) return ops::copy_as(*Y, out);
    auto sum = be->empty(rt, acc, {r->T, H});
    Routing rn = *r;
    rn.N = H;
    if (acc == SW_DTYPE_F64)
      gated_sum<double>(rn, data<double>(*Y), data<double>(*gates), data<double>(*sum));
    else
      gated_sum<float>(rn, data<float>(*Y), data<float>(*gates), data<float>(*sum));
    return ops::as_dtype(sum, out);
  }
};

// The unfused layer: what the call computes, recorded for autograd.
Ref<Tensor> composed(const ExpertFfnWeights& w, const Ref<Tensor>& x, const Ref<Tensor>& ids,
                     const Ref<Tensor>& gates, sw_dtype_t out, ops::Unary activation, sw_dtype_t acc) {
  const sw_dtype_t dt = w.gate->dtype();
  Ref<Tensor> a, b;
  if (w.fused()) {
    // gate, up = (x @ gate_up).chunk(2, -1): the halves of the (T, k, 2F)
    // product, as views that carry the gradient back.
    Ref<Tensor> ab = wait_tensor(w.gate->expert_matmul(w.gate_full, x, ids, nullptr, dt));
    const int64_t F = ab->shape()[2] / 2;
    a = ops::slice(ab, 2, 0, F, 1);
    b = ops::slice(ab, 2, F, 2 * F, 1);
  } else {
    a = wait_tensor(w.gate->expert_matmul(w.gate_full, x, ids, nullptr, dt));
    b = wait_tensor(w.up->expert_matmul(w.up_full, x, ids, nullptr, dt));
  }
  Ref<Tensor> h = ops::binary(ops::Binary::kMul, ops::unary(activation, a), b);
  Ref<Tensor> y = wait_tensor(w.down->expert_matmul(w.down_full, h, ids, nullptr, out));
  if (!gates) return y;
  // 0 + the sum over j of gates[:, j] * y[:, j, :], in choice order (as
  // the fused call sums, signs of zeros included).
  const int64_t k = ids->shape()[1];
  Ref<Tensor> yf = ops::to_dtype(y, acc), g = ops::to_dtype(gates, acc);
  Ref<Tensor> sum = ops::zeros_like_shape(*yf, acc, {ids->shape()[0], y->shape()[2]});
  for (int64_t j = 0; j < k; ++j)
    sum = ops::binary(ops::Binary::kAdd, sum,
                      ops::binary(ops::Binary::kMul, ops::select(yf, 1, j), ops::unsqueeze(ops::select(g, 1, j), 1)));
  return ops::to_dtype(sum, out);
}

}  // namespace

Ref<Await> expert_ffn(const ExpertFfnWeights& w, const Ref<Tensor>& x, const Ref<Tensor>& ids,
                      const Ref<Tensor>& gates, sw_dtype_t out_dtype, ops::Unary activation) {
  const UnaryOp act = activation_kernel(activation);
  const bool fused = w.fused();
  if (fused != !w.up_full)
    value_error(std::string(kOp) + ": the up experts and their tensor must both be given, or both be null (the " +
                "fused gate_up form)");
  check_experts(*w.gate, *w.gate_full, kOp, fused ? "the gate_up experts" : "the gate experts");
  if (!fused) check_experts(*w.up, *w.up_full, kOp, "the up experts");
  check_experts(*w.down, *w.down_full, kOp, "the down experts");
  const TileGeometry &gg = w.gate->geometry(), &dg = w.down->geometry();
  const int64_t H = gg.tile[0], E = gg.grid[2];
  if (fused && gg.tile[1] % 2 != 0)
    value_error(std::string(kOp) + ": the gate_up experts (gate, with up null: the fused form) must be tile (H, 2F, " +
                "1), the gate's F output features then the up's; they have tile " + shape_text(gg.tile) +
                ", an odd second extent");
  const int64_t F = fused ? gg.tile[1] / 2 : gg.tile[1];
  if (!fused) {
    const TileGeometry& ug = w.up->geometry();
    if (ug.tile != gg.tile || ug.grid != gg.grid)
      value_error(std::string(kOp) + ": the up experts must have the gate experts' geometry, grid " +
                  shape_text(gg.grid) + " and tile " + shape_text(gg.tile) + "; they have grid " + shape_text(ug.grid) +
                  " and tile " + shape_text(ug.tile));
  }
  if (dg.grid != gg.grid || dg.tile[0] != F || dg.tile[1] != H)
    value_error(std::string(kOp) + ": the down experts must be grid " + shape_text(gg.grid) + " and tile " +
                shape_text({F, H, 1}) +
                (fused ? " (a half of the gate_up's (H, 2F), transposed)" : " (the gate's (H, F) transposed)") +
                "; they have grid " + shape_text(dg.grid) + " and tile " + shape_text(dg.tile));
  const sw_dtype_t dt = w.gate->dtype();
  if ((!fused && w.up->dtype() != dt) || w.down->dtype() != dt)
    type_error(std::string(kOp) + ": the experts must share one dtype; " + (fused ? "gate_up " : "gate ") +
               dtype_name(dt) + (fused ? "" : ", up " + std::string(dtype_name(w.up->dtype()))) + ", down " +
               dtype_name(w.down->dtype()));
  std::vector<StoragePin> pins;
  out_dtype = check_call(kOp, dt, out_dtype, *x, *ids, gates.get(), &pins);

  auto r = std::make_shared<Routing>();
  r->K = H;
  r->N = F;
  route(kOp, *ids, *x, gates.get(), E, "H", r.get());
  const sw_dtype_t acc = acc_dtype(dt);

  const bool record = grad_enabled() &&
                      (w.gate_full->requires_grad() || (w.up_full && w.up_full->requires_grad()) ||
                       w.down_full->requires_grad() || x->requires_grad() || (gates && gates->requires_grad()));
  refuse_quantized_grad(kOp, dt, record);
  if (record) {
    // Its expert matmuls commit together, or not at all.
    auto done = make_ref<Await>(w.down->runtime_ref(), SW_AWAIT_PROJECTION);
    Ref<Tensor> out;
    run_as_step([&] { out = composed(w, x, ids, gates, out_dtype, activation, acc); });
    done->succeed(Ref<Object>(out.get()));
    return done;
  }

  auto call = std::make_shared<Call>();
  call->r = r;
  call->H = H;
  call->F = F;
  call->dt = operand_dtype(dt);  // the dtype a, b and h are rounded to
  call->acc = acc;
  call->out = out_dtype;
  call->act = act;
  call->be = &backend_for(*w.gate->primary_carrier());
  call->rt = w.gate->runtime_ref();
  // Snapshots of the small operands: later writes to them cannot reach the call.
  call->x = ops::copy_as(*x, call->dt);
  call->gates = gates ? ops::copy_as(*gates, acc) : nullptr;
  call->Y = call->be->empty(call->rt, acc, {r->T, r->k, H});
  const size_t U = r->experts.size();
  call->a.resize(U);
  call->b.resize(U);
  call->h.resize(U);
  call->down.resize(U);
  call->down_pins.resize(U);
  call->down_left = U;

  // Each request's callbacks hold the call; the group holds the requests
  // until all are terminal. The result needs every product: the group's.
  auto await = make_ref<Await>(w.down->runtime_ref(), SW_AWAIT_PROJECTION);
  auto group = std::make_shared<CommitGroup>(w.down->runtime_ref(), await);
  group->publish = [call]() -> Ref<Object> { return Ref<Object>(call->result().get()); };
  auto side = [&](TiledEvictable& te, std::function<void(const Experts&)> each) {
    return request(te, make_ref<Await>(te.runtime_ref(), SW_AWAIT_PROJECTION), r, SW_PURPOSE_PROJECTION,
                   call->serial, std::move(each));
  };
  // In product order: gate and up (or gate_up), then down. A conflict in
  // any of them (a tile the call reads or its plan evicts covered by another
  // request) refuses the call before anything is submitted; one that failed
  // inline stops the call, the others never submitted.
  std::vector<std::shared_ptr<TileRequest>> reqs;
  if (fused) {
    reqs.push_back(side(*w.gate, [call](const Experts& e) { call->gate_up(e, Part::kGateUp); }));
  } else {
    reqs.push_back(side(*w.gate, [call](const Experts& e) { call->gate_up(e, Part::kGate); }));
    reqs.push_back(side(*w.up, [call](const Experts& e) { call->gate_up(e, Part::kUp); }));
  }
  reqs.push_back(side(*w.down, [call](const Experts& e) { call->down_tiles(e); }));
  group->submit(reqs);
  return await;
}

}  // namespace sw
