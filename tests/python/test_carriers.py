"""Ordinary carriers: CPU, Host, File, Zstd, Vulkan."""
import os

import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from conftest import exact


@pytest.mark.parametrize("make", [
    lambda n: carriers.CPU(n), lambda n: carriers.Host(n), lambda n: carriers.File(n),
    lambda n: carriers.Zstd(n, level=3),
])
def test_common_carrier_surface(make):
    c = make(6)
    assert c.size() == 6 and len(c) == 6 and c.dtype is sw.float32
    assert c.is_mutable() and not c.is_owned() and not c.is_released()
    assert all(c[i] == 0.0 for i in range(6))
    v = c.version
    c[2] = 4.5
    assert c[2] == 4.5 and c[-4] == 4.5 and c.version == v + 1
    with pytest.raises(IndexError) as e:
        c[6]
    exact(e, sw.StrideWeaveIndexError)
    with pytest.raises(sw.StrideWeaveTypeError):
        c[1.0]
    c.release()
    c.release()  # idempotent
    assert c.is_released() and c.size() == 6 and not c.is_mutable()
    with pytest.raises(RuntimeError) as e:
        c[0]
    exact(e, sw.StrideWeaveRuntimeError)


def test_size_zero_makes_an_empty_carrier():
    for cls in (carriers.CPU, carriers.Host, carriers.File, carriers.Zstd):
        assert cls(0).size() == 0


def test_cpu_from_values_and_dtypes():
    c = carriers.CPU.from_values([1, 2, 3], dtype=sw.int32)
    assert c.dtype is sw.int32 and [c[i] for i in range(3)] == [1, 2, 3]
    c = carriers.CPU.from_values(iter([0.5, 1.5]), dtype=sw.bfloat16)
    assert [c[0], c[1]] == [0.5, 1.5]
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.CPU.from_values(["a"], dtype=sw.float32)
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.CPU(4, dtype="complex64")
    with pytest.raises(sw.StrideWeaveValueError):
        carriers.CPU(-1)
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.CPU(2.0)


def _open_scratch_files(directory):
    """This process's open files made in `directory` and already unlinked."""
    prefix = os.path.join(str(directory), "strideweave-")
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and target.endswith(" (deleted)"):
            found.append(target)
    return found


def test_file_scratch_carrier_is_unlinked_at_creation(tmp_path):
    c = carriers.File(1024, dtype=sw.float64, directory=tmp_path)
    c[1000] = 3.25
    assert c[1000] == 3.25
    assert os.listdir(tmp_path) == []  # never visible, so a crash leaves nothing
    assert len(_open_scratch_files(tmp_path)) == 1
    c.release()
    assert _open_scratch_files(tmp_path) == []


def test_file_open_is_a_read_only_window(tmp_path):
    path = tmp_path / "weights.bin"
    data = np.arange(10, dtype=np.float32)
    path.write_bytes(b"HEAD" + data.tobytes())
    c = carriers.File.open(path, 4, 10, dtype=sw.float32)
    assert [c[i] for i in range(10)] == list(map(float, data))
    assert not c.is_mutable()
    with pytest.raises(RuntimeError) as e:
        c[0] = 1.0
    exact(e, sw.StrideWeaveRuntimeError)
    with pytest.raises(ValueError) as e:
        carriers.File.open(path, 4, 11, dtype=sw.float32)
    exact(e, sw.StrideWeaveValueError)
    with pytest.raises(OSError) as e:
        carriers.File.open(tmp_path / "missing.bin", 0, 1)
    exact(e, sw.StrideWeaveOSError)
    c.release()
    assert path.exists()


def _opens_with_o_direct(directory):
    """Whether the file system of `directory` opens a file with O_DIRECT
    (where it refuses, a direct-I/O carrier reads buffered)."""
    path = directory / "o_direct.bin"
    path.write_bytes(bytes(4096))
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECT))
    except OSError:
        return False
    finally:
        path.unlink()
    return True


