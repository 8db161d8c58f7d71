"""The Python tensor surface: constructors and dtypes, views and indexing
against NumPy (order='F' for reshape), ops against NumPy and PyTorch on odd
and strided shapes and every dtype they take, VJPs against torch.autograd,
in-place rules and the exact error kinds."""
import inspect
import math

import numpy as np
import pytest
import strideweave as sw
from conftest import seeded_tiled

torch = pytest.importorskip("torch")


def arr(shape, dtype=np.float64, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.1
    if np.dtype(dtype).kind in "iu":
        a = (a * 5).round()
        if np.dtype(dtype).kind == "u":
            a = np.abs(a)
    if np.dtype(dtype).kind == "b":
        a = a > 0
    return a.astype(dtype)


# ---- constructors and dtypes ------------------------------------------------------------------


def test_constructors():
    assert sw.zeros(2, 3).shape == (2, 3) and sw.zeros(2, 3).dtype is sw.float32
    assert sw.zeros((4,), dtype="int32").dtype is sw.int32
    np.testing.assert_array_equal(sw.ones(2, 2, dtype=np.float64).numpy(), np.ones((2, 2)))
    assert sw.full((2,), 7).dtype is sw.int64
    assert sw.full((2,), 1.5).dtype is sw.float32
    assert sw.full((2,), True).dtype is sw.bool_
    np.testing.assert_array_equal(sw.arange(5).numpy(), np.arange(5))
    assert sw.arange(5).dtype is sw.int64
    np.testing.assert_allclose(sw.arange(0, 1, 0.25).numpy(), np.arange(0, 1, 0.25))
    assert sw.arange(0, 1, 0.25).dtype is sw.float32
    t = sw.tensor([[1, 2], [3, 4]])
    assert t.dtype is sw.int64 and t[1, 0] == 3
    assert sw.tensor([1.5]).dtype is sw.float32
    assert sw.tensor(np.arange(3, dtype=np.int32)).dtype is sw.int32
    assert sw.empty(3).shape == (3,)


def test_random_is_seeded():
    a = sw.randn(100, seed=3).numpy()
    np.testing.assert_array_equal(a, sw.randn(100, seed=3).numpy())
    assert not np.array_equal(a, sw.randn(100, seed=4).numpy())
    assert abs(a.mean()) < 0.5 and 0.5 < a.std() < 1.5
    u = sw.rand(10, 10, seed=1, dtype=sw.float64).numpy()
    assert u.dtype == np.float64 and u.min() >= 0 and u.max() < 1
    with pytest.raises(TypeError):
        sw.rand(3, dtype=sw.int32)


@pytest.mark.parametrize("spelling", [np.float32, "float32", sw.float32, np.dtype("float32"), torch.float32])
def test_dtype_spellings(spelling):
    assert sw.zeros(1, dtype=spelling).dtype is sw.float32
    assert sw.ones(1).astype(spelling).dtype is sw.float32
    assert sw.ones(1).to(spelling).dtype is sw.float32


@pytest.mark.parametrize("bad", [object, "float33", 3, None.__class__])
def test_bad_dtype_is_type_error_naming_it(bad):
    with pytest.raises(TypeError, match="dtype|StrideWeave"):
        sw.zeros(1, dtype=bad)


def test_astype_conversions():
    a = np.array([2.7, -2.7, 0.0, 1.0])
    t = sw.tensor(a, dtype=sw.float64)
    np.testing.assert_array_equal(t.astype(sw.int32).numpy(), np.array([2, -2, 0, 1], dtype=np.int32))
    np.testing.assert_array_equal(t.astype(sw.bool_).numpy(), a != 0)
    np.testing.assert_array_equal(t.astype(sw.float16).numpy(), a.astype(np.float16))
    assert t.astype(sw.float64) is not None


@pytest.mark.parametrize("da,db", [(np.int32, np.float32), (np.uint8, np.bool_), (np.int32, np.int64),
                                   (np.float16, np.float32), (np.bool_, np.float64), (np.uint8, np.int32)])
def test_promotion_matches_torch(da, db):
    a, b = arr((3, 4), da, 1), arr((4,), db, 2)
    got = sw.tensor(a) + sw.tensor(b)
    want = torch.tensor(a) + torch.tensor(b)
    assert got.dtype.name == str(want.dtype).rpartition(".")[2].replace("half", "float16")
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64), rtol=1e-3)


