import contextlib
"""Makes the build tree's package importable: build/bindings/python (or
$STRIDEWEAVE_PYTHONPATH) holds strideweave with its compiled extension.

Turns the file carriers' device probe off for the whole suite (and the
programs it starts): no test measures the disk or reads the profiles cached
in the user's cache directory, so a direct-I/O carrier's chunk size and
requests in flight are the defaults unless a test sets them."""
import os
import pathlib
import sys

os.environ["STRIDEWEAVE_IO_PROBE"] = "0"

ROOT = pathlib.Path(__file__).resolve().parents[2]
_build = os.environ.get("STRIDEWEAVE_PYTHONPATH") or str(ROOT / "build" / "bindings" / "python")
if (pathlib.Path(_build) / "strideweave").is_dir():
    sys.path.insert(0, _build)

import pytest  # noqa: E402
import numpy as np  # noqa: E402
import strideweave as sw  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "e2e: runs a whole program in a subprocess (an example, the main demo, the hf command line); "
                   "the full test command runs these, the quick tier (-m 'not e2e') does not")


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of the test's own on a unix socket in tmp_path (no
    port): its endpoint, "unix://...". A missing redis-server fails the
    test: tools/install_deps.sh installs it."""
    import shutil
    import socket
    import subprocess
    import time

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
                with socket.socket(socket.AF_UNIX) as c:
                    c.connect(str(sock))
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
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


def redis_command(endpoint, *args):
    """One command to the server at a unix:// endpoint; its raw reply."""
    import socket

    parts = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(endpoint[len("unix://"):])
        c.sendall(b"".join(parts))
        return c.recv(1 << 16)


@pytest.fixture
def runtime():
    rt = sw.Runtime()
    yield rt
    rt.shutdown()


def seeded_tiled(values, grid, tile, secondary=sw.carriers.Host, policy=None, primary=None, **kwargs):
    """A TiledEvictable whose secondary tier is seeded with `values` (tiles
    one after another, each first mode fastest) and whose primary is empty
    (`primary`, else a new empty CPU carrier)."""
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    sec = secondary(values.size, dtype=sw.float32, **kwargs)
    if values.size:
        from strideweave import _native as N

        N.carrier_write_from(sec._h, 0, values.size, values)
    primary = sw.carriers.CPU(0) if primary is None else primary
    return sw.TiledEvictable(primary, sec, grid, tile, residency_policy=policy)


def tiles_to_logical(values, grid, tile):
    """The logical array of a tiled carrier seeded with `values` (canonical
    geometry: tiles in tile-ordinal order, each first mode fastest)."""
    grid, tile = tuple(grid), tuple(tile)
    values = np.asarray(values).reshape(-1)
    per = int(np.prod(tile))
    out = np.empty(tuple(g * t for g, t in zip(grid, tile)), dtype=values.dtype)
    for k in range(int(np.prod(grid))):
        g = np.unravel_index(k, grid, order="F")
        block = values[k * per:(k + 1) * per].reshape(tile, order="F")
        out[tuple(slice(gi * ti, (gi + 1) * ti) for gi, ti in zip(g, tile))] = block
    return out


def exact(excinfo, cls):
    """Asserts the raised exception's class is exactly `cls`."""
    assert type(excinfo.value) is cls, f"{type(excinfo.value).__name__} is not {cls.__name__}"
    assert isinstance(excinfo.value, sw.Error)
    return excinfo.value


@contextlib.contextmanager
def held(carrier, kind="read"):
    """Holds the next asynchronous storage read (or write) of `carrier`'s
    runtime in flight until the block ends (sw_testing_hold): work that needs
    it stays pending, deterministically. Yields a function that blocks until
    the transfer is caught."""
    from strideweave import _native as N

    h = carrier._rt._h
    fault = N.SW_FAULT_READ if kind == "read" else N.SW_FAULT_WRITE
    N.sw_testing_hold(h, fault, 1)
    try:
        yield lambda: N.sw_testing_wait_held(h, 60 * 10**9)
    finally:
        N.sw_testing_hold(h, fault, 0)
        try:
            N.sw_testing_release_hold(h)
        except RuntimeError:
            pass  # released already, or the transfer never came
