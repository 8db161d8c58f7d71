"""The Python surface follows NumPy and PyTorch where their users assume it:
row-major reshape / view / flatten (order="F" for the C ABI's first mode
fastest), PyTorch's spellings (size(), dim(), float(), device, ...), NumPy
arrays on the left of an operator, NumPy arrays and torch tensors taken as
op arguments without a copy, and a clear error for indexing an offloaded
tensor."""
import asyncio

import numpy as np
import pytest
from conftest import seeded_tiled

import strideweave as sw


def exact(excinfo, cls):
    assert type(excinfo.value) is cls, type(excinfo.value)


def row_major(shape=(2, 3, 4)):
    return np.arange(float(np.prod(shape))).reshape(shape)


def inputs():
    """(name, NumPy array) pairs: C-ordered, Fortran-ordered and strided."""
    a = row_major()
    big = np.arange(96.0).reshape(4, 6, 4)
    return [("c", a), ("f", np.asfortranarray(a)), ("transposed", a.transpose(2, 0, 1)),
            ("sliced", big[::2, 1:4]), ("stepped", big[::2, ::2, ::-1]), ("broadcast", np.broadcast_to(a[:1], a.shape))]


SHAPES = [(3, 2, 4), (6, 4), (4, 6), (24,), (-1,), (2, -1), (2, 12), (3, 8), (1, 24, 1), (2, 3, 2, 2)]


# ---- reshape, view, flatten -------------------------------------------------------------------