def test_half_and_bfloat_compute_in_float32():
    a, b = sw.tensor(np.float32([1.0, 3.0])).astype(sw.float16), sw.tensor(np.float32([3.0, 7.0])).astype(sw.bfloat16)
    assert (a * b).dtype is sw.float32
    h = a / 3
    assert h.dtype is sw.float16
    np.testing.assert_array_equal(h.numpy(), (np.float32([1.0, 3.0]) / np.float32(3)).astype(np.float16))


def test_python_scalars_promote_as_torch():
    i = sw.tensor([1, 2, 3])
    assert (i + 1).dtype is sw.int64
    assert (i * 0.5).dtype is sw.float32
    assert (i / 2).dtype is sw.float32
    assert (2 - i).numpy().tolist() == [1, 0, -1]
    b = sw.tensor([True, False])
    assert (b + 2).dtype is sw.int64


# ---- views and indexing -----------------------------------------------------------------------


def test_reshape_matches_numpy_order_f():
    a = np.arange(24.0).reshape((2, 3, 4), order="F")
    t = sw.tensor(a, dtype=sw.float64)
    for shape in [(6, 4), (4, 6), (24,), (2, 12), (3, 8), (-1, 2)]:
        np.testing.assert_array_equal(t.reshape(*shape, order="F").numpy(), a.reshape(shape, order="F"))
    np.testing.assert_array_equal(t.flatten(order="F").numpy(), a.reshape(-1, order="F"))
    np.testing.assert_array_equal(t.flatten(1, order="F").numpy(), a.reshape((2, 12), order="F"))
    # Strided inputs: a transposed and a sliced tensor.
    tt, at = t.permute(2, 0, 1), a.transpose(2, 0, 1)
    np.testing.assert_array_equal(tt.reshape(8, 3, order="F").numpy(), at.reshape((8, 3), order="F"))
    ts, as_ = t[:, 1:, ::2], a[:, 1:, ::2]
    np.testing.assert_array_equal(ts.reshape(-1, order="F").numpy(), as_.reshape(-1, order="F"))


def test_view_fails_where_reshape_copies():
    t = sw.arange(6, dtype=sw.float32).reshape(2, 3, order="F").T  # (3, 2) transposed
    with pytest.raises(RuntimeError, match=r"Use \.reshape\(\.\.\.\) instead"):
        t.view(2, 3, order="F")
    r = t.reshape(2, 3, order="F")
    r[0, 0] = 100.0
    assert t[0, 0] == 0.0  # a copy
    v = t.view(6, order="F")
    v[1] = 50.0
    assert t[1, 0] == 50.0  # a view


@pytest.mark.parametrize("key", [(slice(None), 1), -1, 0, slice(1, 5, 2), (slice(None, None, -1), slice(1, None)),
                                 (Ellipsis, 2), (None, 1), (slice(-3, None), None, slice(None, None, -2)),
                                 (1, slice(4, 0, -1))])
def test_indexing_matches_numpy(key):
    a = np.arange(30.0).reshape(6, 5)
    t = sw.tensor(a, dtype=sw.float64)
    np.testing.assert_array_equal(t[key].numpy(), a[key])


def test_views_alias_and_bump_the_version():
    t = sw.zeros(4, 3)
    row = t[1]
    col = t[:, 2]
    v0 = t.version
    row.fill_(5.0)
    assert t.version == v0 + 1 and col[1] == 5.0
    t[2:4, 0] = 9.0
    assert t[3, 0] == 9.0
    t[0] = sw.tensor([1.0, 2.0, 3.0])
    assert t.numpy()[0].tolist() == [1.0, 2.0, 3.0]
    assert t.unsqueeze(0).shape == (1, 4, 3) and t.unsqueeze(0).squeeze().shape == (4, 3)
    e = t[0:1].expand(6, 3)
    assert e.shape == (6, 3) and e[5, 2] == 3.0
    with pytest.raises(ValueError):
        e.fill_(0.0)


