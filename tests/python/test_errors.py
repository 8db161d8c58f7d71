"""Every error code becomes its spec exception kind, also an sw.Error with .code."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import _native as N
from conftest import exact

KINDS = [
    (sw.StrideWeaveTypeError, TypeError, sw.ErrorCode.TYPE),
    (sw.StrideWeaveValueError, ValueError, sw.ErrorCode.VALUE),
    (sw.StrideWeaveRuntimeError, RuntimeError, sw.ErrorCode.STATE),
    (sw.StrideWeaveNotImplementedError, NotImplementedError, sw.ErrorCode.UNSUPPORTED),
    (sw.StrideWeaveIndexError, IndexError, sw.ErrorCode.INDEX),
    (sw.StrideWeaveMemoryError, MemoryError, sw.ErrorCode.OUT_OF_MEMORY),
    (sw.StrideWeaveOSError, OSError, sw.ErrorCode.IO),
    (sw.DataCorruptError, ValueError, sw.ErrorCode.DATA_CORRUPT),
    (sw.DeviceLostError, RuntimeError, sw.ErrorCode.DEVICE_LOST),
    (sw.StaleHandleError, RuntimeError, sw.ErrorCode.STALE_HANDLE),
    (sw.StrideWeaveTimeoutError, TimeoutError, sw.ErrorCode.TIMEOUT),
    (sw.CancelledError, RuntimeError, sw.ErrorCode.CANCELLED),
    (sw.InternalError, RuntimeError, sw.ErrorCode.INTERNAL),
]


@pytest.mark.parametrize("cls,builtin,code", KINDS)
def test_each_kind_is_its_builtin_and_an_error(cls, builtin, code):
    e = cls("message")
    assert isinstance(e, builtin) and isinstance(e, sw.Error) and e.code == code and str(e) == "message"
    assert issubclass(cls, builtin) and issubclass(cls, sw.Error)


def test_codes_are_pinned():
    assert [int(c) for c in sw.ErrorCode] == list(range(14))
    for code in sw.ErrorCode:
        if code:
            assert N.sw_error_code_name(int(code)) == code.name


def test_library_errors_arrive_as_their_kind():
    rt = sw.Runtime()
    try:
        te = sw.TiledEvictable(sw.carriers.CPU(0, runtime=rt), sw.carriers.Host(8, runtime=rt), (4,), (2,))
        N.sw_testing_inject_fault(rt._h, N.SW_FAULT_ALLOCATION, 1)
        with pytest.raises(MemoryError) as e:
            te.promote(sw.TileSet([(1,)]))
        exact(e, sw.StrideWeaveMemoryError)
        assert te.tile_state(1).location == "secondary"
        N.sw_testing_inject_fault(rt._h, N.SW_FAULT_READ, 1)
        with pytest.raises(OSError) as e:
            sw.TiledEvictable(sw.carriers.CPU(0, runtime=rt), sw.carriers.File(8, runtime=rt), (4,), (2,)).promote(
                sw.TileSet([(0,)]))
        exact(e, sw.StrideWeaveOSError)
        compressed = sw.carriers.Zstd(4, runtime=rt)
        with pytest.raises(NotImplementedError) as e:
            N.sw_carrier_host_pointer(compressed._h)
        exact(e, sw.StrideWeaveNotImplementedError)
        t = sw.from_numpy(np.array([1.0, 2.0], np.float32), runtime=rt)
        with pytest.raises(IndexError) as e:
            t[2]
        exact(e, sw.StrideWeaveIndexError)
        rt.shutdown()
        with pytest.raises(RuntimeError) as e:
            sw.move_async(t, sw.carriers.Host(0, runtime=rt))
        err = exact(e, sw.CancelledError)
        assert err.code == sw.ErrorCode.CANCELLED
    finally:
        rt.shutdown()


def test_errors_raised_in_python_use_the_same_classes():
    with pytest.raises(TypeError) as e:
        sw.TileSet(5)
    assert exact(e, sw.StrideWeaveTypeError).code == sw.ErrorCode.TYPE


def test_injected_allocation_failure_on_creation_then_retry():
    rt = sw.Runtime()
    try:
        N.sw_testing_inject_fault(rt._h, N.SW_FAULT_ALLOCATION, 1)
        with pytest.raises(MemoryError) as e:
            sw.carriers.CPU(16, runtime=rt)
        exact(e, sw.StrideWeaveMemoryError)
        assert "injected allocation failure" in str(e.value)
        assert sw.carriers.CPU(16, runtime=rt).size() == 16
        # A shared import allocates nothing, so the armed fault waits for the next carrier.
        N.sw_testing_inject_fault(rt._h, N.SW_FAULT_ALLOCATION, 1)
        t = sw.from_numpy(np.arange(4, dtype=np.float32), runtime=rt)
        assert t.numpy().tolist() == [0, 1, 2, 3]
        with pytest.raises(sw.StrideWeaveMemoryError):
            sw.carriers.Host(4, runtime=rt)
    finally:
        rt.shutdown()