def test_the_documented_example():
    a = np.arange(6.0).reshape(2, 3)
    t = sw.from_numpy(a)
    np.testing.assert_array_equal(t.reshape(3, 2).numpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(t.view(3, 2).numpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(t.reshape(3, 2, order="F").numpy(), a.reshape((3, 2), order="F"))
    assert sw.arange(6).reshape(2, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert sw.arange(6).reshape(2, 3, order="F").tolist() == [[0, 2, 4], [1, 3, 5]]


@pytest.mark.parametrize("name,a", inputs())
def test_reshape_matches_numpy(name, a):
    t = sw.from_numpy(a)
    for shape in SHAPES:
        np.testing.assert_array_equal(t.reshape(*shape).numpy(), a.reshape(shape))
        np.testing.assert_array_equal(sw.reshape(t, shape).numpy(), a.reshape(shape))
        np.testing.assert_array_equal(t.reshape(shape, order="F").numpy(), a.reshape(shape, order="F"))
    np.testing.assert_array_equal(t.flatten().numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.flatten(1).numpy(), a.reshape(a.shape[0], -1))
    np.testing.assert_array_equal(t.flatten(0, 1).numpy(), a.reshape(-1, a.shape[2]))
    np.testing.assert_array_equal(t.flatten(-2, -1).numpy(), a.reshape(a.shape[0], -1))
    np.testing.assert_array_equal(t.flatten(order="F").numpy(), a.reshape(-1, order="F"))
    np.testing.assert_array_equal(sw.flatten(t, 1).numpy(), a.reshape(a.shape[0], -1))


def test_view_follows_torch():
    torch = pytest.importorskip("torch")
    for name, a in inputs():
        if name == "stepped":  # torch has no negative strides
            continue
        t = sw.from_numpy(a)
        ta = torch.from_numpy(np.array(a[:1])).expand(a.shape) if name == "broadcast" else torch.from_numpy(a)
        for shape in SHAPES:
            try:
                want = ta.view(shape)
            except RuntimeError:
                with pytest.raises(RuntimeError) as e:
                    t.view(*shape)
                exact(e, sw.StrideWeaveRuntimeError)
                assert "view size is not compatible with input tensor's size and stride" in str(e.value)
                assert str(e.value).endswith("Use .reshape(...) instead.")
                continue
            v = t.view(*shape)
            np.testing.assert_array_equal(v.numpy(), want.numpy())
            # No copy: the view's strides are PyTorch's (up to modes of extent 1).
            got = v.numpy().strides
            assert all(n == 1 or g == w * a.itemsize for n, g, w in zip(want.shape, got, want.stride())), (name, shape)


def test_view_shares_memory_and_reshape_copies_only_when_it_must():
    a = row_major()
    t = sw.from_numpy(a)
    v = t.view(6, 4)
    v[1, 0] = -1.0
    assert a[0, 1, 0] == -1.0
    r = t.reshape(4, 6)  # a view as well
    r[0, 1] = -2.0
    assert a[0, 0, 1] == -2.0
    tt = t.permute(2, 0, 1)
    with pytest.raises(RuntimeError, match=r"Use \.reshape\(\.\.\.\) instead") as e:
        tt.view(-1)
    exact(e, sw.StrideWeaveRuntimeError)
    copy = tt.reshape(-1)
    np.testing.assert_array_equal(copy.numpy(), a.transpose(2, 0, 1).reshape(-1))
    copy[0] = 100.0
    assert a[0, 0, 0] == 0.0


def test_reshape_of_dlpack_torch_tensors():
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    for x in (base, base.permute(2, 0, 1), base[:, 1:], base.transpose(0, 1)):
        t = sw.from_dlpack(x)
        for shape in [(-1,), (4, -1), (2, 2, -1), (x.shape[-1], -1)]:
            want = x.reshape(shape)
            np.testing.assert_array_equal(t.reshape(*shape).numpy(), want.numpy())
            try:
                tv = x.view(shape)
            except RuntimeError:
                with pytest.raises(sw.StrideWeaveRuntimeError):
                    t.view(*shape)
            else:
                np.testing.assert_array_equal(t.view(*shape).numpy(), tv.numpy())
        np.testing.assert_array_equal(t.flatten(1).numpy(), x.flatten(1).numpy())
        np.testing.assert_array_equal(t.flatten().numpy(), x.flatten().numpy())


def test_reshape_edge_cases():
    z = sw.zeros(0, 3)
    assert z.reshape(3, 0).shape == (3, 0) and z.view(-1).shape == (0,) and z.reshape(2, 0, 5).shape == (2, 0, 5)
    s = sw.tensor(5.0)
    assert s.reshape(1, 1).tolist() == [[5.0]] and s.view(()).shape == () and s.flatten().tolist() == [5.0]
    t = sw.arange(6.0).reshape(2, 3)
    assert t.flatten(0, 0).shape == (2, 3) and t.reshape((6,), order="f").shape == (6,)
    # argmax over everything is the flat row-major index, as NumPy's.
    a = np.array([[0.0, 1.0, 9.0], [3.0, 4.0, 5.0]], dtype=np.float32)
    assert sw.from_numpy(a).argmax().item() == a.argmax() == 2
    assert sw.from_numpy(a).argmin().item() == a.argmin() == 0


def test_reshape_errors():
    t = sw.arange(6.0).reshape(2, 3)
    cases = [
        (lambda: t.reshape(4), sw.StrideWeaveValueError, r"^cannot reshape a tensor of size 6 into shape \(4,\)$"),
        (lambda: t.view(4, -1), sw.StrideWeaveValueError, r"^cannot reshape a tensor of size 6 into shape \(4, -1\)$"),
        (lambda: t.reshape(-1, -1), sw.StrideWeaveValueError, r"^reshape: only one extent can be -1"),
        (lambda: t.reshape(-2, 3), sw.StrideWeaveValueError, r"^reshape: invalid extent -2"),
        (lambda: t.reshape(6, order="K"), sw.StrideWeaveValueError, r"^reshape: order must be 'C'"),
        (lambda: t.reshape(2.0, 3), sw.StrideWeaveTypeError, r"^shape must be an integer, not float$"),
        (lambda: t.flatten(2), sw.StrideWeaveIndexError,
         r"^flatten: start_dim 2 is out of range for a tensor of rank 2 \(expected in \[-2, 1\]\)$"),
        (lambda: t.flatten(1, 0), sw.StrideWeaveValueError, r"^flatten: start_dim 1 comes after end_dim 0$"),
        (lambda: t.T.view(6), sw.StrideWeaveRuntimeError,
         r"^view size is not compatible with input tensor's size and stride .* cannot be viewed as \(6,\) in C order\. "
         r"Use \.reshape\(\.\.\.\) instead\.$"),
    ]
    for call, cls, pattern in cases:
        with pytest.raises(cls.__mro__[2], match=pattern) as e:
            call()
        exact(e, cls)


def test_gradients_through_reshape_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    w = np.random.default_rng(1).standard_normal((6, 4))
    for transform in (lambda x: x, lambda x: x.permute(2, 0, 1), lambda x: x[:, 1:]):
        x = sw.from_numpy(a.copy()).requires_grad_()
        tx = torch.from_numpy(a.copy()).requires_grad_()
        y, ty = transform(x), transform(tx)
        out = (y.reshape(-1, y.shape[-1] * y.shape[-2]).flatten() * sw.from_numpy(w.reshape(-1)[:y.numel()])).sum()
        tout = (ty.reshape(-1, ty.shape[-1] * ty.shape[-2]).flatten() * torch.from_numpy(w.reshape(-1)[:ty.numel()])
                ).sum()
        out.backward()
        tout.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    x = sw.from_numpy(a.copy()).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    ((x.view(6, 4) @ sw.from_numpy(w.T.copy())) ** 2).sum().backward()
    ((tx.view(6, 4) @ torch.from_numpy(w.T.copy())) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


# ---- PyTorch's spellings ------------------------------------------------------------------------


def test_torch_spellings():
    t = sw.zeros(2, 3, 4)
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.size == 24 and isinstance(t.size, int)  # NumPy's ndarray.size as well
    assert t.shape == (2, 3, 4) and t.dim() == 3 and t.ndim == 3 and t.numel() == 24
    assert t.device == "cpu"
    assert t.float().dtype is sw.float32 and t.double().dtype is sw.float64
    assert t.half().dtype is sw.float16 and t.bfloat16().dtype is sw.bfloat16
    m = sw.from_numpy(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(m.T.numpy(), np.arange(6.0).reshape(2, 3).T)
    np.testing.assert_array_equal(m.double().numpy(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(IndexError, match=r"^dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)$") \
            as e:
        t.size(3)
    exact(e, sw.StrideWeaveIndexError)
    with pytest.raises(TypeError, match="^dim must be an integer, not float$") as e:
        t.size(1.0)
    exact(e, sw.StrideWeaveTypeError)


def test_torch_spellings_agree_with_torch():
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 3, 4)
    t = sw.from_dlpack(x)
    assert tuple(x.size()) == t.size() and x.size(-2) == t.size(-2) and x.dim() == t.dim() and x.numel() == t.numel()
    assert str(x.device) == t.device


def test_tiled_tensors_name_the_primary_device():
    table = seeded_tiled(np.arange(16, dtype=np.float32), (2, 2), (2, 2))
    try:
        assert table.full_tensor().device == "cpu"
    finally:
        table.release()


# ---- NumPy on the left ------------------------------------------------------------------------


def test_ndarray_operators_defer_to_tensors():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    t = sw.from_numpy(b)
    for result, want in ((a @ t, a @ b), (b + t, b + b), (b - t, b - b), (b * t, b * b), (t @ b.T, b @ b.T),
                         (2.0 - t, 2.0 - b), (np.float64(3) * t, 3 * b)):
        assert isinstance(result, sw.Tensor)
        np.testing.assert_array_equal(result.numpy(), want)


# ---- foreign tensors as op arguments -----------------------------------------------------------


def test_numpy_arrays_are_taken_without_a_copy():
    a = np.arange(6.0).reshape(2, 3)
    b = np.ones((3, 2))
    t = sw.from_numpy(a)
    np.testing.assert_array_equal(sw.matmul(t, b).numpy(), a @ b)
    np.testing.assert_array_equal(sw.add(a, t).numpy(), a + a)
    np.testing.assert_array_equal(sw.exp(a).numpy(), np.exp(a))
    np.testing.assert_array_equal(sw.cat([t, a]).numpy(), np.concatenate([a, a]))
    np.testing.assert_array_equal(sw.index_select(t, 1, np.array([2, 0])).numpy(), a[:, [2, 0]])
    out = np.zeros((2, 3))
    sw.tensor(a).copy_(a)
    view = sw.reshape(out, 3, 2)  # a view of out's memory
    view.fill_(7.0)
    assert (out == 7.0).all()
    t.add_(np.ones((2, 3)))
    assert a[1, 2] == 6.0


def test_torch_tensors_are_taken_through_dlpack():
    torch = pytest.importorskip("torch")
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.ones(3, 4)
    t = sw.from_dlpack(a)
    np.testing.assert_array_equal(sw.matmul(t, b).numpy(), (a @ b).numpy())
    np.testing.assert_array_equal(sw.matmul(a, b).numpy(), (a @ b).numpy())
    np.testing.assert_array_equal(sw.add(t, a).numpy(), (a + a).numpy())
    np.testing.assert_array_equal((t * a).numpy(), (a * a).numpy())
    np.testing.assert_array_equal(sw.where(t > 2, a, 0.0).numpy(), torch.where(a > 2, a, 0.0).numpy())
    # No copy: a write through the StrideWeave side shows in the torch tensor.
    sw.reshape(a, 6).fill_(3.0)
    assert float(a.sum()) == 18.0


def test_expert_ops_take_torch_and_numpy_arguments():
    torch = pytest.importorskip("torch")
    E, K, N, T = 4, 3, 2, 5
    w = np.random.default_rng(0).standard_normal((K, N, E)).astype(np.float32)
    seeds = np.concatenate([w[:, :, e].reshape(-1, order="F") for e in range(E)])
    te = seeded_tiled(seeds, (1, 1, E), (K, N, 1))
    try:
        full = te.full_tensor()
        x = torch.from_numpy(np.random.default_rng(1).standard_normal((T, K)).astype(np.float32))
        ids = np.array([[e % E, (e + 1) % E] for e in range(T)], dtype=np.int64)
        gates = torch.full((T, 2), 0.5)
        got = te.expert_matmul(full, x, ids, gates).wait().numpy()
        want = sum(0.5 * np.einsum("tk,tkn->tn", x.numpy(), w.transpose(2, 0, 1)[ids[:, j]]) for j in range(2))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        te.release()


class OnTheGpu:
    """A DLPack producer on a CUDA device, as a torch.Tensor on cuda:0 reports itself."""

    def __dlpack__(self, **kwargs):
        raise AssertionError("not exported")

    def __dlpack_device__(self):
        return (2, 0)


def test_foreign_arguments_that_cannot_be_taken_are_refused_by_name():
    torch = pytest.importorskip("torch")
    t = sw.ones(2, 2)
    cases = [
        (lambda: sw.matmul(t, OnTheGpu()), "matmul: b must be a strideweave.Tensor; got test_conventions.OnTheGpu "
                                            "on cuda:0: move it to the CPU first (e.g. with .cpu())"),
        (lambda: sw.add(t, torch.ones(2, 2, requires_grad=True)),
         "add: b must be a strideweave.Tensor; got torch.Tensor with requires_grad=True, which DLPack does not "
         "export: pass .detach() of it (StrideWeave's autograd does not reach the other library's graph)"),
        (lambda: sw.add(t, [[1.0, 2.0]]),
         "add: b must be a strideweave.Tensor; got list; convert it with strideweave.tensor(...) (a copy), or pass "
         "a NumPy array or a CPU DLPack tensor (e.g. a torch.Tensor), which are taken without a copy"),
        (lambda: sw.exp(np.array(["a"])), "exp must be a strideweave.Tensor; got numpy.ndarray of dtype <U1, which "
                                          "strideweave.from_numpy cannot take"),
        (lambda: sw.relu(torch.ones(2, dtype=torch.complex64)),
         "relu must be a strideweave.Tensor; got torch.Tensor, which strideweave.from_dlpack cannot take"),
        (lambda: sw.expert_ffn(object(), t, t, t, t), "x must be a strideweave.Tensor; got object"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError) as e:
            call()
        exact(e, sw.StrideWeaveTypeError)
        assert str(e.value).startswith(message), str(e.value)


def test_an_await_handle_is_refused_with_wait():
    t = sw.ones(2, 2)
    pending = sw.move_async(sw.ones(2, 2), sw.carriers.CPU(0))
    with pytest.raises(TypeError, match=r"^matmul: b: got an AwaitMove, not a Tensor; call \.wait\(\)") as e:
        sw.matmul(t, pending)
    exact(e, sw.StrideWeaveTypeError)
    pending.wait()


def test_a_projection_destination_names_the_carrier_to_pass():
    torch = pytest.importorskip("torch")
    table = seeded_tiled(np.arange(16, dtype=np.float32), (2, 2), (2, 2))
    try:
        full = table.full_tensor()
        sel = sw.TileSelection([[1], [0]])
        buffer = torch.zeros(4)
        with pytest.raises(TypeError, match=r"sw\.from_dlpack\(buffer\)\.carrier") as e:
            table.project(full, sel, buffer)
        exact(e, sw.StrideWeaveTypeError)
        compact = table.project(full, sel, sw.from_dlpack(buffer).carrier).wait()
        np.testing.assert_array_equal(compact.numpy(), full.numpy()[2:4, 0:2])
        assert float(buffer.sum()) == float(full.numpy()[2:4, 0:2].sum())  # written into the torch buffer
    finally:
        table.release()


# ---- indexing an offloaded tensor --------------------------------------------------------------


def test_indexing_an_offloaded_tensor_says_how_to_project():
    E, H, F = 4, 2, 3
    values = np.arange(E * H * F, dtype=np.float32)
    te = seeded_tiled(values, (1, 1, E), (H, F, 1))
    try:
        full = te.full_tensor()
        with pytest.raises(NotImplementedError) as e:
            full[:, :, 2]
        exact(e, sw.StrideWeaveNotImplementedError)
        assert str(e.value) == (
            "a tensor on a TiledEvictable cannot be indexed: its tiles are moved between tiers and read by "
            "projection. Project the tiles you need into a compact tensor first (te = full.carrier): "
            "te.project(full, sw.TileSelection([[0], [0], [2]])).wait()[:, :, 0] is full[:, :, 2]")
        # The spelling it gives is right.
        expert = te.project(full, sw.TileSelection([[0], [0], [2]])).wait()[:, :, 0]
        np.testing.assert_array_equal(expert.numpy(), full.numpy()[:, :, 2])
        with pytest.raises(NotImplementedError, match=r"wait\(\)\[0\] is full\[0\]$"):
            full[0]
        with pytest.raises(NotImplementedError, match=r"one list of tile coordinates per axis"):
            full[0:1]
        with pytest.raises(NotImplementedError, match="project"):
            full.reshape(-1)
        with pytest.raises(NotImplementedError, match="project"):
            full.view(-1)
        assert full[1, 2, 3] == full.numpy()[1, 2, 3]  # one element reads
    finally:
        te.release()


def test_indexing_an_offloaded_expert_table_along_its_first_axis():
    E, D = 3, 2
    values = np.arange(E * D * D, dtype=np.float32)
    te = seeded_tiled(values, (E, 1, 1), (1, D, D))
    try:
        full = te.full_tensor()
        with pytest.raises(NotImplementedError, match=r"sw\.TileSelection\(\[\[1\], \[0\], \[0\]\]\)\)\.wait\(\)\[0\] "
                                                      r"is full\[-2\]$"):
            full[-2]
        np.testing.assert_array_equal(te.project(full, sw.TileSelection([[1], [0], [0]])).wait()[0].numpy(),
                                      full.numpy()[1])
    finally:
        te.release()


def test_runtime_and_carriers_are_context_managers():
    with sw.Runtime() as rt:
        with sw.carriers.CPU(4, runtime=rt) as c:
            assert not c.is_released()
        assert c.is_released()
    # The runtime is shut down: work that needs its loop is cancelled.
    te = sw.TiledEvictable(sw.carriers.CPU(0, runtime=rt), sw.carriers.Host(8, runtime=rt), (2,), (4,))
    with pytest.raises(sw.StrideWeaveCancelledError, match="shut down"):
        te.promote(te.secondary_tiles)


def test_every_carrier_class_is_a_context_manager_that_releases_it(tmp_path):
    with sw.Runtime() as rt:
        made = [sw.carriers.CPU(4, runtime=rt), sw.carriers.Host(4, runtime=rt),
                sw.carriers.File(4, directory=tmp_path, runtime=rt), sw.carriers.Zstd(4, runtime=rt)]
        for carrier in made:
            with carrier as entered:
                assert entered is carrier and not carrier.is_released()
            assert carrier.is_released()
        primary, secondary = sw.carriers.CPU(0, runtime=rt), sw.carriers.Host(8, runtime=rt)
        with sw.TiledEvictable(primary, secondary, (2,), (4,)) as te:
            assert isinstance(te, sw.TiledEvictable) and primary.is_owned() and secondary.is_owned()
        assert te.is_released()
        # An exception inside the block still releases the carrier, and propagates.
        c = sw.carriers.CPU(4, runtime=rt)
        with pytest.raises(KeyError):
            with c:
                raise KeyError("x")
        assert c.is_released()


def test_a_star_import_does_not_shadow_asyncio_cancelled_error():
    scope = {"CancelledError": asyncio.CancelledError}
    exec("from strideweave import *", scope)
    assert scope["CancelledError"] is asyncio.CancelledError
    assert scope["StrideWeaveCancelledError"] is sw.CancelledError
    assert issubclass(sw.StrideWeaveCancelledError, RuntimeError)
