"""strideweave.interop.to_tinygrad against the real tinygrad on its CPU
device: zero-copy views with exact values for every layout tinygrad can
represent, writes seen both ways, the StrideWeave owner kept alive while
tinygrad holds the memory, and refusals of exact types."""
import gc
import weakref

import numpy as np
import pytest

import strideweave as sw
from conftest import exact, seeded_tiled
from strideweave import interop
from strideweave.interop import to_tinygrad

tinygrad = pytest.importorskip("tinygrad")
from tinygrad import Tensor as TgTensor, dtypes  # noqa: E402

HOST_DEVICES = ("CPU", "CLANG")

DTYPES = [(sw.float32, dtypes.float32), (sw.float64, dtypes.float64), (sw.float16, dtypes.float16),
          (sw.int32, dtypes.int32), (sw.int64, dtypes.int64), (sw.uint8, dtypes.uint8), (sw.bool_, dtypes.bool)]
SHAPES = [(5,), (3, 4), (2, 3, 4)]


def sample(dtype, shape):
    """Distinct values of `dtype` (NumPy), exactly representable in it."""
    n = int(np.prod(shape))
    values = np.arange(n, dtype=np.float64) * 1.25 - 3
    if dtype is sw.bool_:
        return (np.arange(n) % 3 == 1).reshape(shape)
    if dtype is sw.uint8:
        return (np.arange(n) * 7 % 251).astype(np.uint8).reshape(shape)
    if dtype in (sw.int32, sw.int64):
        return (np.arange(n) * 1000003 - 40).astype(dtype.numpy).reshape(shape)
    return values.astype(dtype.numpy).reshape(shape)


def owned(values, dtype=None):
    """A tensor on a CPU carrier that owns a copy of `values`, dense first
    mode fastest."""
    t = sw.tensor(np.asfortranarray(values), dtype=dtype)
    assert t.numpy().flags.f_contiguous
    return t


def same(x, expected):
    """x (tinygrad) holds exactly `expected` (NumPy), shape and dtype included."""
    got = x.numpy()
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)


# ---- values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtypes_", DTYPES, ids=lambda d: d[0].name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dense_tensor_has_exact_values(dtypes_, shape):
    swdtype, tgdtype = dtypes_
    values = sample(swdtype, shape)
    t = owned(values, swdtype)
    x = to_tinygrad(t)
    assert x.dtype == tgdtype
    assert x.shape == shape
    assert x.device in HOST_DEVICES
    same(x, values)
    same(x, t.numpy())
    # Index for index, as t[i, j, k].
    coord = tuple(n - 1 for n in shape)
    assert x[coord].numpy().item() == t[coord]  # tinygrad's .item() of float16 needs Python 3.12


def test_bfloat16_bits_are_shared():
    values = np.array([1.0, -2.5, 3.0, 0.5, 65536.0, -0.125], dtype=np.float32)  # exact in bfloat16
    t = owned(values, sw.bfloat16)
    x = to_tinygrad(t)
    assert x.dtype == dtypes.bfloat16 and x.shape == (6,)
    # The bits themselves, without a kernel: tinygrad's bfloat16 arithmetic
    # (and so numpy() of a bfloat16 tensor) needs a host compiler with __bf16.
    assert np.array_equal(x.bitcast(dtypes.uint16).numpy(), sw._dtypes.bf16_bits(values))
    t[4] = -1.5
    assert x.bitcast(dtypes.uint16).numpy()[4] == 0xBFC0
    m = to_tinygrad(owned(values.reshape(2, 3), sw.bfloat16))
    assert m.dtype == dtypes.bfloat16 and m.shape == (2, 3)


def test_rank0_tensor():
    t = sw.full((), 2.5)
    assert t.shape == ()
    x = to_tinygrad(t)
    assert x.shape == ()
    assert x.item() == 2.5


def test_explicit_host_device():
    t = owned(sample(sw.float32, (3, 4)))
    name = to_tinygrad(t).device
    x = to_tinygrad(t, device=name)
    assert x.device == name
    same(x, t.numpy())


def test_host_carrier():
    c = sw.carriers.Host(6, dtype=sw.int32)
    for i in range(6):
        c[i] = 10 * i
    t = sw.Tensor(c, 0, sw.Layout.dense(2, 3))
    same(to_tinygrad(t), np.array([[0, 20, 40], [10, 30, 50]], dtype=np.int32))


