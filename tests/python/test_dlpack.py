"""DLPack through the library's exports: Tensor.__dlpack__ follows the
array-API protocol (a "dltensor_versioned" capsule for a consumer of DLPack
1.0 or later, else "dltensor"), NumPy consumes and produces both, a capsule
is consumed once, and each export counts as one export of its carrier until
its deleter runs, exactly once."""
import ctypes
import gc

import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers

READ_ONLY, IS_COPIED = 1 << 0, 1 << 1  # DLPACK_FLAG_BITMASK_*

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _VersionedHead(ctypes.Structure):
    """The fields of DLManagedTensorVersioned before its DLTensor."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64)]


def name(capsule):
    return _api.PyCapsule_GetName(capsule).decode()


def head(capsule):
    """Version and flags of an unconsumed "dltensor_versioned" capsule."""
    m = _VersionedHead.from_address(_api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"))
    return (m.major, m.minor), m.flags


def cpu_tensor(values=(0.0, 1.5, -2.0, 3.0)):
    return sw.from_numpy(np.asarray(values, dtype=np.float32))


@pytest.mark.parametrize("max_version, expected", [
    (None, "dltensor"), ((0, 8), "dltensor"), ((1, 0), "dltensor_versioned"), ((1, 7), "dltensor_versioned"),
    ((2, 0), "dltensor_versioned"), ((2**40, 0), "dltensor_versioned")])
def test_the_consumer_version_picks_the_capsule(max_version, expected):
    t = cpu_tensor()
    capsule = t.__dlpack__() if max_version is None else t.__dlpack__(max_version=max_version)
    assert name(capsule) == expected
    np.testing.assert_array_equal(sw.from_dlpack(capsule).numpy(), t.numpy())


def test_versions_and_flags_of_versioned_capsules():
    t = cpu_tensor()
    assert head(t.__dlpack__(max_version=(1, 0))) == ((1, 0), 0)
    (major, minor), _ = head(t.__dlpack__(max_version=(1, 1000)))
    assert major == 1 and 1 <= minor < 1000  # this library's 1.x, no newer than asked
    assert head(t.__dlpack__(max_version=(3, 0)))[0] == (major, minor)
    read_only = np.arange(4, dtype=np.float32)
    read_only.flags.writeable = False
    assert head(sw.from_numpy(read_only).__dlpack__(max_version=(1, 0)))[1] == READ_ONLY
    # Exports that are copies (a compressed carrier, copy=True) are flagged as such.
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    assert head(z.__dlpack__(max_version=(1, 0)))[1] == IS_COPIED
    assert head(t.__dlpack__(max_version=(1, 0), copy=True))[1] == IS_COPIED
    assert head(sw.from_numpy(read_only).__dlpack__(max_version=(1, 0), copy=True))[1] == IS_COPIED


def test_numpy_consumes_our_exports_in_place():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    t = sw.from_numpy(a)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(b, a)
    b[2, 1] = -7.0
    assert t[2, 1] == -7.0
    read_only = a.copy()
    read_only.flags.writeable = False
    assert not np.from_dlpack(sw.from_numpy(read_only)).flags.writeable
    copied = np.from_dlpack(t, copy=True)
    assert not np.shares_memory(copied, a)
    np.testing.assert_array_equal(copied, a)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_numpy_producers_capsules_import_in_place(max_version):
    a = np.arange(6, dtype=np.int32).reshape(2, 3).T
    capsule = a.__dlpack__() if max_version is None else a.__dlpack__(max_version=max_version)
    assert name(capsule) == ("dltensor" if max_version is None else "dltensor_versioned")
    t = sw.from_dlpack(capsule)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal(t.numpy(), a)
    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    imported = sw.from_dlpack(read_only.__dlpack__(max_version=(1, 0)))
    assert imported.carrier.is_read_only()


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_capsule_is_consumed_once(max_version):
    t = cpu_tensor()
    capsule = t.__dlpack__() if max_version is None else t.__dlpack__(max_version=max_version)
    first = sw.from_dlpack(capsule)
    assert name(capsule) == "used_" + ("dltensor" if max_version is None else "dltensor_versioned")
    with pytest.raises(sw.StrideWeaveTypeError, match="unconsumed DLPack capsule"):
        sw.from_dlpack(capsule)
    np.testing.assert_array_equal(first.numpy(), t.numpy())


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_each_export_holds_its_carrier_until_its_deleter_runs_once(max_version):
    kwargs = {} if max_version is None else {"max_version": max_version}
    t = cpu_tensor()
    c = t.carrier
    # Unconsumed: the capsule's destructor deletes the export.
    capsule = t.__dlpack__(**kwargs)
    assert c._exports == 1
    del capsule
    gc.collect()
    assert c._exports == 0
    # Consumed by NumPy: its array deletes the export when it goes.
    a, b = np.from_dlpack(t), np.from_dlpack(t)
    assert c._exports == 2
    with pytest.raises(sw.StrideWeaveRuntimeError, match=r"exported view\(s\) \(NumPy, DLPack, tinygrad\)"):
        c.release()
    del a
    gc.collect()
    assert c._exports == 1
    del b
    gc.collect()
    assert c._exports == 0
    # Consumed by strideweave: the importing carrier deletes it when released.
    imported = sw.from_dlpack(t.__dlpack__(**kwargs))
    assert c._exports == 1
    imported.carrier.release()
    gc.collect()
    assert c._exports == 0  # not below: the deleter ran once
    c.release()
    assert c.is_released()


def test_the_export_keeps_the_tensor_alive():
    t = sw.from_numpy(np.arange(5, dtype=np.float32))
    capsule = t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()
    np.testing.assert_array_equal(sw.from_dlpack(capsule).numpy(), np.arange(5, dtype=np.float32))


def test_protocol_arguments():
    t = cpu_tensor()
    assert t.__dlpack_device__() == (1, 0)
    assert name(t.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=None)) == "dltensor_versioned"
    assert name(t.__dlpack__(stream=-1)) == "dltensor"
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="device"):
        t.__dlpack__(dl_device=(2, 0))
    z = sw.from_numpy(np.arange(4, dtype=np.float32), carriers.Zstd)
    with pytest.raises(BufferError, match="without a copy"):
        z.__dlpack__(max_version=(1, 0), copy=False)
    assert t.carrier._exports == 0  # refused exports hold nothing


def test_an_unaligned_producer_is_copied():
    raw = np.frombuffer(bytearray(range(16)), dtype=np.float32, offset=2, count=3)
    assert not raw.flags.aligned
    t = sw.from_dlpack(raw)
    np.testing.assert_array_equal(t.numpy(), raw)
    assert not np.shares_memory(t.numpy(), raw)


def test_a_reversed_producer_is_shared():
    # NumPy exports negative strides: the carrier starts at the lowest
    # address the view reaches and the tensor's first slot is its far end.
    base = np.arange(6, dtype=np.float32)
    t = sw.from_dlpack(base[::-2])
    np.testing.assert_array_equal(t.numpy(), [5, 3, 1])
    assert t.carrier.size() == 5 and str(t.layout) == "(3):(-2)" and np.shares_memory(t.numpy(), base)
    base[3] = -1
    assert t[1] == -1
