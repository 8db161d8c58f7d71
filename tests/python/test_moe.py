"""The done-when test of the tensor surface: a Mixtral-style MoE block
(router linear, softmax, per-token top-2, renormalised gates, SwiGLU
experts w2(silu(w1 x) * w3 x), weighted sum) written with StrideWeave ops
alone matches PyTorch on the same weights, forward and backward."""
import numpy as np
import pytest
import strideweave as sw

torch = pytest.importorskip("torch")

T, D, H, E, K = 9, 8, 12, 4, 2


def weights(dtype):
    rng = np.random.default_rng(1501)
    return {
        "x": rng.standard_normal((T, D)).astype(dtype),
        "router": rng.standard_normal((D, E)).astype(dtype),
        "w1": (rng.standard_normal((E, D, H)) / np.sqrt(D)).astype(dtype),
        "w3": (rng.standard_normal((E, D, H)) / np.sqrt(D)).astype(dtype),
        "w2": (rng.standard_normal((E, H, D)) / np.sqrt(H)).astype(dtype),
        "r": rng.standard_normal((T, D)).astype(dtype),
    }


def moe_strideweave(x, router, w1, w3, w2):
    probs = sw.softmax(x @ router, dim=-1)              # (T, E)
    top, idx = sw.topk(probs, K, dim=-1)                # (T, K), int64 indices
    gates = top / top.sum(dim=-1, keepdim=True)         # renormalised
    dense = sw.scatter_add(sw.zeros(T, E, dtype=x.dtype), 1, idx, gates)  # (T, E)
    out = None
    for e in range(E):
        y = (sw.silu(x @ w1[e]) * (x @ w3[e])) @ w2[e]  # SwiGLU expert, (T, D)
        part = y * dense[:, e].unsqueeze(1)
        out = part if out is None else out + part
    return out


def moe_torch(x, router, w1, w3, w2):
    probs = torch.softmax(x @ router, dim=-1)
    top, idx = torch.topk(probs, K, dim=-1)
    gates = top / top.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(E):
        y = (torch.nn.functional.silu(x @ w1[e]) * (x @ w3[e])) @ w2[e]
        weight = (gates * (idx == e)).sum(dim=-1, keepdim=True)
        out = out + y * weight
    return out


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_moe_block_matches_torch_forward_and_backward(dtype, tol):
    w = weights(dtype)
    names = ["x", "router", "w1", "w3", "w2"]
    s = {n: sw.tensor(w[n]) for n in names}
    t = {n: torch.tensor(w[n], requires_grad=True) for n in names}
    for n in names:
        s[n].requires_grad = True

    out = moe_strideweave(*(s[n] for n in names))
    ref = moe_torch(*(t[n] for n in names))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=tol, atol=tol)

    # Top-2 picks agree (no near-tie that would make the comparison fragile).
    probs = torch.softmax(t["x"] @ t["router"], dim=-1).detach().numpy()
    ordered = np.sort(probs, axis=-1)
    assert np.min(ordered[:, -K] - ordered[:, -K - 1]) > 1e-4

    (out * sw.tensor(w["r"])).sum().backward()
    (ref * torch.tensor(w["r"])).sum().backward()
    for n in names:
        got = s[n].grad
        assert got is not None, n
        np.testing.assert_allclose(got.numpy(), t[n].grad.numpy(), rtol=tol, atol=tol, err_msg=n)