def test_contiguous_clone_detach():
    t = sw.arange(6, dtype=sw.float32).reshape(2, 3, order="F").T
    c = t.contiguous()
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    k = t.clone()
    k[0, 0] = 42.0
    assert t[0, 0] == 0.0
    x = sw.ones(3)
    x.requires_grad = True
    d = (x * 2.0).detach()
    assert not d.requires_grad and d.is_leaf


# ---- ops against NumPy / PyTorch ---------------------------------------------------------------

UNARY = {
    "neg": (sw.neg, torch.neg, False), "abs": (sw.abs, torch.abs, False), "exp": (sw.exp, torch.exp, False),
    "log": (sw.log, torch.log, True), "sqrt": (sw.sqrt, torch.sqrt, True), "rsqrt": (sw.rsqrt, torch.rsqrt, True),
    "silu": (sw.silu, torch.nn.functional.silu, False), "gelu": (sw.gelu, torch.nn.functional.gelu, False),
    "sigmoid": (sw.sigmoid, torch.sigmoid, False), "tanh": (sw.tanh, torch.tanh, False),
    "relu": (sw.relu, torch.relu, False),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_forward_and_vjp_on_a_strided_operand(name, dtype):
    f, g, positive = UNARY[name]
    a = arr((5, 7), dtype, 3, positive)
    t = sw.tensor(a)
    t.requires_grad = True
    ref = torch.tensor(a, requires_grad=True)
    y, yr = f(t.T[1:, ::2]), g(ref.T[1:, ::2])
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=tol, atol=tol)
    w = arr(tuple(yr.shape), dtype, 4)
    (y * sw.tensor(w)).sum().backward()
    (yr * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), ref.grad.numpy(), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_unary(dtype):
    a = arr((4, 3), dtype, 5)
    np.testing.assert_array_equal(sw.abs(sw.tensor(a)).numpy(), torch.abs(torch.tensor(a)).numpy())
    np.testing.assert_array_equal((-sw.tensor(a)).numpy(), (-torch.tensor(a)).numpy())
    e = sw.exp(sw.tensor(a))
    assert e.dtype is sw.float32
    np.testing.assert_allclose(e.numpy(), np.exp(a.astype(np.float32)), rtol=1e-6)


BINARY = {
    "add": (lambda a, b: a + b), "sub": (lambda a, b: a - b), "mul": (lambda a, b: a * b),
    "div": (lambda a, b: a / b), "pow": (lambda a, b: a ** b),
    "maximum": (lambda a, b: sw.maximum(a, b) if isinstance(a, sw.Tensor) else torch.maximum(a, b)),
    "minimum": (lambda a, b: sw.minimum(a, b) if isinstance(a, sw.Tensor) else torch.minimum(a, b)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_and_vjp_broadcast(name):
    op = BINARY[name]
    a, b = arr((3, 1, 5), np.float64, 6, name == "pow"), arr((4, 1), np.float64, 7)
    ta, tb = sw.tensor(a), sw.tensor(b)
    ta.requires_grad = tb.requires_grad = True
    ra, rb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, yr = op(ta, tb), op(ra, rb)
    np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-12, atol=1e-12)
    y.sum().backward()
    yr.sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), ra.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), rb.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.bool_])
def test_comparisons_every_dtype(dtype):
    a, b = arr((4, 5), dtype, 8), arr((5,), dtype, 9)
    ta, tb = sw.tensor(a), sw.tensor(b)
    for sop, nop in [("__eq__", np.equal), ("__ne__", np.not_equal), ("__lt__", np.less),
                     ("__le__", np.less_equal), ("__gt__", np.greater), ("__ge__", np.greater_equal)]:
        got = getattr(ta, sop)(tb)
        assert got.dtype is sw.bool_
        np.testing.assert_array_equal(got.numpy(), nop(a, b))
    assert ((ta > 0) == (ta > 0)).all()


