#!/usr/bin/env python3
"""Projection of resident experts against PyTorch's index_select, same run.

Eight of 64 experts of 1024x1024 float32 (32 MiB of 256 MiB) are gathered
from a TiledEvictable whose tiles are all primary-resident, into a reused
destination carrier, through the Python package; the peers gather the same
experts from a (64, 1024, 1024) array with `torch.index_select(out=)` (the
peer of the target in tools/bench/README.md) and `numpy.take(out=)`, with the same
number of threads. Every figure is the median over --repeats, each from a
cold cache (128 MiB streamed through first, untimed); GB/s counts the
gathered bytes once. StrideWeave's compact result puts the expert mode
fastest (dense, first mode fastest), so it interleaves the experts element
by element where the peers copy each expert as one block.

    bash tools/build.sh build
    python3 tools/bench/bench_projection.py [--repeats 15] [--threads 2]

Uses the build tree's package (build/bindings/python) when there is one, or
$STRIDEWEAVE_PYTHONPATH, else an installed strideweave. Without PyTorch the
torch row says "not installed". Ends with a BENCH_JSON line.
"""
import argparse
import functools
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
_build = os.environ.get("STRIDEWEAVE_PYTHONPATH") or str(ROOT / "build" / "bindings" / "python")
if (pathlib.Path(_build) / "strideweave").is_dir():
    sys.path.insert(0, _build)

import numpy as np  # noqa: E402
import strideweave as sw  # noqa: E402
from strideweave.carriers import CPU, Host  # noqa: E402

EXPERTS, DIM = 64, 1024
PICKS = (3, 17, 42, 5, 60, 11, 29, 50)


# Streamed through (untimed) before each timed repetition: 128 MiB, four
# times a large L3, so that every contender reads its experts from DRAM.
# Without it the figure depended on how much of the 32 MiB of experts and
# destination the last-level cache kept between repetitions (torch.index_select
# ran at 17-36 GB/s in three quiet runs on a CPU with a 32 MiB L3).
# Made on the first timed repetition, not at import (--help needs none).
@functools.cache
def _scratch():
    return np.ones(32 << 20, dtype=np.float32)


def flush_caches():
    np.add(_scratch(), 1.0, out=_scratch())


def median_seconds(fn, repeats):
    fn()  # warm-up
    fn()
    times = []
    for _ in range(repeats):
        flush_caches()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.repeats < 3 or not 1 <= args.threads <= 16:
        parser.error("need --repeats >= 3 and 1 <= --threads <= 16")

    rt = sw.Runtime(compute_threads=args.threads)
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((EXPERTS, DIM, DIM), dtype=np.float32)
    # The primary tier holds the tiles one after another, each first mode
    # fastest: expert e's (out, in) matrix in Fortran order.
    tile_major = np.concatenate([np.asfortranarray(weights[e]).ravel(order="F") for e in range(EXPERTS)])
    primary = sw.Tensor.from_numpy(tile_major, runtime=rt).carrier
    table = sw.TiledEvictable(primary, Host(0, runtime=rt), (EXPERTS, 1, 1), (1, DIM, DIM))
    full = table.full_tensor()
    selection = sw.TileSelection([list(PICKS), [0], [0]])
    destination = CPU(len(PICKS) * DIM * DIM, runtime=rt)

    def ours():
        table.project(full, selection, destination).wait()

    # Check the values once: compact[s, o, i] == weights[PICKS[s], o, i].
    compact = table.project(full, selection, destination).wait().numpy()
    if not np.array_equal(compact, weights[list(PICKS)]):
        sys.exit("bench_projection: the projection produced wrong values")

    nbytes = len(PICKS) * DIM * DIM * 4
    rows = [("StrideWeave project (reused destination)", median_seconds(ours, args.repeats))]

    index = np.array(PICKS)
    out_np = np.empty((len(PICKS), DIM, DIM), dtype=np.float32)
    rows.append(("numpy.take(out=)", median_seconds(lambda: np.take(weights, index, axis=0, out=out_np),
                                                     args.repeats)))
    torch_version = None
    try:
        import torch

        torch.set_num_threads(args.threads)
        torch_version = torch.__version__
        w_t = torch.from_numpy(weights)
        idx_t = torch.tensor(PICKS)
        out_t = torch.empty((len(PICKS), DIM, DIM), dtype=torch.float32)
        rows.append(("torch.index_select(out=)", median_seconds(lambda: torch.index_select(w_t, 0, idx_t, out=out_t),
                                                               args.repeats)))
    except ImportError:
        pass

    ours_s = rows[0][1]
    print(f"projection of {len(PICKS)} of {EXPERTS} experts of {DIM}x{DIM} float32 ({nbytes >> 20} MiB), "
          f"{args.threads} thread(s), load average {os.getloadavg()[0]:.1f}")
    print(f"{'':44} {'GB/s':>8} {'ms':>8} {'ours / peer':>12}")
    for name, seconds in rows:
        print(f"{name:44} {nbytes / seconds / 1e9:8.2f} {seconds * 1e3:8.2f} {seconds and (seconds / ours_s):12.2f}")
    if torch_version is None:
        print(f"{'torch.index_select(out=)':44} not installed")
    summary = {"bench": "projection", "threads": args.threads, "mib": nbytes >> 20, "load": os.getloadavg()[0],
               "torch": torch_version}
    for name, seconds in rows:
        key = name.split(" ")[0].split("(")[0].replace(".", "_").lower()
        summary[key + "_gbps"] = round(nbytes / seconds / 1e9, 3)
    for name, seconds in rows[1:]:
        key = name.split("(")[0].replace(".", "_").lower()
        summary["ratio_vs_" + key] = round(seconds / ours_s, 3)
    print("BENCH_JSON " + json.dumps(summary))


if __name__ == "__main__":
    main()
