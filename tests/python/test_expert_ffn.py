"""The gated expert feed-forward (sw.expert_ffn over sw_tiled_expert_ffn),
checked against PyTorch's unfused layer: values for every activation and
dtype, gates, per-choice inputs, residency under LRU budgets, gradients, and
the facade's errors; and the fused gate_up form (up=None) against Hugging
Face transformers' own computation, bit for bit against the three-matrix
form, its gradients and its errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import strideweave as sw
from strideweave import carriers
from test_expert_matmul import experts_tiled, as_sw

E, H, Fd, T, k = 6, 8, 12, 4, 2
IDS = [[0, 3], [3, 5], [1, 0], [5, 2]]
ACTS = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


def weights(dtype=torch.float32, seed=11):
    """gate and up as nn.Linear(H, F) weights (E, F, H), down as nn.Linear(F, H) (E, H, F)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(E, *shape, generator=g) / shape[1] ** 0.5).to(dtype) for shape in ((Fd, H), (Fd, H), (H, Fd))]


def layer(ws, policy=None):
    """The three TiledEvictables and their full tensors, every expert on the secondary tier."""
    return [experts_tiled(w, policy=None if policy is None else policy()) for w in ws]


def reference(x, ws, ids, gates=None, act=F.silu):
    """The unfused layer in PyTorch, rounding where nn.Linear and the ops of the dtype round."""
    gate, up, down = ws
    ids = torch.as_tensor(ids)
    ys = []
    for t in range(ids.shape[0]):
        row = []
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            xt = x[t, j] if x.dim() == 3 else x[t]
            row.append(F.linear(act(F.linear(xt, gate[e])) * F.linear(xt, up[e]), down[e]))
        ys.append(torch.stack(row))
    y = torch.stack(ys)
    if gates is None:
        return y
    return (gates[:, :, None] * y.float()).sum(1).to(y.dtype)


def run(tiles, x, ids, gates=None, **kw):
    (_, g), (_, u), (_, d) = tiles
    a = sw.expert_ffn(as_sw(x), as_sw(torch.as_tensor(ids)), g, u, d, None if gates is None else as_sw(gates), **kw)
    assert isinstance(a, sw.AwaitProjection)
    return torch.from_dlpack(a.wait())


@pytest.mark.parametrize("act", sorted(ACTS))
def test_each_activation_matches_the_unfused_layer(act):
    ws = weights()
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(1))
    gates = torch.rand(T, k, generator=torch.Generator().manual_seed(2))
    tiles = layer(ws)
    y = run(tiles, x, IDS, activation=act)
    assert y.shape == (T, k, H)
    torch.testing.assert_close(y, reference(x, ws, IDS, act=ACTS[act]), rtol=1e-5, atol=1e-5)
    out = run(tiles, x, IDS, gates, activation=act)  # every expert used is resident now
    assert out.shape == (T, H)
    torch.testing.assert_close(out, reference(x, ws, IDS, gates, act=ACTS[act]), rtol=1e-5, atol=1e-5)


def test_bf16_rounds_as_the_unfused_layer():
    ws = weights(torch.bfloat16)
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    gates = torch.softmax(torch.randn(T, k, generator=torch.Generator().manual_seed(4)), -1)
    tiles = layer(ws)
    out = run(tiles, x, IDS, gates)
    assert out.dtype == torch.bfloat16
    # The same computation through StrideWeave's own unfused ops, bit for bit.
    (gt, gf), (ut, uf), (dt, df) = tiles
    X, I = as_sw(x), as_sw(torch.tensor(IDS))
    h = sw.silu(gt.expert_matmul(gf, X, I).wait()) * ut.expert_matmul(uf, X, I).wait()
    y = torch.from_dlpack(dt.expert_matmul(df, h, I).wait())
    assert torch.equal(out, (gates[:, :, None] * y.float()).sum(1).to(torch.bfloat16))
    # And PyTorch's within bf16 rounding (its silu's exp differs by an ulp of f32 at most).
    torch.testing.assert_close(out.float(), reference(x, ws, IDS, gates).float(), rtol=2 ** -7, atol=2 ** -7)
    f32 = run(tiles, x, IDS, gates, out_dtype=sw.float32)
    assert f32.dtype == torch.float32
    torch.testing.assert_close(f32.to(torch.bfloat16), out, rtol=2 ** -7, atol=2 ** -7)


def test_one_input_row_per_choice():
    ws = weights()
    xs = torch.randn(T, k, H, generator=torch.Generator().manual_seed(5))
    y = run(layer(ws), xs, IDS)
    torch.testing.assert_close(y, reference(xs, ws, IDS), rtol=1e-5, atol=1e-5)