def test_empty_tensor_gives_an_empty_tinygrad_tensor():
    t = sw.zeros(0, 3)
    x = to_tinygrad(t)
    assert x.shape == (0, 3) and x.dtype == dtypes.float32
    assert x.numpy().shape == (0, 3)


# ---- layouts ----------------------------------------------------------------------------------------


def test_row_major_tensor_from_numpy():
    a = sample(sw.float32, (3, 4))  # C order: strides (4, 1)
    t = sw.from_numpy(a)
    assert t.layout.stride.modes == (4, 1)
    same(to_tinygrad(t), a)


def test_transposes_and_permutations():
    values = sample(sw.float32, (2, 3, 4))
    t = owned(values)
    same(to_tinygrad(t.T), values.transpose(2, 1, 0))
    same(to_tinygrad(t.permute(1, 2, 0)), values.transpose(1, 2, 0))
    same(to_tinygrad(t.transpose(0, 1)), values.transpose(1, 0, 2))


def test_offset_block():
    values = sample(sw.float32, (2, 3, 4))
    t = owned(values)
    block = t[:, :, 2]  # first mode fastest: the last index picks one dense block
    assert block.offset == 12
    same(to_tinygrad(block), values[:, :, 2])
    row = t[:, :, 1:3]
    assert row.offset == 6
    same(to_tinygrad(row), values[:, :, 1:3])


def test_negative_strides():
    a = sample(sw.float32, (3, 4))
    t = sw.from_numpy(a[::-1, ::-1])
    same(to_tinygrad(t), a[::-1, ::-1])


def test_broadcast_mode():
    t = owned(sample(sw.float32, (3, 1)))
    e = t.expand(3, 4)
    assert e.layout.stride.modes[1] == 0
    x = to_tinygrad(e)
    same(x, np.broadcast_to(t.numpy(), (3, 4)))


def test_unit_modes():
    values = sample(sw.int32, (1, 4, 1))
    same(to_tinygrad(owned(values)), values)


# ---- shared writes ----------------------------------------------------------------------------------------


def test_strideweave_writes_are_seen_by_tinygrad():
    t = owned(sample(sw.float32, (3, 4)))
    x = to_tinygrad(t)
    x.realize()
    t[1, 2] = 100.0
    with sw.no_grad():
        t[0] += 1  # an in-place op on a view writes the same memory
    expected = sample(sw.float32, (3, 4))
    expected[1, 2] = 100.0
    expected[0] += 1
    same(x, expected)
    same(x * 2, expected * 2)  # realized now, from the memory as it is now


def test_tinygrad_assign_is_seen_by_strideweave():
    values = sample(sw.float32, (2, 3, 4))
    t = owned(values)
    x = to_tinygrad(t)
    new = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * -2
    x.assign(TgTensor(new, device=x.device)).realize()
    assert np.array_equal(t.numpy(), new)
    assert t[1, 2, 3] == new[1, 2, 3]


def test_tinygrad_assign_through_a_transposed_view():
    values = sample(sw.int32, (3, 4))
    t = owned(values)
    x = to_tinygrad(t.T)
    x.assign(x * 10 + 1).realize()
    assert np.array_equal(t.numpy(), values * 10 + 1)


def test_tinygrad_setitem_is_seen_by_strideweave():
    t = owned(sample(sw.float32, (3, 4)))
    x = to_tinygrad(t)
    x[2, 1] = 42.0
    x.realize()
    assert t[2, 1] == 42.0
    assert t[0, 0] == -3.0


# ---- lifetime ----------------------------------------------------------------------------------------


def test_the_strideweave_tensor_outlives_its_handle():
    values = sample(sw.float64, (4, 5))
    t = owned(values)
    carrier = weakref.ref(t.carrier)
    x = to_tinygrad(t)
    y = (x + 1) * 2  # lazy: reads the memory only when realized
    del t
    gc.collect()
    assert carrier() is not None
    same(x, values)
    del x
    gc.collect()
    assert carrier() is not None  # y still needs the buffer
    same(y, (values + 1) * 2)
    del y
    gc.collect()
    assert carrier() is None  # tinygrad dropped the buffer: the owner goes with it


def test_release_is_refused_while_tinygrad_holds_the_memory():
    t = owned(sample(sw.float32, (3, 4)))
    c = t.carrier
    x = to_tinygrad(t)
    with pytest.raises(sw.StrideWeaveRuntimeError) as e:
        c.release()
    exact(e, sw.StrideWeaveRuntimeError)
    assert not c.is_released()
    same(x, sample(sw.float32, (3, 4)))
    del x
    gc.collect()
    c.release()
    assert c.is_released()


