#!/usr/bin/env python3
"""StrideWeave CPU benchmark driver: bench_cpu at 1 and 2 threads, plus NumPy.

Runs the C tool (tools/bench/bench_cpu.c, built by meson) once per thread
count and run, with OPENBLAS_NUM_THREADS equal to the thread count and
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed for that subprocess, so that
OpenBLAS picks its kernels itself. Right after each C run it measures NumPy's
matmul (np.dot on float32 Fortran-ordered arrays, the layout StrideWeave's
dense tensors have) at the same shapes and thread count: in this process
through threadpoolctl when it is installed, else in a subprocess started with
OPENBLAS_NUM_THREADS set.

Every figure is a median: of repetitions within a run, then of runs. Ratios
are medians of the per-run ratios, so drift between runs cancels. The "best"
column is the median over runs of the ratio between fastest repetitions,
which still compares the code when other processes load the two cores (the
summary prints the load average; 2-thread medians are not worth much above
a load of about 2).

    python3 tools/bench/bench_cpu.py [--build build] [--runs 3] [--reps 15]

Needs only NumPy. Exits 0 whether or not the targets are met; the summary
marks each figure "ok" or "MISS".
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

THREADS = (1, 2)
# (name as the C tool prints it, m, k, n): (m, k) @ (k, n)
SHAPES = (("1024x1024x1024", 1024, 1024, 1024), ("moe 64x4096->1024", 64, 4096, 1024))
MATMUL_TARGET = 0.90  # of OpenBLAS GFLOP/s
STREAM_TARGET = 0.70  # of the DRAM read roof
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def numpy_matmul(reps):
    """GFLOP/s of np.dot per shape name, median of `reps` after warm-up."""
    rng = np.random.default_rng(7)
    result = {}
    for name, m, k, n in SHAPES:
        a = np.asfortranarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        b = np.asfortranarray(rng.uniform(-1, 1, (k, n)).astype(np.float32))
        times = []
        for r in range(3 + reps):
            t0 = time.perf_counter()
            np.dot(a, b)
            if r >= 3:
                times.append(time.perf_counter() - t0)
        result[name] = 2.0 * m * n * k / statistics.median(times) * 1e-9
    return result


def numpy_in_subprocess(threads, reps):
    env = dict(os.environ)
    for var in BLAS_THREAD_VARS:
        env[var] = str(threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--numpy-worker", "--reps", str(reps)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def make_numpy_runner():
    """Returns (description, fn(threads, reps) -> {shape: GFLOP/s})."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return "subprocess with OPENBLAS_NUM_THREADS", numpy_in_subprocess

    def in_process(threads, reps):
        with threadpool_limits(limits=threads, user_api="blas"):
            return numpy_matmul(reps)

    return "in process, threadpoolctl", in_process


def numpy_blas_name():
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return "%s %s" % (blas.get("name", "?"), blas.get("version", "?"))
    except Exception:  # older NumPy: no dict mode
        return "unknown BLAS"


