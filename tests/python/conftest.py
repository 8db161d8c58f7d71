import contextlib
"""Makes the build tree's package importable: build/bindings/python (or
$STRIDEWEAVE_PYTHONPATH) holds strideweave with its compiled extension."""
import os
import pathlib
import sys

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
