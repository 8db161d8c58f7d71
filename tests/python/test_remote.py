"""The Python surface of the remote carrier (strideweave.carriers.Remote and
python -m strideweave.remote) against a redis-server of the test's own on a
unix socket. The C suite tests the carrier's semantics and failures; this
tests the binding: arguments, the kind mapping, the error classes, the
seeding tool. A missing redis-server fails these tests: it does not skip."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from strideweave import remote as sw_remote


@pytest.fixture
def server(tmp_path):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on the PATH; tools/install_deps.sh installs it")
    sock = tmp_path / "redis.sock"
    proc = subprocess.Popen([binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                             "--save", "", "--dir", str(tmp_path), "--protected-mode", "yes",
                             "--maxmemory-policy", "noeviction", "--logfile", str(tmp_path / "redis.log")])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(sock))
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start (see {tmp_path / 'redis.log'})")
            time.sleep(0.01)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_create_open_and_kind(server, runtime):
    values = np.arange(300, dtype=np.float32) * 0.5
    c = carriers.Remote(300, endpoints=server, namespace="py", block_elements=64, runtime=runtime)
    assert isinstance(c, carriers.Remote) and c.size() == 300 and c.dtype is sw.float32
    for i in (0, 63, 64, 299):
        c[i] = float(values[i])
    assert c[64] == values[64] and c[299] == values[299] and c[1] == 0.0
    o = carriers.Remote.open(300, endpoints=[server], namespace="py", read_only=True, runtime=runtime)
    assert o[63] == values[63] and o.is_read_only()
    with pytest.raises(RuntimeError, match="read-only"):
        o[0] = 1.0
    with pytest.raises(ValueError, match="size"):
        carriers.Remote.open(301, endpoints=[server], namespace="py", runtime=runtime)
    # c holds the namespace's writer lease: a second writer is refused, naming it.
    with pytest.raises(RuntimeError, match=f"has a writer already.*py:w.*:{os.getpid()}:"):
        carriers.Remote.open(300, endpoints=[server], namespace="py", lease_ms=500, runtime=runtime)
    with pytest.raises(ValueError, match="lease_ms"):
        carriers.Remote.open(300, endpoints=[server], namespace="py", lease_ms=-1, runtime=runtime)
    with pytest.raises(ValueError, match="not a loopback address"):
        carriers.Remote(4, endpoints="redis://10.9.8.7", namespace="x", runtime=runtime)
    with pytest.raises(NotImplementedError, match="TLS"):
        carriers.Remote(4, endpoints="rediss://127.0.0.1", namespace="x", runtime=runtime)
    with pytest.raises(TypeError):
        carriers.Remote(4, endpoints=[server], namespace=7, runtime=runtime)
    o.release()
    c.release()


def test_read_replicas(server, runtime, tmp_path):
    """replicas= reaches the C desc: with the endpoint down, the server
    named as its replica serves the header and every read (the C suite
    tests real redis replication and a primary killed mid-read)."""
    values = np.arange(256, dtype=np.float32) * 0.25
    c = carriers.Remote(256, endpoints=server, namespace="rep", block_elements=64, runtime=runtime)
    for i in range(0, 256, 7):
        c[i] = float(values[i])
    down = f"unix://{tmp_path / 'down.sock'}"
    r = carriers.Remote.open(256, endpoints=[down], namespace="rep", read_only=True, replicas={down: server},
                             runtime=runtime)
    assert [r[i] for i in (0, 64, 196)] == [values[0], 0.0, values[196]]
    prim = carriers.CPU(0, runtime=runtime)
    te = sw.TiledEvictable(prim, r, (4,), (64,))
    te.promote(sw.TileSelection([[0, 1, 2, 3]]))
    expected = np.where(np.arange(256) % 7 == 0, values, 0.0)
    np.testing.assert_array_equal(te.full_tensor().numpy(), expected)
    te.release()
    r.release()
    with pytest.raises(OSError, match="down.sock"):
        carriers.Remote.open(256, endpoints=[down], namespace="rep", read_only=True, runtime=runtime)
    with pytest.raises(ValueError, match="read replicas serve only"):
        carriers.Remote.open(256, endpoints=[down], namespace="rep", replicas={down: [server]}, runtime=runtime)
    with pytest.raises(ValueError, match="not one of the endpoints"):
        carriers.Remote.open(256, endpoints=[down], namespace="rep", read_only=True, replicas={server: down},
                             runtime=runtime)
    with pytest.raises(TypeError, match="mapping"):
        carriers.Remote.open(256, endpoints=[down], namespace="rep", read_only=True, replicas=[server],
                             runtime=runtime)
    with pytest.raises(TypeError, match="must be str"):
        carriers.Remote.open(256, endpoints=[down], namespace="rep", read_only=True, replicas={down: [7]},
                             runtime=runtime)
    c.release()


def test_tiled_evictable_over_remote(server, runtime):
    T, tiles = 256, 4
    values = np.arange(T * tiles, dtype=np.float32)
    sec = carriers.Remote(0, endpoints=[server], namespace="te", block_elements=T, runtime=runtime)
    prim = carriers.CPU.from_values(values.tolist(), runtime=runtime)
    te = sw.TiledEvictable(prim, sec, (tiles,), (T,))
    assert te.tile_state((0,)).dirty
    te.evict(sw.TileSelection([[0, 1, 2, 3]]))
    assert te.tile_state((2,)).location == "secondary"
    te.promote(sw.TileSelection([[1, 2]]))
    np.testing.assert_array_equal(te.full_tensor().numpy(), values)
    assert te.full_tensor().device == "cpu"
    other = carriers.Remote(8, endpoints=[server], namespace="te2", runtime=runtime)
    assert sw.Tensor(other, 0, sw.Layout.dense(8)).device == "remote"


def _safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_seed_and_verify(server, tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "model.safetensors"
    experts = rng.standard_normal((4, 8, 16)).astype(np.float32)
    _safetensors(path, {"layer.0.experts": experts, "layer.0.norm": rng.standard_normal(16).astype(np.float32)})
    assert sw_remote.tensor_names(path, "*.experts") == ["layer.0.experts"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    common = ["--endpoints", server, "--namespace", "m", "--from", str(path), "--tensor", "*.experts"]
    seeded = subprocess.run([sys.executable, "-m", "strideweave.remote", "seed", *common], env=env,
                            capture_output=True, text=True, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    assert "seeded m:layer.0.experts: 512 float32 values in blocks of 128" in seeded.stdout
    checked = subprocess.run([sys.executable, "-m", "strideweave.remote", "verify", *common], env=env,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    assert "verified m:layer.0.experts" in checked.stdout
    # The seeded namespace is persistent: a TiledEvictable over it reads expert 2.
    rt = sw.Runtime()
    try:
        r = carriers.Remote.open(512, endpoints=[server], namespace="m:layer.0.experts", read_only=True, runtime=rt)
        te = sw.TiledEvictable(carriers.CPU(0, runtime=rt), r, (1, 1, 4), (16, 8, 1))
        te.promote(sw.TileSelection([[0], [0], [2]]))
        got = te.full_tensor().numpy()  # (16, 8, 4), first mode fastest: the file's (4, 8, 16) reversed
        np.testing.assert_array_equal(got[:, :, 2].T, experts[2])
    finally:
        rt.shutdown()
    # A damaged block is found by verify.
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(server[len("unix://"):])
        args = [b"SETRANGE", b"m:layer.0.experts:b:1", b"5", b"x"]
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        assert s.recv(64).startswith(b":")
    bad = subprocess.run([sys.executable, "-m", "strideweave.remote", "verify", *common], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "DataCorruptError" in bad.stderr and "block 1" in bad.stderr