def test_file_io_of_a_buffered_carrier_is_the_defaults(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    np.save(tmp_path / "w.npy", np.zeros((2, 3), dtype=np.float32))
    scratch = carriers.File(16, directory=tmp_path)
    for c in (scratch, carriers.File.open(path, 0, 16), carriers.File.open_npy(tmp_path / "w.npy").carrier):
        io = c.io
        assert type(io) is carriers.FileIO
        assert (io.chunk_bytes, io.requests_in_flight, io.direct_io) == (4194304, 4, False)
        assert io.source == "default" and io.device_read_bytes_per_second == 0.0
        assert isinstance(io.device, int) and isinstance(io.device_read_bytes_per_second, float)
    io = scratch.io
    assert io == scratch.io and hash(io) == hash(scratch.io)
    assert io == carriers.FileIO(4 << 20, 4, False, "default", io.device, 0.0)
    assert repr(io) == f"FileIO(chunk_bytes=4194304, requests_in_flight=4, direct_io=False, source='default', " \
                       f"device={io.device}, device_read_bytes_per_second=0.0)"
    with pytest.raises(AttributeError):
        io.chunk_bytes = 1
    scratch.release()
    assert scratch.io == io  # still answers after release


def test_file_io_is_the_options_set(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(1 << 16))
    for direct_io in (False, True):
        for c in (carriers.File(1024, directory=tmp_path, direct_io=direct_io, chunk_bytes=1 << 20,
                                requests_in_flight=3),
                  carriers.File.open(path, 0, 1024, direct_io=direct_io, chunk_bytes=1 << 20, requests_in_flight=3)):
            io = c.io
            assert (io.chunk_bytes, io.requests_in_flight) == (1048576, 3)
            assert io.source == "default" and io.device_read_bytes_per_second == 0.0
            if not direct_io:
                assert not io.direct_io


def test_file_io_says_whether_the_carrier_reads_through_o_direct(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(1 << 16))
    made = carriers.File(1024, directory=tmp_path, direct_io=True, chunk_bytes=1 << 20, requests_in_flight=3)
    opened = carriers.File.open(path, 0, 1024, direct_io=True, chunk_bytes=1 << 20, requests_in_flight=3)
    if not _opens_with_o_direct(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT: its carriers read buffered")
    assert made.io.direct_io and opened.io.direct_io


def test_file_io_of_another_carrier_is_a_type_error():
    from strideweave import _native as N
    assert not hasattr(carriers.CPU(4), "io")
    tiled = sw.TiledEvictable(carriers.CPU(0), carriers.File(4), (2,), (2,))
    for c in (carriers.CPU(4), carriers.Host(4), carriers.Zstd(4), tiled):
        with pytest.raises(TypeError, match="not a File carrier") as e:
            N.file_carrier_io(c._h)
        exact(e, sw.StrideWeaveTypeError)


def test_zstd_compresses_and_detects_corruption():
    c = carriers.Zstd(1 << 16, level=1, frame_elements=1 << 12)
    assert c.stored_bytes() < (1 << 16) * 4 // 10
    c[5] = 1.0
    sw._native.sw_testing_corrupt_frame(c._h, 0)
    with pytest.raises(ValueError) as e:
        c[5]
    err = exact(e, sw.DataCorruptError)
    assert err.code == sw.ErrorCode.DATA_CORRUPT


def vulkan_or_skip(size, **kwargs):
    try:
        return carriers.Vulkan(size, **kwargs)
    except NotImplementedError as e:  # no Vulkan in this build or no driver (ICD)
        exact(pytest.raises(NotImplementedError, carriers.Vulkan, size, **kwargs), sw.StrideWeaveNotImplementedError)
        pytest.skip(f"Vulkan unavailable: {e}")


def test_vulkan_carrier_runs_ops_and_moves():
    v = vulkan_or_skip(16, dtype=sw.float32)
    assert isinstance(v, carriers.Vulkan) and v.size() == 16 and v.dtype is sw.float32 and v.is_mutable()
    device = sw.Device.vulkan()
    assert device is sw.Device.vulkan() and device.kind == "vulkan" and device.generation >= 1
    a = np.arange(16, dtype=np.float32).reshape(4, 4) - 6
    m = sw.move_async(sw.from_numpy(a), v).wait()
    assert m.carrier is v
    np.testing.assert_array_equal(m.numpy(), a)  # read back through a copy
    r = sw.relu(m * 2.0 + 1.0)
    assert isinstance(r.carrier, carriers.Vulkan)
    np.testing.assert_allclose(r.numpy(), np.maximum(a * 2 + 1, 0))
    np.testing.assert_allclose((m @ m).numpy(), a @ a, rtol=1e-5)
    np.testing.assert_allclose(sw.reduce_sum(m, axes=0).numpy(), a.sum(axis=0))
    back = sw.move_async(r, carriers.CPU(0)).wait()
    assert isinstance(back.carrier, carriers.CPU)
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.Vulkan(4, device="gpu0")


def test_owned_carrier_refuses_writes_and_release():
    c = carriers.CPU(4)
    sw._native.sw_testing_claim(c._h)
    assert c.is_owned() and not c.is_mutable()
    with pytest.raises(sw.StrideWeaveRuntimeError):
        c[0] = 1.0
    with pytest.raises(sw.StrideWeaveRuntimeError):
        c.release()
    sw._native.sw_testing_unclaim(c._h)
    c.release()


def test_tensor_carrier_identity_and_runtime_keyword(runtime):
    c = carriers.CPU(4, runtime=runtime)
    t = sw.Tensor(c, 0, sw.Layout.dense(4))
    assert t.carrier is c
    view = t.permute(0)
    assert view.carrier is c
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.CPU(4, runtime="default")
    assert sw.default_runtime() is sw.default_runtime()
    assert sw.default_runtime().compute_threads >= 1
