// The gated expert feed-forward over TiledEvictables of one expert per tile
// (sw_tiled_expert_ffn): down(act(x gate) * (x up)) per token and choice, on
// the tiles' memory in place, each expert's three products computed as soon
// as its tiles are there, and their gated sum. Gate and up are two
// TiledEvictables, or one fused gate_up (Hugging Face transformers 5's
// `gate_up_proj`: the gate's F output features, then the up's F).
#pragma once

#include "async/await.hpp"
#include "carriers/tiled/tiled_carrier.hpp"
#include "ops/ops.hpp"

namespace sw {

struct ExpertFfnWeights {
  // gate (w1) and up (w3): tile (H, F, 1); down (w2): tile (F, H, 1); each
  // with its full tensor. The fused form: up and up_full null, and gate the
  // gate_up experts, tile (H, 2F, 1), tile e's first H*F elements expert
  // e's gate matrix and the next H*F its up matrix.
  Ref<TiledEvictable> gate, up, down;
  Ref<Tensor> gate_full, up_full, down_full;

  bool fused() const { return !up; }
};

// x (T, H) or (T, k, H), ids (T, k), gates (T, k) or null; out_dtype
// SW_DTYPE_INVALID for the experts' dtype; `activation` one of kSilu, kGelu,
// kRelu, kSigmoid or kTanh (VALUE otherwise). Returns a PROJECTION await (see the header).
Ref<Await> expert_ffn(const ExpertFfnWeights& w, const Ref<Tensor>& x, const Ref<Tensor>& ids,
                      const Ref<Tensor>& gates, sw_dtype_t out_dtype, ops::Unary activation);

}  // namespace sw