def test_reflected_operators():
    t = sw.tensor([1.0, 2.0, 4.0])
    assert (1 - t).numpy().tolist() == [0.0, -1.0, -3.0]
    assert (8 / t).numpy().tolist() == [8.0, 4.0, 2.0]
    assert (2 ** t).numpy().tolist() == [2.0, 4.0, 16.0]
    assert (3 > t).numpy().tolist() == [True, True, False]


def test_where():
    a, b = arr((3, 4), np.float64, 10), arr((4,), np.float64, 11)
    ta, tb = sw.tensor(a), sw.tensor(b)
    ta.requires_grad = True
    y = sw.where(ta > 0, ta, tb)
    np.testing.assert_array_equal(y.numpy(), np.where(a > 0, a, b))
    y.sum().backward()
    np.testing.assert_array_equal(ta.grad.numpy(), (a > 0).astype(np.float64))
    np.testing.assert_array_equal(sw.where(ta > 0, ta, 0.0).numpy(), np.where(a > 0, a, 0.0))
    with pytest.raises(TypeError):
        sw.where(ta, ta, tb)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keep", [False, True])
def test_reductions_match_numpy(axis, keep):
    a = arr((3, 4, 5), np.float64, 12)
    t = sw.tensor(a).permute(1, 0, 2)
    at = a.transpose(1, 0, 2)
    for s, n in [(t.sum, np.sum), (t.mean, np.mean), (t.max, np.max), (t.min, np.min)]:
        np.testing.assert_allclose(s(axis=axis, keepdims=keep).numpy(), n(at, axis=axis, keepdims=keep), rtol=1e-12)
    i = sw.tensor(arr((3, 4), np.int32, 13))
    assert i.sum().dtype is sw.int64