# ---- refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [np.zeros((2, 2), np.float32), [[1.0, 2.0]], 3.0, None],
                         ids=["ndarray", "list", "float", "None"])
def test_refuses_other_objects(obj):
    with pytest.raises(TypeError) as e:
        to_tinygrad(obj)
    exact(e, sw.StrideWeaveTypeError)
    assert "strideweave.Tensor" in str(e.value)


def test_refuses_a_carrier():
    with pytest.raises(TypeError) as e:
        to_tinygrad(sw.carriers.CPU(4))
    exact(e, sw.StrideWeaveTypeError)
    assert "not CPU" in str(e.value)


def test_refuses_a_dtype_tinygrad_lacks(monkeypatch):
    monkeypatch.delitem(interop._TINYGRAD_DTYPES, sw.bfloat16)
    with pytest.raises(TypeError) as e:
        to_tinygrad(owned(np.ones((2, 2), np.float32), sw.bfloat16))
    exact(e, sw.StrideWeaveTypeError)
    assert "bfloat16" in str(e.value)


def test_refuses_a_device_that_is_not_a_name():
    with pytest.raises(TypeError) as e:
        to_tinygrad(owned(np.ones(3, np.float32)), device=0)
    exact(e, sw.StrideWeaveTypeError)


def test_refuses_a_device_that_is_not_host_memory():
    with pytest.raises(ValueError) as e:
        to_tinygrad(owned(np.ones(3, np.float32)), device="CUDA")
    exact(e, sw.StrideWeaveValueError)
    assert "'CUDA'" in str(e.value) and "host memory" in str(e.value)


def test_refuses_a_slice_with_gaps():
    t = owned(sample(sw.float32, (4, 6)))
    for view in (t[1:3, :], t[:, ::2], t[::2]):
        with pytest.raises(ValueError) as e:
            to_tinygrad(view)
        exact(e, sw.StrideWeaveValueError)
        assert "not one dense block" in str(e.value) and "contiguous" in str(e.value)
    # The copy is dense.
    same(to_tinygrad(sw.contiguous(t[1:3, :])), sample(sw.float32, (4, 6))[1:3, :])


def test_refuses_overlapping_strides():
    c = sw.carriers.CPU(6)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(3, 3), sw.Stride(1, 1)))  # sliding windows
    with pytest.raises(ValueError) as e:
        to_tinygrad(t)
    exact(e, sw.StrideWeaveValueError)
    assert "not one dense block" in str(e.value)


def test_refuses_a_nested_mode_that_is_not_one_progression():
    c = sw.carriers.CPU(16)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape((2, 2), 2), sw.Stride((1, 4), 2)))
    assert t.shape == (4, 2)
    with pytest.raises(ValueError) as e:
        to_tinygrad(t)
    exact(e, sw.StrideWeaveValueError)
    assert "nested mode" in str(e.value)


def test_refuses_a_released_tensor():
    t = owned(np.ones((2, 2), np.float32))
    t.carrier.release()
    with pytest.raises(ValueError) as e:
        to_tinygrad(t)
    exact(e, sw.StrideWeaveValueError)
    assert "released" in str(e.value)


def test_refuses_a_tiled_full_tensor():
    values = np.arange(16, dtype=np.float32)
    tiled = seeded_tiled(values, (2, 2), (2, 2))
    full = tiled.full_tensor()
    with pytest.raises(ValueError) as e:
        to_tinygrad(full)
    exact(e, sw.StrideWeaveValueError)
    assert "not host memory" in str(e.value) and "project" in str(e.value)


def test_refuses_a_carrier_that_is_not_host_memory():
    c = sw.carriers.Zstd(4)
    with pytest.raises(ValueError) as e:
        to_tinygrad(sw.Tensor(c, 0, sw.Layout.dense(4)))
    exact(e, sw.StrideWeaveValueError)
    assert "Zstd" in str(e.value) and "not host memory" in str(e.value)


def test_refuses_a_read_only_carrier():
    a = sample(sw.float32, (3, 4))
    a.flags.writeable = False
    t = sw.from_numpy(a)
    assert t.carrier.is_read_only()
    with pytest.raises(ValueError) as e:
        to_tinygrad(t)
    exact(e, sw.StrideWeaveValueError)
    assert "read-only" in str(e.value)
    same(to_tinygrad(sw.clone(t)), a)


