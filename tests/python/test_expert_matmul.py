"""The expert-indexed matmul over a TiledEvictable (sw_tiled_expert_matmul),
checked against PyTorch: values, gates, per-choice inputs, gradients, the
residency rules it shares with projection, and its errors."""
import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import carriers
from conftest import exact, held

E, N, K, T, k = 6, 5, 7, 4, 2
IDS = [[0, 3], [3, 5], [1, 0], [5, 5]]  # token 3 picks expert 5 twice; experts 2 and 4 unused


def experts_tiled(weights, secondary=carriers.Host, policy=None, primary=None):
    """A TiledEvictable of one expert per tile holding `weights` (E, N, K),
    row-major as nn.Linear(K, N) weights: the first-mode-fastest (K, N, E)
    tensor, grid (1, 1, E), tile (K, N, 1). Written with update_async and
    evicted, so every expert starts on the secondary tier."""
    dtype = sw.from_dlpack(weights[:1, :1, :1].contiguous()).dtype
    e = weights.shape[0]
    te = sw.TiledEvictable(carriers.CPU(0, dtype=dtype) if primary is None else primary,
                           secondary(weights.numel(), dtype=dtype),
                           (1, 1, e), (weights.shape[2], weights.shape[1], 1), residency_policy=policy)
    full = te.full_tensor()
    for i in range(e):  # one expert at a time: within any budget
        te.update_async(full, sw.from_dlpack(weights[i:i + 1].permute(2, 1, 0)), sw.TileSelection([[0], [0], [i]])).wait()
    te.evict(sw.TileSelection([[0], [0], list(range(e))]))
    return te, full


def as_sw(t):
    return sw.from_dlpack(t.detach().contiguous())


def reference(x, w, ids, gates=None):
    """PyTorch: y[t, j] = x[t, (j)] @ w[ids[t, j]].T, summed with the gates."""
    ids = torch.as_tensor(ids)
    rows = []
    for t in range(ids.shape[0]):
        rows.append(torch.stack([(x[t, j] if x.dim() == 3 else x[t]) @ w[ids[t, j]].T for j in range(ids.shape[1])]))
    y = torch.stack(rows)
    return y if gates is None else (gates[:, :, None] * y).sum(1)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(7)
    return torch.randn(E, N, K, generator=g), torch.randn(T, K, generator=g), torch.rand(T, k, generator=g)


def test_each_token_is_multiplied_by_its_experts(data):
    w, x, _ = data
    te, full = experts_tiled(w)
    y = te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(IDS))).wait()
    assert y.shape == (T, k, N) and y.dtype is sw.float32
    np.testing.assert_allclose(y.numpy(), reference(x, w, IDS).numpy(), rtol=1e-5, atol=1e-5)
    # The experts used are now primary (no policy: as a projection); the others never moved.
    assert te.primary_tiles == sw.TileSet([(0, 0, e) for e in (0, 1, 3, 5)])
    assert te.tile_state((0, 0, 2)).location == "secondary"


def test_gates_weight_the_sum_of_a_tokens_experts(data):
    w, x, gates = data
    te, full = experts_tiled(w)
    out = te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(IDS, dtype=torch.int32)), as_sw(gates)).wait()
    assert out.shape == (T, N)
    np.testing.assert_allclose(out.numpy(), reference(x, w, IDS, gates).numpy(), rtol=1e-5, atol=1e-5)


def test_one_input_row_per_choice(data):
    w, _, _ = data
    xs = torch.randn(T, k, K, generator=torch.Generator().manual_seed(3))
    te, full = experts_tiled(w)
    y = te.expert_matmul(full, as_sw(xs), as_sw(torch.tensor(IDS))).wait()
    np.testing.assert_allclose(y.numpy(), reference(xs, w, IDS).numpy(), rtol=1e-5, atol=1e-5)


def test_resident_and_missing_experts_give_the_same_values(data):
    w, x, gates = data
    te, full = experts_tiled(w, secondary=carriers.File)
    te.promote(sw.TileSet([(0, 0, 3), (0, 0, 5)]))  # two resident, two read during the call
    out = te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(IDS)), as_sw(gates)).wait()
    np.testing.assert_allclose(out.numpy(), reference(x, w, IDS, gates).numpy(), rtol=1e-5, atol=1e-5)