def test_max_min_with_indices_as_torch():
    a = np.array([[1.0, 3.0, 3.0], [5.0, -1.0, 5.0]])
    t = sw.tensor(a, dtype=sw.float64)
    t.requires_grad = True
    v, i = t.max(dim=1)
    assert v.numpy().tolist() == [3.0, 5.0] and i.numpy().tolist() == [1, 0]
    v.sum().backward()
    assert t.grad.numpy().tolist() == [[0, 1, 0], [1, 0, 0]]
    assert sw.argmin(t, axis=1).numpy().tolist() == [0, 1]
    assert t.max().item() == 5.0 and t.min().item() == -1.0


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_log_softmax_vjp(axis):
    a = arr((4, 6), np.float64, 14)
    t, r = sw.tensor(a), torch.tensor(a, requires_grad=True)
    t.requires_grad = True
    w = arr((4, 6), np.float64, 15)
    for f, g in [(sw.softmax, torch.softmax), (sw.log_softmax, torch.log_softmax)]:
        t.grad = None
        r.grad = None
        y, yr = f(t, dim=axis), g(r, dim=axis)
        np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-12, atol=1e-14)
        (y * sw.tensor(w)).sum().backward()
        (yr * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_topk_sorted_ties_to_lower_index_and_vjp():
    a = np.array([[1.0, 3.0, 3.0, 2.0], [0.5, 0.5, 0.5, 0.5]])
    t = sw.tensor(a, dtype=sw.float64)
    t.requires_grad = True
    v, i = sw.topk(t, 2, dim=1)
    assert v.numpy().tolist() == [[3.0, 3.0], [0.5, 0.5]]
    assert i.numpy().tolist() == [[1, 2], [0, 1]]
    (v * sw.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=sw.float64)).sum().backward()
    assert t.grad.numpy().tolist() == [[0, 1, 2, 0], [3, 4, 0, 0]]
    b = arr((7, 5), np.float32, 16)
    vb, ib = sw.topk(sw.tensor(b).T, 3, axis=0)
    rv, ri = torch.topk(torch.tensor(b).T, 3, dim=0)
    np.testing.assert_array_equal(vb.numpy(), rv.numpy())
    np.testing.assert_array_equal(ib.numpy(), ri.numpy())
    with pytest.raises(ValueError):
        sw.topk(t, 5, dim=1)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_index_ops_match_torch(index_dtype):
    a = arr((5, 3), np.float64, 17)
    idx = np.array([4, 0, 4, 2], dtype=index_dtype)
    t, r = sw.tensor(a), torch.tensor(a, requires_grad=True)
    t.requires_grad = True
    y, yr = sw.index_select(t, 0, sw.tensor(idx)), torch.index_select(r, 0, torch.tensor(idx).long())
    np.testing.assert_array_equal(y.numpy(), yr.detach().numpy())
    w = arr((4, 3), np.float64, 18)
    (y * sw.tensor(w)).sum().backward()
    (yr * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-14)
    gi = np.array([[0, 2, 1], [2, 2, 0]], dtype=index_dtype)
    np.testing.assert_array_equal(sw.gather(sw.tensor(a), 1, sw.tensor(gi)).numpy(),
                                  torch.gather(torch.tensor(a), 1, torch.tensor(gi).long()).numpy())
    src = arr((2, 3), np.float64, 19)
    np.testing.assert_allclose(
        sw.scatter_add(sw.tensor(a), 1, sw.tensor(gi), sw.tensor(src)).numpy(),
        torch.scatter_add(torch.tensor(a), 1, torch.tensor(gi).long(), torch.tensor(src)).numpy(), rtol=1e-14)
    np.testing.assert_allclose(
        sw.index_add(sw.tensor(a), 0, sw.tensor(idx), sw.tensor(w)).numpy(),
        torch.index_add(torch.tensor(a), 0, torch.tensor(idx).long(), torch.tensor(w)).numpy(), rtol=1e-14)
    with pytest.raises(IndexError):
        sw.index_select(t, 0, sw.tensor(np.array([5], dtype=index_dtype)))
    with pytest.raises(TypeError):
        sw.index_select(t, 0, t)


