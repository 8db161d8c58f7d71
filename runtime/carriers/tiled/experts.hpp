// What the expert ops over a TiledEvictable of one expert per tile share
// (expert_matmul.cpp, expert_ffn.cpp): a call's routing (ids -> the distinct
// experts and each one's slots), row blocks of dense host tensors, products
// run as one job, and the one TileRequest that carries a call on one
// TiledEvictable (the policy consulted with the experts it uses, resident
// experts computed at once, missing ones as each read lands).
//
// The experts tensor has grid (1, 1, E) and tile (K, N, 1): tile e is expert
// e's (K, N) matrix, first mode fastest, one contiguous buffer (a row-major
// (E, N, K) weight file is exactly this). Slot s = t + T * j is token t's
// j-th choice (first mode fastest over (T, k)).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "async/await.hpp"
#include "carriers/tiled/tile_request.hpp"
#include "carriers/tiled/tiled_carrier.hpp"
#include "core/dtype.hpp"
#include "ops/backend.hpp"

namespace sw::experts {

// One call's routing.
struct Routing {
  int64_t T = 0, k = 0, K = 0, N = 0;
  bool per_slot_x = false;                  // x is (T, k, K) rather than (T, K)
  std::vector<int64_t> ids;                 // per slot
  std::vector<int64_t> experts;             // distinct ids, by first slot
  std::vector<std::vector<int64_t>> slots;  // per distinct expert: its slots, in order
  int64_t S() const { return T * k; }
  int64_t x_rows() const { return per_slot_x ? T * k : T; }
  int64_t x_row(int64_t s) const { return per_slot_x ? s : s % T; }
  // The rows of x that expert u's slots multiply.
  std::vector<int64_t> x_pick(size_t u) const;
};

// Checks a call's shapes (VALUE: ids (T, k); x (T, K) or (T, k, K), r->K
// its extent `kname` names; gates (T, k) unless null) and routes ids (INDEX
// for an id outside [0, E), naming token and slot): fills r's T, k,
// per_slot_x, ids, experts and slots. The dtypes were checked
// (check_call); `op` names the operation in messages.
void route(const char* op, const Tensor& ids, const Tensor& x, const Tensor* gates, int64_t E, const char* kname,
           Routing* r);

// Checks that `full` is the full tensor of `te`, a live TiledEvictable of
// one expert per tile (grid (1, 1, E), tile (K, N, 1)) of a float or
// block-quantized dtype with a CPU primary tier: STATE, TYPE, VALUE, UNSUPPORTED as for
// sw_tiled_expert_matmul; `what` names the experts in messages ("the
// experts", "the down experts").
void check_experts(const TiledEvictable& te, const Tensor& full, const char* op, const std::string& what);

// TYPE unless `t` is a tensor on a CPU carrier; `what` names the operand.
void check_host_operand(const Tensor& t, const char* op, const char* what);

// The checks of a call's small operands, in order: the result's dtype
// (`out_dtype`: SW_DTYPE_INVALID for the experts' `dt`, f32 allowed for half
// experts; TYPE otherwise), the operands' carriers (ops::check_operands:
// their storage is pinned into `pins`), CPU x, ids and gates, x of the
// experts' dtype (any float dtype for block-quantized experts, whose
// products take f32 and give f32, bf16 or f16), i32/i64 ids and float gates
// (TYPE). `gates` may be null. Returns the result's dtype.
sw_dtype_t check_call(const char* op, sw_dtype_t dt, sw_dtype_t out_dtype, const Tensor& x, const Tensor& ids,
                      const Tensor* gates, std::vector<StoragePin>* pins);

// out[t, n] = sum over j of gate[t, j] * Y[t, j, n], j in order: Y (T, k,
// N) and gate (T, k) dense, out (T, N), all of the accumulation dtype A.
template <typename A>
void gated_sum(const Routing& r, const A* Y, const A* gate, A* out) {
  const int64_t S = r.S();
  for (int64_t n = 0; n < r.N; ++n)
    for (int64_t t = 0; t < r.T; ++t) {
      A sum = 0;
      for (int64_t j = 0; j < r.k; ++j) sum += gate[t + r.T * j] * Y[t + r.T * j + S * n];
      out[t + r.T * n] = sum;
    }
}

// UNSUPPORTED when a call on block-quantized `dt` experts would record
// gradients (`record`): quantized experts are for inference.
void refuse_quantized_grad(const char* op, sw_dtype_t dt, bool record);

// The accumulation dtype of a product of `dt` operands.
inline sw_dtype_t acc_dtype(sw_dtype_t dt) { return dt == SW_DTYPE_F64 ? SW_DTYPE_F64 : SW_DTYPE_F32; }
// The dtype of the values multiplied by `dt` experts (x, the activations):
// their own for float experts, f32 for block-quantized ones.
inline sw_dtype_t operand_dtype(sw_dtype_t dt) { return dtype_is_quantized(dt) ? SW_DTYPE_F32 : dt; }

template <typename A>
A* data(const Tensor& t) {
  return reinterpret_cast<A*>(t.host_base());
}

bool consecutive(const std::vector<int64_t>& v);

// Rows `pick[r]` of `src`, a dense (rows, cols) host tensor, as a new dense
// (pick.size(), cols) tensor of its dtype.
Ref<Tensor> gather_rows(ComputeBackend& be, const Ref<Runtime>& rt, const Tensor& src, int64_t rows, int64_t cols,
                        const std::vector<int64_t>& pick);
// The same rows as a (pick.size(), cols) operand: a view of `src` when they
// are consecutive rows, else a gathered copy.
Ref<Tensor> rows_of(ComputeBackend& be, const Ref<Runtime>& rt, const Ref<Tensor>& src, int64_t rows, int64_t cols,
                    const std::vector<int64_t>& pick);
// Writes the dense (pick.size(), cols) block `block` to rows `pick[r]` of
// `dst`, a dense (rows, cols) host tensor of the same dtype.
void scatter_rows(const Tensor& block, const Tensor& dst, int64_t rows, int64_t cols, const std::vector<int64_t>& pick);

// The (K, N) matrix view of an expert's tile buffer.
Ref<Tensor> expert_matrix(const Ref<Carrier>& tile, int64_t K, int64_t N);
Ref<Tensor> transposed(const Ref<Tensor>& m);

// The experts one call of a request's work gets: (u, W_u), the index u
// into Routing::experts and the (K, N) matrix view of that expert's tile.
using Experts = std::vector<std::pair<size_t, Ref<Tensor>>>;

// Products (a, b, out) run as one job (ComputeBackend::matmuls: a token's
// experts share the compute threads in one region).
struct Products {
  std::vector<std::array<Ref<Tensor>, 3>> ops;

  void add(Ref<Tensor> a, Ref<Tensor> b, Ref<Tensor> out) {
    ops.push_back({std::move(a), std::move(b), std::move(out)});
  }
  void run(ComputeBackend& be) const;
};

// The TileRequest of one call on `te` over the distinct experts of `r` (tile
// ordinal e is expert e), not yet submitted: the policy's plan for `purpose`
// (or, without a policy, the experts promoted as a projection's tiles),
// run_inline set, and tile_work calling `each` with the experts available
// (the tiles' (K, N) matrix views; calls serialised by `serial`, which the
// caller may share between requests whose work shares the compute threads).
// The caller sets publish or cleanup and submits it (or makes it a member
// of a CommitGroup).
std::shared_ptr<TileRequest> request(TiledEvictable& te, const Ref<Await>& await,
                                     const std::shared_ptr<const Routing>& r, sw_residency_purpose_t purpose,
                                     std::shared_ptr<std::mutex> serial, std::function<void(const Experts&)> each);

// The result of a terminal await as a tensor (raising its failure).
Ref<Tensor> wait_tensor(const Ref<Await>& a);

}  // namespace sw::experts
