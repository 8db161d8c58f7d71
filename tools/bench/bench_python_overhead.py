#!/usr/bin/env python3
"""Python call overhead of small StrideWeave ops against PyTorch (or NumPy).

Times sw.add, sw.mul, sw.relu and sw.matmul on 4x4 and 64x64 float32 tensors,
and the same calls of PyTorch in the same run (target: within 2x of PyTorch,
docs/PERFORMANCE.md). Without PyTorch it compares against NumPy and says so.
Per call: the median over --repeats of the mean over --number calls. The
"C call" column times the same op through the private SWIG layer alone
(strideweave._native, plus the release of the result), which splits the
figure into the C library's own cost and the Python package's.

    bash tools/build.sh build
    python3 tools/bench/bench_python_overhead.py [--number 20000] [--repeats 7]

Uses the build tree's package (build/bindings/python) when there is one, or
$STRIDEWEAVE_PYTHONPATH, else an installed strideweave. Prints a table, the
load average (other processes on the two cores distort the figures) and a
closing SUMMARY_JSON line.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import timeit

ROOT = pathlib.Path(__file__).resolve().parents[2]
_build = os.environ.get("STRIDEWEAVE_PYTHONPATH") or str(ROOT / "build" / "bindings" / "python")
if (pathlib.Path(_build) / "strideweave").is_dir():
    sys.path.insert(0, _build)

import numpy as np  # noqa: E402
import strideweave as sw  # noqa: E402

SIZES = (4, 64)


def peer():
    try:
        import torch
    except ImportError:
        return "numpy", None
    torch.set_num_threads(os.cpu_count() or 1)
    return "torch", torch


def cases(name, lib, n):
    a_np = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    b_np = np.random.default_rng(n + 1).standard_normal((n, n)).astype(np.float32)
    a, b = sw.from_numpy(a_np), sw.from_numpy(b_np)
    ours = {
        "add": lambda: sw.add(a, b),
        "mul": lambda: sw.mul(a, b),
        "relu": lambda: sw.relu(a),
        "matmul": lambda: sw.matmul(a, b),
    }
    if name == "torch":
        ta, tb = lib.from_numpy(a_np), lib.from_numpy(b_np)
        theirs = {
            "add": lambda: lib.add(ta, tb),
            "mul": lambda: lib.mul(ta, tb),
            "relu": lambda: lib.relu(ta),
            "matmul": lambda: lib.matmul(ta, tb),
        }
    else:
        theirs = {
            "add": lambda: np.add(a_np, b_np),
            "mul": lambda: np.multiply(a_np, b_np),
            "relu": lambda: np.maximum(a_np, 0),
            "matmul": lambda: np.matmul(a_np, b_np),
        }
    from strideweave import _native as N

    ah, bh, release = a._h, b._h, N.sw_tensor_release
    raw = {
        "add": lambda: release(N.sw_add(ah, bh)),
        "mul": lambda: release(N.sw_mul(ah, bh)),
        "relu": lambda: release(N.sw_relu(ah)),
        "matmul": lambda: release(N.sw_matmul(ah, bh)),
    }
    # keep a and b alive as long as the raw lambdas use their handles
    raw["_keep"] = (a, b)
    return ours, theirs, raw


def per_call(fn, number, repeats):
    fn()
    return statistics.median(t / number for t in timeit.repeat(fn, number=number, repeat=repeats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    name, lib = peer()
    if lib is None:
        print("PyTorch is not installed: comparing against NumPy instead (the 2x target is stated "
              "against PyTorch)")
    print(f"strideweave {sw.__version__} from {pathlib.Path(sw.__file__).parent}; peer: {name}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'op':8} {'shape':>7} {'strideweave us':>15} {'C call us':>10} {name + ' us':>10} {'ratio':>7}")
    results = []
    for n in SIZES:
        ours, theirs, raw = cases(name, lib, n)
        for op in ours:
            number = args.number if n == 4 else max(args.number // 10, 100)
            t_sw = per_call(ours[op], number, args.repeats)
            t_raw = per_call(raw[op], number, args.repeats)
            t_peer = per_call(theirs[op], number, args.repeats)
            ratio = t_sw / t_peer
            results.append({"op": op, "n": n, "strideweave_us": t_sw * 1e6, "c_call_us": t_raw * 1e6,
                            "peer_us": t_peer * 1e6, "ratio": ratio})
            print(f"{op:8} {f'{n}x{n}':>7} {t_sw * 1e6:15.2f} {t_raw * 1e6:10.2f} {t_peer * 1e6:10.2f} {ratio:7.2f}"
                  f"{'' if ratio <= 2 or lib is None else '  MISS'}")
    worst = max(r["ratio"] for r in results)
    print(f"worst ratio {worst:.2f} against {name}")
    print("SUMMARY_JSON " + json.dumps({"peer": name, "load": os.getloadavg()[0], "results": results}))


if __name__ == "__main__":
    main()