def test_cat_stack():
    a, b = arr((2, 3), np.float32, 20), arr((4, 3), np.float32, 21)
    np.testing.assert_array_equal(sw.cat([sw.tensor(a), sw.tensor(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(sw.stack([sw.tensor(a), sw.tensor(a)], dim=-1).numpy(), np.stack([a, a], -1))
    ta = sw.tensor(a)
    ta.requires_grad = True
    sw.cat([ta, ta], axis=1).sum().backward()
    np.testing.assert_array_equal(ta.grad.numpy(), np.full((2, 3), 2.0, dtype=np.float32))
    with pytest.raises(ValueError):
        sw.cat([])
    with pytest.raises(ValueError):
        sw.cat([sw.tensor(a), sw.tensor(b)], axis=1)


# ---- in-place ---------------------------------------------------------------------------------


def test_inplace_operators_and_version():
    t = sw.tensor([1.0, 2.0, 3.0])
    h = t
    v = t.version
    t += 1
    t *= 2
    t -= 1
    t /= 2
    assert h is t and t.version == v + 4
    np.testing.assert_allclose(t.numpy(), [1.5, 2.5, 3.5])
    t.zero_()
    assert t.numpy().tolist() == [0.0, 0.0, 0.0]
    t.copy_(sw.tensor([7.0]))
    assert t.numpy().tolist() == [7.0, 7.0, 7.0]
    i = sw.tensor([1, 2])
    with pytest.raises(TypeError):
        i /= 2
    with pytest.raises(TypeError):
        i += sw.tensor([0.5, 0.5])


def test_modified_in_place_fails_backward():
    x = sw.tensor([1.0, 2.0])
    x.requires_grad = True
    with pytest.raises(RuntimeError):
        x += 1
    with pytest.raises(RuntimeError):
        x.fill_(0.0)
    y = sw.exp(x)
    z = y * y
    y += 1
    with pytest.raises(RuntimeError, match="modified in-place"):
        z.sum().backward()
    with sw.no_grad():
        x -= 0.5  # an optimiser step
    np.testing.assert_allclose(x.numpy(), [0.5, 1.5])


def test_python_protocol():
    assert float(sw.tensor([2.5])) == 2.5 and int(sw.tensor([3])) == 3
    assert bool(sw.tensor([1.0])) and not bool(sw.tensor([0]))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(sw.tensor([1.0, 2.0]))
    t = sw.tensor([1.0])
    assert hash(t) == hash(t) and len({t, sw.tensor([1.0])}) == 2
    assert (t == None) is False and (t != "x") is True  # noqa: E711 - Python's default for other objects
    assert math.isclose(sw.tensor([[1.0, 2.0]])[0, 1], 2.0)


# ---- TiledEvictable --------------------------------------------------------------------------


def test_tiled_takes_only_the_six_ops():
    table = seeded_tiled(np.arange(16, dtype=np.float32), (2, 2), (2, 2))
    try:
        t = table.full_tensor()
        for f in [sw.exp, lambda x: x / 2, lambda x: x.reshape(16), lambda x: x[0], sw.softmax,
                  lambda x: sw.topk(x, 1), lambda x: x.max(), lambda x: x < 1]:
            with pytest.raises(NotImplementedError, match="project"):
                f(t)
        # The six ops, and the operators built on them, keep working.
        logical = (t + t).numpy() / 2
        np.testing.assert_array_equal((t - 1.0).numpy(), logical - 1)
        np.testing.assert_array_equal((-t).numpy(), -logical)
        np.testing.assert_array_equal((t - t).numpy(), np.zeros((4, 4), np.float32))
        assert t.sum().item() == 120.0 and sw.relu(t).sum().item() == 120.0
    finally:
        table.release()


def test_every_surface_function_and_method_has_a_docstring():
    names = [n for n in sw.__all__ if getattr(getattr(sw, n), "__module__", "") == "strideweave._surface"]
    assert len(names) > 50
    objs = [(f"sw.{n}", getattr(sw, n)) for n in names]
    objs += [(f"Tensor.{a}", f) for a, f in vars(sw.Tensor).items()
             if inspect.isfunction(f) and f.__module__ == "strideweave._surface"]
    missing = sorted(q for q, f in objs if not (inspect.getdoc(f) or "").strip())
    assert not missing, f"without a docstring: {missing}"


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float16, np.float32])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "pow"])
def test_binary_every_dtype_matches_torch(dtype, name):
    op = BINARY[name]
    a = arr((5, 3), dtype, 22, positive=True)
    b = arr((3,), dtype, 23, positive=True)
    if name == "pow":
        b = np.minimum(np.abs(b), 3).astype(dtype)
    # A transposed (strided) operand on both sides.
    ta, ra = sw.tensor(np.ascontiguousarray(a.T)).T, torch.tensor(np.ascontiguousarray(a.T)).T
    got, want = op(ta, sw.tensor(b)), op(ra, torch.tensor(b))
    assert got.dtype.name == str(want.dtype).rpartition(".")[2].replace("half", "float16")
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64), rtol=tol, atol=tol)


def test_bfloat16_rounds_once_from_float32():
    a = torch.tensor([1.1, 2.3, -0.7], dtype=torch.bfloat16)
    b = torch.tensor([0.3, 5.1, 2.2], dtype=torch.bfloat16)
    ta = sw.tensor(a.float().numpy()).astype(sw.bfloat16)
    tb = sw.tensor(b.float().numpy()).astype(sw.bfloat16)
    for sop, top in [(lambda x, y: x + y, torch.add), (lambda x, y: x / y, torch.div), (sw.maximum, torch.maximum)]:
        got = sop(ta, tb)
        assert got.dtype is sw.bfloat16
        np.testing.assert_array_equal(got.numpy(), top(a, b).float().numpy())
    np.testing.assert_array_equal(sw.exp(ta).numpy(), torch.exp(a).float().numpy())