def run_c_tool(exe, threads, reps, mib):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    proc = subprocess.run([exe, "--threads", str(threads), "--reps", str(reps), "--mib", str(mib)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("bench_cpu failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return proc.stdout, json.loads(line[len("BENCH_JSON "):])
    sys.exit("bench_cpu printed no BENCH_JSON line:\n" + proc.stdout)


def verdict(ratio, target):
    return "ok" if ratio >= target else "MISS"


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(root, "build"), help="meson build directory")
    parser.add_argument("--runs", type=int, default=3, help="runs per thread count (medians taken)")
    parser.add_argument("--reps", type=int, default=15, help="timed repetitions per figure within a run")
    parser.add_argument("--mib", type=int, default=64, help="elementwise operand size in MiB")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.add_argument("--numpy-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.numpy_worker:
        print(json.dumps(numpy_matmul(args.reps)))
        return

    exe = os.path.join(args.build, "tools", "bench", "bench_cpu")
    if not os.access(exe, os.X_OK):
        sys.exit("%s not found: build first (bash tools/build.sh %s)" % (exe, args.build))
    how, numpy_runner = make_numpy_runner()
    print("NumPy %s on %s, measured %s" % (np.__version__, numpy_blas_name(), how))
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print("note: %s=%s is set here; removed for bench_cpu only, NumPy's OpenBLAS sees it"
                  % (var, os.environ[var]))

    runs = {t: [] for t in THREADS}  # threads -> [(c_json, numpy_gflops)]
    for run in range(args.runs):
        for t in THREADS:
            text, c = run_c_tool(exe, t, args.reps, args.mib)
            npy = numpy_runner(t, args.reps)
            runs[t].append((c, npy))
            if not args.quiet:
                print("\n=== run %d/%d, %d thread(s) ===" % (run + 1, args.runs, t))
                print(text.rstrip())
                print("NumPy np.dot GFLOP/s: " + ", ".join("%s %.1f" % (k, v) for k, v in npy.items()))

    med = statistics.median
    summary = {"runs": args.runs, "reps": args.reps, "mib": args.mib, "matmul": [], "elementwise": []}
    loads = [x for t in THREADS for c, _ in runs[t] for x in c.get("load", [])]
    print("\n==== summary: medians over %d run(s) per thread count ====" % args.runs)
    if loads:
        print("load average during the runs: %.2f to %.2f on %d cores (other work makes figures noisy)"
              % (min(loads), max(loads), os.cpu_count() or 0))
        summary["load"] = [min(loads), max(loads)]
    print("\nf32 matmul, GFLOP/s")
    print("threads  shape                 StrideWeave   cblas   NumPy   SW/cblas  SW/NumPy  best  target >= %.2f"
          % MATMUL_TARGET)
    for t in THREADS:
        for name, _, _, _ in SHAPES:
            rows = [(next(x for x in c["matmul"] if x["shape"] == name), npy[name]) for c, npy in runs[t]]
            sw = med(r["sw_gflops"] for r, _ in rows)
            blas = med(r["blas_gflops"] for r, _ in rows)
            npg = med(n for _, n in rows)
            r_blas = med(r["ratio"] for r, _ in rows)
            r_np = med(r["sw_gflops"] / n for r, n in rows)
            r_best = med(r["ratio_best"] for r, _ in rows)
            print("%7d  %-20s %11.1f %7.1f %7.1f %9.3f %9.3f %5.3f  %s"
                  % (t, name, sw, blas, npg, r_blas, r_np, r_best, verdict(r_blas, MATMUL_TARGET)))
            summary["matmul"].append({"threads": t, "shape": name, "sw_gflops": sw, "blas_gflops": blas,
                                      "numpy_gflops": npg, "ratio_blas": r_blas, "ratio_numpy": r_np,
                                      "ratio_blas_best": r_best})
    print("\n%d MiB f32, GB/s moved (reads + writes)" % args.mib)
    print("threads  op                  GB/s  read roof  memcpy   /roof   best  target >= %.2f" % STREAM_TARGET)
    for t in THREADS:
        cs = [c for c, _ in runs[t]]
        roof = med(c["roof"]["read_gbs"] for c in cs)
        copy = med(c["roof"]["memcpy_gbs"] for c in cs)
        for op in [e["op"] for e in cs[0]["elementwise"]]:
            es = [next(e for e in c["elementwise"] if e["op"] == op) for c in cs]
            gbs = med(e["gbs"] for e in es)
            ratio = med(e["ratio_read_roof"] for e in es)
            best = med(e["ratio_best"] for e in es)
            print("%7d  %-16s %7.2f %10.2f %7.2f %7.3f %6.3f  %s" % (t, op, gbs, roof, copy, ratio, best,
                                                                     verdict(ratio, STREAM_TARGET)))
            summary["elementwise"].append({"threads": t, "op": op, "gbs": gbs, "read_roof_gbs": roof,
                                           "memcpy_gbs": copy, "ratio_read_roof": ratio,
                                           "ratio_read_roof_best": best})
    print("\nSUMMARY_JSON " + json.dumps(summary))


if __name__ == "__main__":
    main()