def test_an_lru_budget_streams_the_rest_and_holds():
    ws = weights()
    tiles = layer(ws, policy=lambda: sw.LRUPolicy(2))
    g = torch.Generator().manual_seed(6)
    for _ in range(8):
        ids = torch.randint(0, E, (T, k), generator=g)
        x = torch.randn(T, H, generator=g)
        torch.testing.assert_close(run(tiles, x, ids), reference(x, ws, ids), rtol=1e-5, atol=1e-5)
        for te, _ in tiles:
            assert len(te.primary_tiles) <= 2


def test_a_resident_call_is_done_on_return():
    ws = weights()
    tiles = layer(ws)
    x = torch.randn(T, H)
    run(tiles, x, IDS)
    (_, g), (_, u), (_, d) = tiles
    a = sw.expert_ffn(as_sw(x), as_sw(torch.tensor(IDS)), g, u, d)
    assert a.done()


def test_gradients_are_the_unfused_layers():
    ws = weights()
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(8))
    gates = torch.rand(T, k, generator=torch.Generator().manual_seed(9))
    tiles = layer(ws)
    X, G = as_sw(x), as_sw(gates)
    X.requires_grad = True
    G.requires_grad = True
    (_, gf), (_, uf), (_, df) = tiles
    out = sw.expert_ffn(X, as_sw(torch.tensor(IDS)), gf, uf, df, G).wait()
    cot = torch.randn(T, H, generator=torch.Generator().manual_seed(10))
    out.backward(as_sw(cot))
    xt, gt = x.clone().requires_grad_(), gates.clone().requires_grad_()
    reference(xt, ws, IDS, gt).backward(cot)
    torch.testing.assert_close(torch.from_dlpack(X.grad), xt.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.from_dlpack(G.grad), gt.grad, rtol=1e-4, atol=1e-5)


def hf_fused_weights(dtype=torch.float32, seed=12):
    """Hugging Face transformers 5's fused experts: gate_up_proj (E, 2F, H) and down_proj (E, H, F)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(E, 2 * Fd, H, generator=g) / H ** 0.5).to(dtype), \
        (torch.randn(E, H, Fd, generator=g) / Fd ** 0.5).to(dtype)


def hf_reference(x, gate_up_proj, down_proj, ids, gates=None):
    """transformers' fused experts, token by token and choice by choice."""
    ids = torch.as_tensor(ids)
    ys = []
    for t in range(ids.shape[0]):
        row = []
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            xt = x[t, j] if x.dim() == 3 else x[t]
            gate, up = F.linear(xt, gate_up_proj[e]).chunk(2, dim=-1)
            row.append(F.linear(F.silu(gate) * up, down_proj[e]))
        ys.append(torch.stack(row))
    y = torch.stack(ys)
    if gates is None:
        return y
    return (gates[:, :, None] * y.float()).sum(1).to(y.dtype)


def close_relative(got, want, rtol):
    """Every element within rtol of the largest magnitude of want."""
    torch.testing.assert_close(got, want, rtol=rtol, atol=rtol * float(want.abs().max()))


def test_fused_gate_up_matches_transformers():
    w_gu, w_down = hf_fused_weights()
    (gu_te, gu), (_, d) = experts_tiled(w_gu), experts_tiled(w_down)
    assert gu_te.tile_shape == (H, 2 * Fd, 1)
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(13))
    gates = torch.softmax(torch.randn(T, k, generator=torch.Generator().manual_seed(14)), -1)
    X, I = as_sw(x), as_sw(torch.tensor(IDS))
    y = torch.from_dlpack(sw.expert_ffn(X, I, gu, None, d).wait())  # every expert read
    assert y.shape == (T, k, H)
    close_relative(y, hf_reference(x, w_gu, w_down, IDS), 1e-5)
    a = sw.expert_ffn(X, I, gu, None, d, as_sw(gates))  # every expert used resident: done on return
    assert a.done()
    out = torch.from_dlpack(a.wait())
    close_relative(out, hf_reference(x, w_gu, w_down, IDS, gates), 1e-5)
    xs = torch.randn(T, k, H, generator=torch.Generator().manual_seed(15))
    close_relative(torch.from_dlpack(sw.expert_ffn(as_sw(xs), I, gu, None, d).wait()),
                   hf_reference(xs, w_gu, w_down, IDS), 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_gate_up_equals_the_three_matrices_bit_for_bit(dtype):
    w_gu, w_down = hf_fused_weights(dtype)
    fused = [experts_tiled(w_gu), experts_tiled(w_down, policy=sw.LRUPolicy(2))]
    three = layer([w_gu[:, :Fd], w_gu[:, Fd:], w_down])  # the first F output features are the gate's
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(16)).to(dtype)
    gates = torch.rand(T, k, generator=torch.Generator().manual_seed(17))
    for g in (None, gates, gates):
        want = run(three, x, IDS, g)
        got = torch.from_dlpack(
            sw.expert_ffn(as_sw(x), as_sw(torch.tensor(IDS)), fused[0][1], None, fused[1][1],
                          None if g is None else as_sw(g)).wait())
        assert got.dtype == want.dtype
        assert torch.equal(got, want)
    assert len(fused[1][0].primary_tiles) <= 2


