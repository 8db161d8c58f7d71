"""NumPy and DLPack interop (PyTorch where it is installed)."""
import gc

import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from conftest import exact

rng = np.random.default_rng(3)
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]


def sample(shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_numpy_round_trip(dtype, order):
    a = np.asarray(sample((3, 4, 2), dtype), order=order)
    t = sw.from_numpy(a)
    assert t.shape == a.shape and t.dtype.numpy == a.dtype
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert t[2, 1, 0] == a[2, 1, 0]


def test_c_order_maps_to_a_permuted_layout_and_f_order_to_dense():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert sw.from_numpy(a).layout == sw.Layout((2, 3), (3, 1))
    assert sw.from_numpy(np.asfortranarray(a)).layout == sw.Layout.dense(2, 3)
    assert sw.Tensor.from_numpy(a).shape == (2, 3)


@pytest.mark.parametrize("view", [
    lambda a: a[::-1], lambda a: a[:, ::2], lambda a: a.T, lambda a: a[1:, ::-2].T, lambda a: a[::2, 1],
    lambda a: np.broadcast_to(a[:1], a.shape), lambda a: a[0, 0],
])
def test_from_numpy_handles_any_strides(view):
    v = view(np.arange(24, dtype=np.float64).reshape(4, 6))
    t = sw.from_numpy(v)
    np.testing.assert_array_equal(t.numpy(), v)


def test_numpy_view_is_zero_copy_and_keeps_the_carrier_alive():
    c = carriers.CPU.from_values(range(12), dtype=sw.float32)
    t = sw.Tensor(c, 2, sw.Layout((2, 3), (3, 1)))
    a = t.numpy()
    np.testing.assert_array_equal(a, np.arange(2, 8, dtype=np.float32).reshape(2, 3))
    a[0, 1] = 99.0  # writes through (bypassing the version counter)
    assert c[3] == 99.0
    c[4] = -1.0
    assert a[0, 2] == -1.0
    assert np.shares_memory(a, np.asarray(t))
    with pytest.raises(RuntimeError) as e:
        c.release()  # refused while the view shares the memory
    exact(e, sw.StrideWeaveRuntimeError)
    del t, c
    gc.collect()
    assert a[0, 1] == 99.0  # still alive through the view
    del a
    gc.collect()


def test_interface_and_copies_where_a_view_is_impossible():
    t = sw.from_numpy(np.arange(8, dtype=np.float32))
    iface = t.__array_interface__
    assert iface["shape"] == (8,) and iface["typestr"] == "<f4" and iface["strides"] == (4,)
    nested = sw.Tensor(t.carrier, 0, sw.Layout(sw.Shape([2, 2], 2), sw.Stride([1, 4], 2)))
    assert not hasattr(nested, "__array_interface__")
    np.testing.assert_array_equal(nested.numpy(), [[0, 2], [1, 3], [4, 6], [5, 7]])
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    assert isinstance(z.carrier, carriers.Zstd)
    np.testing.assert_array_equal(z.numpy(), np.arange(4))
    empty = sw.from_numpy(np.zeros((0, 3), np.float32))
    assert empty.numpy().shape == (0, 3)


def test_bfloat16_rounds_and_reads_as_float32():
    c = carriers.CPU.from_values([1.0, 1.00390625, -2.5], dtype=sw.bfloat16)
    t = sw.Tensor(c, 0, sw.Layout.dense(3))
    a = t.numpy()
    assert a.dtype == np.float32 and a.tolist() == [1.0, 1.0, -2.5]


def test_numpy_from_dlpack_accepts_our_tensors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = sw.from_numpy(a)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(b, t.numpy())
    nested = sw.Tensor(t.carrier, 0, sw.Layout(sw.Shape([2, 2], 2), sw.Stride([1, 4], 2)))
    np.testing.assert_array_equal(np.from_dlpack(nested), nested.numpy())  # exported as a copy
    with pytest.raises(BufferError):
        nested.__dlpack__(copy=False)
    assert t.__dlpack_device__() == (1, 0)


def test_legacy_and_versioned_capsules_round_trip():
    a = sample((2, 5), np.int64)
    t = sw.from_numpy(a)
    for kwargs in ({}, {"max_version": (1, 0)}):
        back = sw.from_dlpack(t.__dlpack__(**kwargs))
        np.testing.assert_array_equal(back.numpy(), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dlpack_accepts_numpy_arrays(dtype):
    a = sample((4, 3), dtype)[::-1, ::2]
    t = sw.from_dlpack(a)
    assert t.dtype.numpy == a.dtype
    np.testing.assert_array_equal(t.numpy(), a)


def test_from_dlpack_errors():
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.from_dlpack([1, 2, 3])
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.from_numpy(np.zeros(2, np.complex64))


def test_unconsumed_capsule_releases_its_export():
    c = carriers.CPU(4)
    t = sw.Tensor(c, 0, sw.Layout.dense(4))
    capsule = t.__dlpack__()
    with pytest.raises(sw.StrideWeaveRuntimeError):
        c.release()
    del capsule
    gc.collect()
    c.release()


# ---- PyTorch, where it is installed ---------------------------------------------------

def test_torch_round_trips():
    torch = pytest.importorskip("torch")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = sw.from_numpy(a)
    tt = torch.from_dlpack(t)
    assert tt.shape == (3, 4) and torch.equal(tt, torch.from_numpy(a))
    tt[0, 0] = 42.0  # shares memory
    assert t[0, 0] == 42.0
    back = sw.from_dlpack(torch.arange(6, dtype=torch.float64).reshape(2, 3).t())
    np.testing.assert_array_equal(back.numpy(), np.arange(6, dtype=np.float64).reshape(2, 3).T)
    bf = sw.from_dlpack(torch.tensor([1.0, 2.5], dtype=torch.bfloat16))
    assert bf.dtype is sw.bfloat16 and bf.numpy().tolist() == [1.0, 2.5]


def test_array_protocol_copy_keyword():
    t = sw.from_numpy(np.arange(4, dtype=np.float32))
    assert np.shares_memory(np.asarray(t, copy=False), t.numpy())
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    with pytest.raises(ValueError):
        np.asarray(z, copy=False)
    np.testing.assert_array_equal(np.asarray(z, dtype=np.float64), np.arange(4))