def test_a_resident_call_is_done_when_it_returns(data):
    """With every expert resident and nothing to move, the call computes on
    the calling thread: the await is done on return, the values the same."""
    w, x, gates = data
    te, full = experts_tiled(w)
    ids = as_sw(torch.tensor(IDS))
    first = te.expert_matmul(full, as_sw(x), ids, as_sw(gates)).wait()  # reads the experts
    a = te.expert_matmul(full, as_sw(x), ids, as_sw(gates))
    assert a.done()
    assert np.array_equal(a.wait().numpy(), first.numpy())


def test_one_tokens_experts_in_one_job_equal_plain_matmuls_bit_for_bit():
    """One token through three resident experts large enough for the
    compute threads (the products run as one job, their column units
    shared across the threads): each expert's row equals sw.matmul of the
    token by that expert's matrix, bit for bit, and so do the input's
    gradient, the sum of the backward's products on the same tiles."""
    g = torch.Generator().manual_seed(11)
    e, n, kk = 4, 1024, 1536
    w = torch.randn(e, n, kk, generator=g).to(torch.bfloat16)
    x = torch.randn(1, kk, generator=g).to(torch.bfloat16)
    ids = [[2, 0, 3]]
    te, full = experts_tiled(w)
    te.promote(sw.TileSelection([[0], [0], list(range(e))]))
    a = te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(ids)), out_dtype=sw.float32)
    assert a.done()
    y = a.wait().numpy()
    for j, ex in enumerate(ids[0]):
        plain = sw.matmul(as_sw(x), sw.from_dlpack(w[ex].T), out_dtype=sw.float32).numpy()  # K fastest, as the tile
        assert np.array_equal(y[0, j], plain[0])
    # Backward: dx = sum_j dY_j W_j^T, each product on the expert's tile.
    sx = as_sw(x)
    sx.requires_grad = True
    out = te.expert_matmul(full, sx, as_sw(torch.tensor(ids)), out_dtype=sw.float32).wait()
    cot = torch.randn(1, 3, n, generator=g)
    out.backward(as_sw(cot))
    want = np.zeros((1, kk), dtype=np.float32)
    for j, ex in enumerate(ids[0]):
        dyj = as_sw(cot[:, j].to(torch.bfloat16))
        want += sw.matmul(dyj, as_sw(w[ex]), out_dtype=sw.float32).numpy()
    # x's gradient has x's dtype, bf16: within its one rounding (2^-8 relative).
    assert sx.grad.dtype is sw.bfloat16
    np.testing.assert_allclose(sx.grad.numpy().astype(np.float32), want, rtol=2.0 ** -8, atol=0)


@pytest.mark.parametrize("per_choice", [False, True])
def test_resident_and_read_calls_record_the_same_gradients_bit_for_bit(data, per_choice):
    """Forward and backward with every expert read from the secondary tier,
    against both computed on the calling thread with every expert resident:
    the same bits in the result and in every gradient."""
    w, x, gates = data
    if per_choice:
        x = torch.randn(T, k, K, generator=torch.Generator().manual_seed(5))
    cot = torch.randn(T, N, generator=torch.Generator().manual_seed(9))
    runs = []
    for resident in (False, True):
        te, full = experts_tiled(w.to(torch.bfloat16))
        if resident:
            te.promote(sw.TileSelection([[0], [0], list(range(E))]))
        full.requires_grad = True
        sx, sg = as_sw(x.to(torch.bfloat16)), as_sw(gates)
        sx.requires_grad = True
        sg.requires_grad = True
        a = te.expert_matmul(full, sx, as_sw(torch.tensor(IDS)), sg, out_dtype=sw.float32)
        if resident:
            assert a.done()
        out = a.wait()
        if not resident:  # the backward reads the experts again
            te.evict(sw.TileSelection([[0], [0], list(range(E))]))
        out.backward(as_sw(cot))
        runs.append([out.numpy(), sx.grad.numpy(), sg.grad.numpy(), full.grad.numpy()])
    for got, want in zip(runs[1], runs[0]):
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("per_choice", [False, True])
def test_gradients_of_experts_inputs_and_gates_match_pytorch(data, per_choice):
    w, x, gates = data
    if per_choice:
        x = torch.randn(T, k, K, generator=torch.Generator().manual_seed(5))
    te, full = experts_tiled(w)
    full.requires_grad = True
    sx, sg = as_sw(x), as_sw(gates)
    sx.requires_grad = True
    sg.requires_grad = True
    out = te.expert_matmul(full, sx, as_sw(torch.tensor(IDS)), sg).wait()
    cot = torch.randn(T, N, generator=torch.Generator().manual_seed(9))
    out.backward(as_sw(cot))

    tw, tx, tg = (v.clone().requires_grad_(True) for v in (w, x, gates))
    reference(tx, tw, IDS, tg).backward(cot)
    np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sg.grad.numpy(), tg.grad.numpy(), rtol=1e-5, atol=1e-5)
    # The experts' gradient is a tile-sparse TiledEvictable: unused experts are implicit zeros.
    gw = full.grad
    assert isinstance(gw.carrier, sw.TiledEvictable) and gw.shape == (K, N, E)
    assert [gw.carrier.tile_state((0, 0, e)).location == "implicit" for e in range(E)] == [
        False, False, True, False, True, False]
    np.testing.assert_allclose(gw.numpy(), tw.grad.permute(2, 1, 0).numpy(), rtol=1e-5, atol=1e-5)


