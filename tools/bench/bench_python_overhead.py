#!/usr/bin/env python3
"""Python call overhead of small StrideWeave ops against PyTorch and NumPy.

Times sw.add and sw.mul (tensor with tensor, tensor with scalar), sw.relu,
sw.reduce_sum and sw.matmul on 4x4 and 64x64 float32 tensors, and the same
calls of PyTorch and NumPy in the same run. The target (tools/bench/README.md)
is StrideWeave within 2x of PyTorch per call.

Each library gets its inputs in its own contiguous layout, so that every
library does the same work and the figures compare call paths: PyTorch and
NumPy row-major arrays, StrideWeave dense first-mode-fastest tensors (made
without a copy by sw.from_numpy of the Fortran-ordered array). A second
table gives StrideWeave on the row-major arrays themselves (sw.from_numpy of
the C-ordered array, a permuted layout), what NumPy users get by default:
elementwise results are dense first mode fastest, so those calls also
transpose. Both tables are checked against the target.

Per call: the median over --repeats of the mean over --number calls. The
"C call" column times the same op through the private SWIG layer alone
(strideweave._native, plus the release of the result), which splits the
figure into the C library's own cost and the Python package's.

    bash tools/build.sh build
    python3 tools/bench/bench_python_overhead.py [--number 20000] [--repeats 7]

Uses the build tree's package (build/bindings/python) when there is one, or
$STRIDEWEAVE_PYTHONPATH, else an installed strideweave. Needs PyTorch (see
tools/install_deps.sh). Prints the tables, the load average (other processes
on the two cores distort the figures) and a closing BENCH_JSON line.
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
import torch  # noqa: E402

import strideweave as sw  # noqa: E402
from strideweave import _native as N  # noqa: E402

SIZES = (4, 64)
OPS = ("add", "add_scalar", "mul", "mul_scalar", "relu", "reduce_sum", "matmul")


def strideweave_calls(a, b):
    return {
        "add": lambda: sw.add(a, b),
        "add_scalar": lambda: sw.add(a, 1.0),
        "mul": lambda: sw.mul(a, b),
        "mul_scalar": lambda: sw.mul(a, 2.0),
        "relu": lambda: sw.relu(a),
        "reduce_sum": lambda: sw.reduce_sum(a),
        "matmul": lambda: sw.matmul(a, b),
    }


def c_calls(a, b):
    """The same ops through the SWIG layer; the lambdas keep a and b alive.
    add_scalar has no C form: the add of a weak scalar made beforehand."""
    ah, bh, release = a._h, b._h, N.sw_tensor_release
    one = sw.from_numpy(np.ones((), np.float32))
    return {
        "add": lambda a=a, b=b: release(N.sw_add(ah, bh)),
        "add_scalar": lambda a=a, one=one: release(N.sw_add(ah, one._h)),
        "mul": lambda a=a, b=b: release(N.sw_mul(ah, bh)),
        "mul_scalar": lambda a=a: release(N.sw_mul_scalar(ah, 2.0)),
        "relu": lambda a=a: release(N.sw_relu(ah)),
        "reduce_sum": lambda a=a: release(N.sw_reduce_sum(ah, (), False)),
        "matmul": lambda a=a, b=b: release(N.sw_matmul(ah, bh)),
    }


def torch_calls(a, b):
    return {
        "add": lambda: torch.add(a, b),
        "add_scalar": lambda: torch.add(a, 1.0),
        "mul": lambda: torch.mul(a, b),
        "mul_scalar": lambda: torch.mul(a, 2.0),
        "relu": lambda: torch.relu(a),
        "reduce_sum": lambda: torch.sum(a),
        "matmul": lambda: torch.matmul(a, b),
    }


def numpy_calls(a, b):
    return {
        "add": lambda: np.add(a, b),
        "add_scalar": lambda: np.add(a, 1.0),
        "mul": lambda: np.multiply(a, b),
        "mul_scalar": lambda: np.multiply(a, 2.0),
        "relu": lambda: np.maximum(a, 0),
        "reduce_sum": lambda: np.sum(a),
        "matmul": lambda: np.matmul(a, b),
    }


def per_call(fn, number, repeats):
    fn()
    return statistics.median(t / number for t in timeit.repeat(fn, number=number, repeat=repeats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    print(f"strideweave {sw.__version__} from {pathlib.Path(sw.__file__).parent}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    head = (f"{'op':11} {'shape':>7} {'strideweave us':>15} {'C call us':>10} {'torch us':>9} {'numpy us':>9} "
            f"{'vs torch':>9} {'vs numpy':>9}")
    results = []
    for layout in ("native", "row-major"):
        if layout == "native":
            print("\nEach library's own contiguous layout")
        else:
            print("\nStrideWeave on the row-major arrays (permuted layouts; elementwise results are dense "
                  "first mode fastest, so these calls transpose)")
        print(head)
        for n in SIZES:
            rng = np.random.default_rng(n)
            a_np = rng.standard_normal((n, n)).astype(np.float32)
            b_np = rng.standard_normal((n, n)).astype(np.float32)
            if layout == "native":
                a, b = sw.from_numpy(np.asfortranarray(a_np)), sw.from_numpy(np.asfortranarray(b_np))
            else:
                a, b = sw.from_numpy(a_np), sw.from_numpy(b_np)
            ours, raw = strideweave_calls(a, b), c_calls(a, b)
            theirs = torch_calls(torch.from_numpy(a_np), torch.from_numpy(b_np))
            plain = numpy_calls(a_np, b_np)
            number = args.number if n == 4 else max(args.number // 10, 100)
            for op in OPS:
                t_sw = per_call(ours[op], number, args.repeats)
                t_raw = per_call(raw[op], number, args.repeats)
                t_torch = per_call(theirs[op], number, args.repeats)
                t_np = per_call(plain[op], number, args.repeats)
                ratio = t_sw / t_torch
                results.append({"layout": layout, "op": op, "n": n, "strideweave_us": t_sw * 1e6,
                                "c_call_us": t_raw * 1e6, "torch_us": t_torch * 1e6, "numpy_us": t_np * 1e6,
                                "ratio_torch": ratio, "ratio_numpy": t_sw / t_np})
                miss = "  MISS" if ratio > 2 else ""
                print(f"{op:11} {f'{n}x{n}':>7} {t_sw * 1e6:15.2f} {t_raw * 1e6:10.2f} {t_torch * 1e6:9.2f} "
                      f"{t_np * 1e6:9.2f} {ratio:9.2f} {t_sw / t_np:9.2f}{miss}")
    worst = max(results, key=lambda r: r["ratio_torch"])
    print(f"\nworst ratio against torch: {worst['ratio_torch']:.2f} ({worst['op']} {worst['n']}x{worst['n']}, "
          f"{worst['layout']}); target 2.00: {'ok' if worst['ratio_torch'] <= 2 else 'MISS'}")
    print("BENCH_JSON " + json.dumps({"peers": ["torch", "numpy"], "load": os.getloadavg()[0],
                                      "worst_ratio_torch": worst["ratio_torch"], "results": results}))


if __name__ == "__main__":
    main()