# ---- device views ----------------------------------------------------------------------------------------
#
# A device allocation holds one object of its spec (dtype, shape), dense first
# mode fastest: the bytes of a NumPy array in Fortran order.


def device_object(values, dtype, device=None):
    """(allocation, view) of a host device's allocation for `values`, written
    through the device bridge's host-to-device copy."""
    device = sw.Device.host() if device is None else device
    allocation = device.alloc(values.shape, dtype)
    if values.size:
        allocation.host_to_device(np.asfortranarray(values))
    return allocation, allocation.view()


def device_values(allocation, dtype=None):
    """The allocation's object read back with a device-to-host copy."""
    dtype = allocation.dtype if dtype is None else dtype
    out = np.empty(allocation.shape, dtype=dtype.numpy, order="F")
    allocation.device_to_host(out)
    return out


def test_device_view_describes_the_spec():
    device = sw.Device.host()
    assert device.kind == "host" and device.generation == 1
    allocation = device.alloc((3, 4), sw.int32)
    assert allocation.shape == (3, 4) and allocation.dtype is sw.int32 and allocation.extent_bytes == 48
    view = allocation.view()
    assert isinstance(view, sw.DeviceView)
    assert view.shape == (3, 4) and view.dtype is sw.int32 and view.strides == (4, 12)
    assert view.host_visible and isinstance(view.pointer, int) and view.pointer % 16 == 0
    assert view.allocation is allocation and view.device is device and view.generation == 1
    assert allocation.view(sw.int32, (3, 4)).pointer == view.pointer


