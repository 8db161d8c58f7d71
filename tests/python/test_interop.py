"""NumPy, DLPack and PyTorch interop: values, sharing, lifetimes."""
import gc
import sys
import time

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


# ---- zero-copy imports -------------------------------------------------------------------

SHARED_VIEWS = [
    lambda a: a, lambda a: np.asfortranarray(a), lambda a: a[::-1], lambda a: a[:, ::2], lambda a: a.T,
    lambda a: a[1:, ::-2].T, lambda a: a[::2, 1], lambda a: np.broadcast_to(a[:1], a.shape),
    lambda a: a[1, 2, ...],  # a 0-d view
    lambda a: np.lib.stride_tricks.as_strided(a[1:2], (1, 6), (3, a.itemsize)),  # an odd stride on extent 1
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", SHARED_VIEWS)
def test_from_numpy_shares_memory(dtype, view):
    base = sample((4, 6), dtype)
    a = view(base)
    t = sw.from_numpy(a)
    assert isinstance(t.carrier, carriers.CPU)
    assert t.shape == a.shape and t.dtype.numpy == a.dtype
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), a)
    assert t.carrier.is_read_only() == (not a.flags.writeable)


def test_writes_are_seen_both_ways():
    a = np.zeros((3, 4), np.float32)
    t = sw.from_numpy(a[:, 1:])  # a strided window: offset 1, C strides
    a[2, 3] = 5.0
    assert t[2, 2] == 5.0
    t[0, 0] = -1.5  # a public write: lands in the array, one version step
    assert a[0, 1] == -1.5 and t.version == 1
    np.testing.assert_array_equal(sw.add(t, t).numpy(), 2 * a[:, 1:])
    a[:] = 7.0  # NumPy's writes are what the next op reads
    np.testing.assert_array_equal(sw.relu(t).numpy(), np.full((3, 3), 7.0, np.float32))
    m = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.testing.assert_array_equal(sw.matmul(sw.from_numpy(m), sw.from_numpy(m.T)).numpy(), m @ m.T)


def test_the_carrier_keeps_the_array_alive():
    a = np.arange(10, dtype=np.int64)
    before = sys.getrefcount(a)
    t = sw.from_numpy(a)
    assert sys.getrefcount(a) == before + 1
    view = t.numpy()
    del view  # a live view would make release() refuse
    gc.collect()
    t.carrier.release()  # drops the memory: the reference goes at once
    assert sys.getrefcount(a) == before
    with pytest.raises(sw.StrideWeaveRuntimeError):
        t.numpy()
    # A temporary stays alive as long as the tensor does.
    t = sw.from_numpy(np.arange(5, dtype=np.float32) * 2)
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), [0, 2, 4, 6, 8])
    # Dropping the last tensor drops the array.
    b = np.ones(4)
    alone = sys.getrefcount(b)
    t = sw.from_numpy(b)
    assert sys.getrefcount(b) == alone + 1
    del t
    gc.collect()
    assert sys.getrefcount(b) == alone


def test_read_only_arrays_give_read_only_carriers():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = sw.from_numpy(a)
    assert t.carrier.is_read_only() and not t.carrier.is_mutable()
    with pytest.raises(RuntimeError) as e:
        t[0] = 1.0
    exact(e, sw.StrideWeaveRuntimeError)
    with pytest.raises(sw.StrideWeaveRuntimeError):
        t.carrier[1] = 2.0
    assert not t.numpy().flags.writeable
    assert not np.asarray(t).flags.writeable
    np.testing.assert_array_equal(sw.mul(t, 2.0).numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


def test_moving_out_of_a_shared_carrier_releases_the_array():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = sys.getrefcount(a)
    t = sw.from_numpy(a)
    view = t.numpy()
    with pytest.raises(RuntimeError) as e:  # a move releases the source, as release() does
        sw.move_async(t, carriers.Host(0))
    exact(e, sw.StrideWeaveRuntimeError)
    del view
    gc.collect()
    moved = sw.move_async(t, carriers.Host(0)).wait()
    assert t.carrier.is_released()
    for _ in range(200):  # the loop thread drops the reference through a pending call
        if sys.getrefcount(a) == before:
            break
        time.sleep(0.005)
    assert sys.getrefcount(a) == before
    np.testing.assert_array_equal(moved.numpy(), a)


@pytest.mark.parametrize("make", [
    lambda: np.frombuffer(bytearray(17), dtype=np.float32, count=4, offset=1),  # misaligned
    lambda: np.arange(6, dtype=">f4").reshape(2, 3),  # big-endian: converted, then shared
    lambda: np.zeros((0, 3), np.float32),
    lambda: np.lib.stride_tricks.as_strided(np.zeros(8, np.int32), (3,), (6,)),  # strides of 1.5 elements
])
def test_arrays_that_cannot_be_shared_are_copied_with_their_values(make):
    a = make()
    t = sw.from_numpy(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert a.size == 0 or not np.shares_memory(t.numpy(), a)


def test_other_carrier_classes_copy():
    a = np.arange(4, dtype=np.float32)
    for cls in (carriers.Host, carriers.Zstd):
        t = sw.from_numpy(a, cls)
        assert isinstance(t.carrier, cls)
        a[0] = 9.0
        assert t[0] == 0.0
        a[0] = 0.0


def test_from_dlpack_shares_the_producers_memory():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    before = sys.getrefcount(a)
    t = sw.from_dlpack(a)
    assert np.shares_memory(t.numpy(), a)
    a[2, 1] = -3.0
    assert t[2, 1] == -3.0
    assert sys.getrefcount(a) > before  # the producer's export holds it
    t.carrier.release()
    gc.collect()
    assert sys.getrefcount(a) == before


def test_array_protocol_copy_keyword():
    t = sw.from_numpy(np.arange(4, dtype=np.float32))
    assert np.shares_memory(np.asarray(t, copy=False), t.numpy())
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    with pytest.raises(ValueError):
        np.asarray(z, copy=False)
    np.testing.assert_array_equal(np.asarray(z, dtype=np.float64), np.arange(4))