def test_ungated_gradients_match_pytorch(data):
    w, x, _ = data
    te, full = experts_tiled(w)
    full.requires_grad = True
    sx = as_sw(x)
    sx.requires_grad = True
    y = te.expert_matmul(full, sx, as_sw(torch.tensor(IDS))).wait()
    cot = torch.randn(T, k, N, generator=torch.Generator().manual_seed(11))
    y.backward(as_sw(cot))
    tw, tx = w.clone().requires_grad_(True), x.clone().requires_grad_(True)
    reference(tx, tw, IDS).backward(cot)
    np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(full.grad.numpy(), tw.grad.permute(2, 1, 0).numpy(), rtol=1e-5, atol=1e-5)


def test_bf16_experts_within_the_rounding_bound(data):
    w, x, gates = data
    wb, xb = w.to(torch.bfloat16), x.to(torch.bfloat16)
    te, full = experts_tiled(wb)
    ids = as_sw(torch.tensor(IDS))
    y = te.expert_matmul(full, as_sw(xb), ids).wait()
    assert y.dtype is sw.bfloat16
    exact32 = reference(xb.double(), wb.double(), IDS)
    got = torch.from_dlpack(y).double()
    # One rounding of an f32 sum to bf16: half an ulp of 2^-8 relative.
    assert torch.all((got - exact32).abs() <= exact32.abs() * 2.0**-8 + 1e-6)
    # out_dtype float32: the f32 sums, unrounded.
    y32 = te.expert_matmul(full, as_sw(xb), ids, as_sw(gates.to(torch.bfloat16)), out_dtype=sw.float32).wait()
    assert y32.dtype is sw.float32
    np.testing.assert_allclose(y32.numpy(), reference(xb.double(), wb.double(), IDS, gates.to(torch.bfloat16).double()),
                               rtol=1e-5, atol=1e-5)


def test_under_an_lru_budget_every_step_is_exact_and_the_budget_holds(data):
    w, _, _ = data
    lru = sw.LRUPolicy(3)
    te, full = experts_tiled(w, secondary=carriers.File, policy=lru)
    rng = np.random.default_rng(1)
    for step in range(12):
        ids = rng.integers(0, E, size=(2, k))
        x = torch.randn(2, K, generator=torch.Generator().manual_seed(step))
        y = te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(ids))).wait()
        np.testing.assert_allclose(y.numpy(), reference(x, w, ids.tolist()).numpy(), rtol=1e-5, atol=1e-5)
        assert len(te.primary_tiles) <= 3
    stats = lru.stats()
    assert stats["requests"] == 12 and stats["hits"] + stats["misses"] > 0


def test_pending_calls_follow_the_projection_rules(data):
    w, x, _ = data
    te, full = experts_tiled(w, secondary=carriers.File)
    ids = as_sw(torch.tensor(IDS))
    with held(te) as caught:  # the first expert read stays in flight
        h = te.expert_matmul(full, as_sw(x), ids)
        caught()
        assert not h.done()
        with pytest.raises(sw.StrideWeaveRuntimeError, match="not terminal"):
            te.release()
        # An eviction of a used expert is accepted and waits for the call.
        e = te.evict_async(sw.TileSet([(0, 0, 0)]))
        assert not e.done()
    y = h.wait()
    e.wait()
    np.testing.assert_allclose(y.numpy(), reference(x, w, IDS).numpy(), rtol=1e-5, atol=1e-5)
    assert te.tile_state((0, 0, 0)).location == "secondary"