@pytest.mark.parametrize("dtypes_", DTYPES, ids=lambda d: d[0].name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_device_view_has_the_values_copied_to_the_device(dtypes_, shape):
    swdtype, tgdtype = dtypes_
    values = sample(swdtype, shape)
    allocation, view = device_object(values, swdtype)
    x = to_tinygrad(view)
    assert x.dtype == tgdtype and x.shape == shape and x.device in HOST_DEVICES
    same(x, values)
    coord = tuple(n - 1 for n in shape)
    assert x[coord].numpy().item() == values[coord]


def test_device_view_of_bfloat16_shares_the_bits():
    values = np.array([1.0, -2.5, 3.0, 0.5, 65536.0, -0.125], dtype=np.float32)
    device = sw.Device.host()
    allocation = device.alloc(6, sw.bfloat16)
    allocation.host_to_device(sw._dtypes.bf16_bits(values))
    x = to_tinygrad(allocation.view())
    assert x.dtype == dtypes.bfloat16 and x.shape == (6,)
    assert np.array_equal(x.bitcast(dtypes.uint16).numpy(), sw._dtypes.bf16_bits(values))


def test_device_view_of_a_fake_device_with_host_memory():
    values = sample(sw.float32, (2, 3))
    allocation, view = device_object(values, sw.float32, sw.Device.fake())
    assert view.device.kind == "fake" and view.host_visible
    same(to_tinygrad(view), values)


def test_device_view_rank0_and_empty():
    allocation, view = device_object(np.array(2.5, np.float64), sw.float64)
    x = to_tinygrad(view)
    assert x.shape == () and x.item() == 2.5
    empty = sw.Device.host().alloc((0, 3), sw.float32)
    x = to_tinygrad(empty.view())
    assert x.shape == (0, 3) and x.dtype == dtypes.float32


def test_host_to_device_copies_are_seen_by_tinygrad():
    values = sample(sw.float32, (3, 4))
    allocation, view = device_object(values, sw.float32)
    x = to_tinygrad(view)
    x.realize()
    new = values * 3 + 1
    allocation.host_to_device(np.asfortranarray(new))
    same(x, new)
    # A partial copy: bytes [4, 8) are element (1, 0), first mode fastest.
    allocation.host_to_device(np.array([-7.0], np.float32), offset=4)
    new[1, 0] = -7.0
    same(x + 0, new)


def test_tinygrad_writes_are_seen_by_a_device_to_host_copy():
    values = sample(sw.int32, (2, 3, 4))
    allocation, view = device_object(values, sw.int32)
    x = to_tinygrad(view)
    x.assign(x * 10 + 1).realize()
    assert np.array_equal(device_values(allocation), values * 10 + 1)
    x[1, 2, 3] = 99
    x.realize()
    assert device_values(allocation)[1, 2, 3] == 99
    out = bytearray(4)
    allocation.device_to_host(out, offset=4)  # element (1, 0, 0)
    assert np.frombuffer(out, np.int32)[0] == values[1, 0, 0] * 10 + 1


def test_device_view_lives_while_tinygrad_holds_it():
    values = sample(sw.float64, (4, 5))
    allocation, view = device_object(values, sw.float64)
    device = weakref.ref(allocation.device)
    alive = weakref.ref(view), weakref.ref(allocation)
    x = to_tinygrad(view)
    y = (x + 1) * 2  # lazy: reads the memory only when realized
    with pytest.raises(RuntimeError) as e:
        allocation.free()  # the view held by tinygrad is a use of the allocation
    exact(e, sw.StrideWeaveRuntimeError)
    assert "in use" in str(e.value)
    del allocation, view, e  # the traceback holds the allocation too
    gc.collect()
    assert all(r() is not None for r in alive) and device() is not None
    same(x, values)
    del x
    gc.collect()
    assert alive[0]() is not None  # y still needs the buffer
    same(y, (values + 1) * 2)
    del y
    gc.collect()
    assert all(r() is None for r in alive) and device() is None  # the buffer gone, the owners go with it


def test_device_view_outlives_its_device_handle():
    values = sample(sw.int64, (3, 2))
    allocation, view = device_object(values, sw.int64)
    x = to_tinygrad(view)
    del allocation, view
    gc.collect()
    same(x * 2, values * 2)


def test_device_view_refuses_another_dtype_or_shape():
    allocation = sw.Device.host().alloc((2, 3), sw.float32)
    with pytest.raises(TypeError) as e:
        allocation.view(sw.int32)
    exact(e, sw.StrideWeaveTypeError)
    assert "i32" in str(e.value) and "f32" in str(e.value)
    for shape in ((3, 2), (6,), (2, 3, 1)):
        with pytest.raises(ValueError) as e:
            allocation.view(sw.float32, shape)
        exact(e, sw.StrideWeaveValueError)
        assert "shape" in str(e.value)


def test_refuses_a_device_view_that_is_not_host_visible():
    device = sw.Device.fake(host_visible=False)
    allocation = device.alloc((2, 3), sw.float32)
    view = allocation.view()
    assert view.pointer is None and not view.host_visible
    with pytest.raises(ValueError) as e:
        to_tinygrad(view)
    exact(e, sw.StrideWeaveValueError)
    assert "not host visible" in str(e.value) and "fake" in str(e.value)


def test_refuses_a_stale_device_view():
    values = sample(sw.float32, (2, 2))
    allocation, view = device_object(values, sw.float32)
    allocation.device.restart()
    assert allocation.device.generation == 2 and view.generation == 1
    with pytest.raises(sw.StaleHandleError) as e:
        to_tinygrad(view)
    exact(e, sw.StaleHandleError)
    assert "generation 1" in str(e.value)
    with pytest.raises(sw.StaleHandleError):
        allocation.view()
    with pytest.raises(sw.StaleHandleError):
        allocation.host_to_device(np.zeros(4, np.float32))
    # A new allocation of the new generation works.
    fresh = allocation.device.alloc((2, 2), sw.float32)
    fresh.host_to_device(np.asfortranarray(values))
    same(to_tinygrad(fresh.view()), values)


def test_refuses_a_device_view_dtype_tinygrad_lacks(monkeypatch):
    allocation = sw.Device.host().alloc(4, sw.bfloat16)
    view = allocation.view()
    monkeypatch.delitem(interop._TINYGRAD_DTYPES, sw.bfloat16)
    with pytest.raises(TypeError) as e:
        to_tinygrad(view)
    exact(e, sw.StrideWeaveTypeError)
    assert "bfloat16" in str(e.value)


def test_device_view_refuses_a_device_that_is_not_host_memory():
    allocation, view = device_object(sample(sw.float32, (2,)), sw.float32)
    with pytest.raises(ValueError) as e:
        to_tinygrad(view, device="CUDA")
    exact(e, sw.StrideWeaveValueError)


def test_refuses_a_device_allocation():
    allocation = sw.Device.host().alloc(4)
    with pytest.raises(TypeError) as e:
        to_tinygrad(allocation)
    exact(e, sw.StrideWeaveTypeError)
    assert "DeviceView" in str(e.value)


def test_interop_is_part_of_the_package():
    assert sw.interop.to_tinygrad is to_tinygrad
    assert "interop" in sw.__all__ and "DeviceView" in sw.__all__