def test_fused_gate_up_gradients_are_transformers():
    w_gu, w_down = hf_fused_weights()
    (_, gu), (_, d) = experts_tiled(w_gu), experts_tiled(w_down)
    gu.requires_grad = True
    x = torch.randn(T, H, generator=torch.Generator().manual_seed(18))
    gates = torch.rand(T, k, generator=torch.Generator().manual_seed(19))
    X, G = as_sw(x), as_sw(gates)
    X.requires_grad = True
    G.requires_grad = True
    out = sw.expert_ffn(X, as_sw(torch.tensor(IDS)), gu, None, d, G).wait()
    cot = torch.randn(T, H, generator=torch.Generator().manual_seed(20))
    out.backward(as_sw(cot))
    xt, gt, wt = x.clone().requires_grad_(), gates.clone().requires_grad_(), w_gu.clone().requires_grad_()
    hf_reference(xt, wt, w_down, IDS, gt).backward(cot)
    torch.testing.assert_close(torch.from_dlpack(X.grad), xt.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.from_dlpack(G.grad), gt.grad, rtol=1e-4, atol=1e-5)
    # The gate_up experts' gradient, (H, 2F, E) as the tiles lie: both halves (expert 4, unused, zeros).
    torch.testing.assert_close(torch.from_numpy(gu.grad.numpy()), wt.grad.permute(2, 1, 0), rtol=1e-4, atol=1e-5)


def test_fused_gate_up_errors():
    w_gu, w_down = hf_fused_weights()
    (gu_te, gu), (_, d) = experts_tiled(w_gu), experts_tiled(w_down)
    (_, g), (_, u), _ = layer(weights())
    x, ids = as_sw(torch.randn(T, H)), as_sw(torch.tensor(IDS))
    with pytest.raises(sw.StrideWeaveValueError, match=r"the down experts must be grid \(1, 1, 6\) and tile \(6, 8, 1\)"):
        sw.expert_ffn(x, ids, g, None, d)  # a gate (H, F) taken for a gate_up: F / 2 is not down's F
    odd = experts_tiled(torch.randn(E, 2 * Fd + 1, H))[1]
    with pytest.raises(sw.StrideWeaveValueError, match=r"gate_up experts .* an odd second extent"):
        sw.expert_ffn(x, ids, odd, None, d)
    with pytest.raises(sw.StrideWeaveValueError, match="the up experts must have the gate experts' geometry"):
        sw.expert_ffn(x, ids, gu, u, d)
    assert len(gu_te.primary_tiles) == 0


def test_errors_name_the_argument():
    ws = weights()
    tiles = layer(ws)
    (gte, g), (_, u), (_, d) = tiles
    x, ids = as_sw(torch.randn(T, H)), as_sw(torch.tensor(IDS))
    with pytest.raises(sw.StrideWeaveValueError, match="activation must be one of 'silu'"):
        sw.expert_ffn(x, ids, g, u, d, activation="swish")
    with pytest.raises(sw.StrideWeaveTypeError, match="out_dtype must be a strideweave dtype"):
        sw.expert_ffn(x, ids, g, u, d, out_dtype="float32")
    with pytest.raises(sw.StrideWeaveTypeError, match="down must be the full tensor of a TiledEvictable"):
        sw.expert_ffn(x, ids, g, u, x)
    with pytest.raises(sw.StrideWeaveValueError, match="the down experts must be grid"):
        sw.expert_ffn(x, ids, g, u, u)
    with pytest.raises(sw.StrideWeaveIndexError, match="expert id 6 at"):
        sw.expert_ffn(x, as_sw(torch.tensor([[0, 6]] * T)), g, u, d)
    with pytest.raises(sw.StrideWeaveTypeError, match="x is f64, the experts f32"):
        sw.expert_ffn(as_sw(torch.randn(T, H, dtype=torch.float64)), ids, g, u, d)
    assert len(gte.primary_tiles) == 0