def test_an_expert_owned_by_a_residency_request_is_refused(data):
    w, x, _ = data
    te, full = experts_tiled(w, secondary=carriers.File)
    with held(te) as caught:
        p = te.promote_async(sw.TileSet([(0, 0, 3)]))
        caught()
        version = te.version
        with pytest.raises(sw.StrideWeaveRuntimeError, match="residency request") as ei:
            te.expert_matmul(full, as_sw(x), as_sw(torch.tensor(IDS)))
        exact(ei, sw.StrideWeaveRuntimeError)
        assert te.version == version
    p.wait()


def test_bad_arguments_are_refused_before_any_work(data):
    w, x, gates = data
    te, full = experts_tiled(w)
    ids = as_sw(torch.tensor(IDS))
    before = (te.primary_tiles, te.version)

    def refused(cls, match, *args, **kwargs):
        with pytest.raises(cls, match=match) as ei:
            te.expert_matmul(*args, **kwargs)
        exact(ei, cls)
        assert (te.primary_tiles, te.version) == before

    refused(sw.StrideWeaveIndexError, r"expert id 6 at \(token 1, slot 1\) is outside \[0, 6\)", full, as_sw(x),
            as_sw(torch.tensor([[0, 3], [3, 6], [1, 0], [5, 5]])))
    refused(sw.StrideWeaveIndexError, r"expert id -1", full, as_sw(x), as_sw(torch.tensor([[-1, 0]] * T)))
    refused(sw.StrideWeaveTypeError, "x is f64, the experts f32", full, as_sw(x.double()), ids)
    refused(sw.StrideWeaveTypeError, "ids must be i32 or i64, not f32", full, as_sw(x), as_sw(torch.zeros(T, k)))
    refused(sw.StrideWeaveTypeError, "gates must be a float tensor", full, as_sw(x), ids, as_sw(torch.tensor(IDS)))
    refused(sw.StrideWeaveTypeError, "not f16", full, as_sw(x), ids, out_dtype=sw.float16)
    refused(sw.StrideWeaveValueError, r"x must be \(tokens, K\) = \(4, 7\)", full, as_sw(x[:, :6]), ids)
    refused(sw.StrideWeaveValueError, r"gates must be \(tokens, k\) = \(4, 2\), not \(4, 1\)", full, as_sw(x), ids,
            as_sw(gates[:, :1]))
    refused(sw.StrideWeaveValueError, r"ids must be \(tokens, k\)", full, as_sw(x), as_sw(torch.tensor([0, 1])))
    transposed = sw.Tensor(te, 0, sw.Layout((K, N, E), (N, 1, K * N)))  # each expert transposed in its tile
    refused(sw.StrideWeaveValueError, "not a view of it", transposed, as_sw(x), ids)
    refused(sw.StrideWeaveTypeError, "not by this TiledEvictable", as_sw(w.permute(2, 1, 0)), as_sw(x), ids)
    # Another geometry: experts interleaved, tile (1, O, I).
    other = sw.TiledEvictable(carriers.CPU(0), carriers.Host(E * N * K), (E, 1, 1), (1, N, K))
    with pytest.raises(sw.StrideWeaveValueError, match=r"grid \(1, 1, E\) and tile \(K, N, 1\); this TiledEvictable "
                                                         r"has grid \(6, 1, 1\) and tile \(1, 5, 7\)"):
        other.expert_matmul(other.full_tensor(), as_sw(x), ids)


def test_a_vulkan_primary_is_unsupported(data):
    try:
        primary = carriers.Vulkan(0)
    except NotImplementedError as e:
        pytest.skip(f"Vulkan unavailable: {e}")
    w, x, _ = data
    te = sw.TiledEvictable(primary, carriers.Host(E * N * K), (1, 1, E), (K, N, 1))
    with pytest.raises(sw.StrideWeaveNotImplementedError, match="only a CPU primary is supported") as ei:
        te.expert_matmul(te.full_tensor(), as_sw(x), as_sw(torch.tensor(IDS)))
    exact(ei, sw.StrideWeaveNotImplementedError)
