#!/usr/bin/env python3
"""StrideWeave CPU benchmark driver: bench_cpu at 1 and 2 threads, with
PyTorch and NumPy in the same run.

For each run and thread count it runs the C tool (tools/bench/bench_cpu.c)
and right after it, in this process, the peers on the same shapes:

- PyTorch: torch.matmul(x, w.t()) with torch.set_num_threads(threads), in
  float32 and bfloat16 (x (M, K) and w (N, K) contiguous: nn.Linear's
  layout, whose bytes are StrideWeave's (K, N) weight); decode shapes rotate
  through the same 768 MiB of weight matrices as the C tool;
- NumPy: np.dot in float32 on the same layouts (x C-ordered, the weight
  the transpose of a C-ordered (N, K) array), its BLAS limited to the thread
  count with threadpoolctl when it is installed, else in a subprocess started
  with OPENBLAS_NUM_THREADS set.

StrideWeave gets the same bytes: x row major (a transposed view of a dense
tensor) and the weight dense (K, N), K fastest.

The Python path, beside PyTorch on the very same tensors: sw.matmul of
sw.from_dlpack(x) and of the weight as PyTorch users hold it, at the MoE
and decode shapes, f32 and bf16, on a runtime with the thread count's
compute threads. Two weight layouts: "row-major", w (K, N) contiguous
(x @ w); "linear", an nn.Linear weight (N, K) contiguous passed transposed
(x @ w.T, for StrideWeave sw.from_dlpack(w).T). Both operands are the
PyTorch tensors' memory, taken without a copy; the calls of the two
libraries alternate. Target (the row-major issue's): >= 0.90x PyTorch at
every shape, dtype and thread count.

The quantized decode has ggml as its peer where a libggml with its CPU
backend can be had, looked for in this order: the llama_cpp package's
bundled libraries (pip install llama-cpp-python compiles them); the
directory of $STRIDEWEAVE_TEST_LIBGGML (a directory, or one of the
libraries in it, holding libggml-base.so and libggml-cpu.so); the build
tools/bench/build_ggml.sh leaves under ~/.cache/strideweave/ggml-VERSION/.
The C tool loads it and times ggml's from_float + vec_dot over the rows of
the same weight bytes (see bench_cpu.c); without one, the table says
"ggml peer: not available (why)". Informational: StrideWeave/ggml is shown,
with no target.

Ratios are taken per run, StrideWeave over the peer, and the summary prints
their medians over the runs, "ok" or "MISS" against the targets:
f32 >= 0.90x PyTorch at every shape; bf16 >= 0.80x PyTorch on the MoE and
decode shapes and >= 0.65x at 1024^3; decode >= 0.80x the DRAM read roof in
weight bytes; elementwise >= 0.70x the read roof; the Python path >= 0.90x
PyTorch. The system cblas_sgemm and
NumPy rows are informational.

    python3 tools/bench/bench_cpu.py [--build build] [--runs 3] [--reps 15] [--no-python] [--no-ggml]

Exits 0 whether or not the targets are met; the last line is SUMMARY_JSON.
"""
import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

THREADS = (1, 2)
DECODE_BYTES = 768 << 20
STREAM_TARGET = 0.70  # of the DRAM read roof
DECODE_ROOF_TARGET = 0.80
PYTHON_TARGET = 0.90  # sw.matmul on PyTorch's row-major tensors, over torch.matmul on them
PYTHON_SHAPES = ({"shape": "moe 64x4096->1024", "m": 64, "k": 4096, "n": 1024, "decode": False},
                 {"shape": "moe 64x1024->3584", "m": 64, "k": 1024, "n": 3584, "decode": False},
                 {"shape": "decode 1x4096->1024", "m": 1, "k": 4096, "n": 1024, "decode": True})
PYTHON_LAYOUTS = ("row-major", "linear")
PYTHON_SAMPLE_S = 0.02  # each sample of the Python path: passes over the weight copies lasting about this long
PYTHON_SETTLE_S = 0.02  # pause before each sample, for the other library's spinning threads to park
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


GGML_LIBS = ("libggml-base.so", "libggml-cpu.so")


def ggml_version(root):
    """The llama-cpp-python version whose ggml build_ggml.sh builds."""
    env = os.environ.get("STRIDEWEAVE_GGML_VERSION")
    if env:
        return env
    with open(os.path.join(root, "tools", "bench", "build_ggml.sh")) as f:
        found = re.search(r"STRIDEWEAVE_GGML_VERSION:-([^}]+)\}", f.read())
    return found.group(1) if found else "?"


def ggml_cache_dir(root):
    return os.path.join(os.path.expanduser("~"), ".cache", "strideweave", "ggml-" + ggml_version(root), "lib")


def find_ggml(root):
    """(directory holding libggml-base.so and libggml-cpu.so, where it came
    from), or (None, why there is none)."""
    def has_libs(d):
        return all(os.path.exists(os.path.join(d, lib)) for lib in GGML_LIBS)

    why = []
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.origin:
        why.append("llama_cpp not installed")
    else:
        d = os.path.join(os.path.dirname(spec.origin), "lib")
        if has_libs(d):
            return d, "llama_cpp package"
        why.append("llama_cpp's %s lacks %s" % (d, " or ".join(GGML_LIBS)))
    env = os.environ.get("STRIDEWEAVE_TEST_LIBGGML")
    if not env:
        why.append("STRIDEWEAVE_TEST_LIBGGML unset")
    else:
        d = env if os.path.isdir(env) else os.path.dirname(os.path.abspath(env))
        if has_libs(d):
            return d, "STRIDEWEAVE_TEST_LIBGGML"
        why.append("STRIDEWEAVE_TEST_LIBGGML=%s: no %s in %s" % (env, " and ".join(GGML_LIBS), d))
    d = ggml_cache_dir(root)
    if has_libs(d) and os.path.exists(os.path.join(d, ".complete")):
        return d, "tools/bench/build_ggml.sh's build"
    why.append("no build in %s (bash tools/bench/build_ggml.sh makes one)" % os.path.dirname(d))
    return None, "; ".join(why)


def torch_target(dtype, shape_name):
    """The target ratio to PyTorch for a (dtype, shape)."""
    if dtype == "f32":
        return 0.90
    return 0.65 if shape_name.startswith("1024x") else 0.80


def timed(fn, copies, reps):
    """Median seconds per call: each sample is a pass over `copies` calls."""
    for _ in range(2):
        for c in range(copies):
            fn(c)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for c in range(copies):
            fn(c)
        times.append((time.perf_counter() - t0) / copies)
    return statistics.median(times)


def torch_matmul(shapes, threads, reps):
    """{(shape, dtype): GFLOP/s} of torch.matmul, and the weight GB/s."""
    import torch

    torch.set_num_threads(threads)
    out = {}
    for sh in shapes:
        m, k, n = sh["m"], sh["k"], sh["n"]
        for dtype, tdt, es in (("f32", torch.float32, 4), ("bf16", torch.bfloat16, 2)):
            copies = min(128, DECODE_BYTES // (k * n * es)) if sh["decode"] else 1
            g = torch.Generator().manual_seed(7)
            x = (torch.rand(m, k, generator=g) * 2 - 1).to(tdt)
            ws = [(torch.rand(n, k, generator=g) * 2 - 1).to(tdt) for _ in range(copies)]
            with torch.inference_mode():
                t = timed(lambda c: torch.matmul(x, ws[c].t()), copies, reps)
            out[(sh["shape"], dtype)] = {"gflops": 2.0 * m * n * k / t * 1e-9, "weight_gbs": k * n * es / t * 1e-9}
            del ws
    return out


def numpy_matmul(shapes, reps):
    """{shape: GFLOP/s} of np.dot in float32: x @ W.T, both C-ordered."""
    rng = np.random.default_rng(7)
    result = {}
    for sh in shapes:
        m, k, n = sh["m"], sh["k"], sh["n"]
        copies = min(128, DECODE_BYTES // (k * n * 4)) if sh["decode"] else 1
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        bs = [rng.uniform(-1, 1, (n, k)).astype(np.float32).T for _ in range(copies)]
        t = timed(lambda c: np.dot(a, bs[c]), copies, reps)
        result[sh["shape"]] = 2.0 * m * n * k / t * 1e-9
        del bs
    return result


def numpy_in_subprocess(shapes, threads, reps):
    env = dict(os.environ)
    for var in BLAS_THREAD_VARS:
        env[var] = str(threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--numpy-worker", "--reps", str(reps)],
                         input=json.dumps(shapes), env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def make_numpy_runner():
    """Returns (description, fn(shapes, threads, reps) -> {shape: GFLOP/s})."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return "subprocess with OPENBLAS_NUM_THREADS", numpy_in_subprocess

    def in_process(shapes, threads, reps):
        with threadpool_limits(limits=threads, user_api="blas"):
            return numpy_matmul(shapes, reps)

    return "in process, threadpoolctl", in_process


def numpy_blas_name():
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return "%s %s" % (blas.get("name", "?"), blas.get("version", "?"))
    except Exception:  # older NumPy: no dict mode
        return "unknown BLAS"


def torch_config():
    """One line on what PyTorch runs its matmuls on (torch.__config__.show())."""
    try:
        import torch
    except ImportError:
        return None
    show = torch.__config__.show()
    found = re.search(r"BLAS_INFO=([^,\s]+)", show)
    blas = found.group(1) if found else "?"
    dnnl = next((line.strip("- ").split(" (")[0] for line in show.splitlines() if "MKL-DNN" in line), "no oneDNN")
    return "PyTorch %s (f32 on BLAS %s, bf16 on %s)" % (torch.__version__, blas, dnnl)


def run_c_tool(exe, threads, reps, mib, ggml_dir=None):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    cmd = [exe, "--threads", str(threads), "--reps", str(reps), "--mib", str(mib)]
    if ggml_dir:
        cmd += ["--ggml", ggml_dir]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("bench_cpu failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return proc.stdout, json.loads(line[len("BENCH_JSON "):])
    sys.exit("bench_cpu printed no BENCH_JSON line:\n" + proc.stdout)


def import_strideweave(build):
    """The build tree's Python package (or $STRIDEWEAVE_PYTHONPATH, else an
    installed one); None when there is none."""
    path = os.environ.get("STRIDEWEAVE_PYTHONPATH") or os.path.join(build, "bindings", "python")
    if os.path.isdir(os.path.join(path, "strideweave")) and path not in sys.path:
        sys.path.insert(0, path)
    try:
        import strideweave
    except ImportError:
        return None
    return strideweave


class PythonInputs:
    """PyTorch tensors for the Python path, made once and shared by every run
    and thread count: per (shape, dtype), x (M, K) and the weights in both
    layouts; a decode shape's weights rotate through DECODE_BYTES, half in
    each layout (far more than the last-level cache either way)."""

    def __init__(self):
        import torch

        self.tensors = {}
        g = torch.Generator().manual_seed(11)
        for sh in PYTHON_SHAPES:
            m, k, n = sh["m"], sh["k"], sh["n"]
            for dtype, tdt, es in (("f32", torch.float32, 4), ("bf16", torch.bfloat16, 2)):
                copies = min(128, DECODE_BYTES // (k * n * es)) if sh["decode"] else 1
                x = (torch.rand(m, k, generator=g) * 2 - 1).to(tdt)
                # Half the copies per layout: the rotation still spans DECODE_BYTES in all.
                per = max(1, copies // 2) if sh["decode"] else 1
                ws = {"row-major": [(torch.rand(k, n, generator=g) * 2 - 1).to(tdt) for _ in range(per)],
                      "linear": [(torch.rand(n, k, generator=g) * 2 - 1).to(tdt) for _ in range(per)]}
                self.tensors[(sh["shape"], dtype)] = (x, ws)


def python_matmul(sw, inputs, threads, reps):
    """[{shape, dtype, layout, sw_gflops, torch_gflops, ratio_torch, ...}]:
    sw.matmul through the Python package on the PyTorch tensors' memory
    (sw.from_dlpack, no copy) against torch.matmul on the same tensors, the
    two timed alternately, `reps` samples each; per sample one pass over the
    weight copies. A runtime of `threads` compute threads and
    torch.set_num_threads(threads)."""
    import torch

    torch.set_num_threads(threads)
    rt = sw.Runtime(compute_threads=threads)
    out = []
    try:
        for sh in PYTHON_SHAPES:
            m, k, n = sh["m"], sh["k"], sh["n"]
            for dtype in ("f32", "bf16"):
                x, ws = inputs.tensors[(sh["shape"], dtype)]
                sx = sw.from_dlpack(x, runtime=rt)
                for layout in PYTHON_LAYOUTS:
                    if layout == "row-major":
                        tw = ws[layout]
                        sws = [sw.from_dlpack(w, runtime=rt) for w in tw]
                    else:
                        tw = [w.t() for w in ws[layout]]
                        sws = [sw.from_dlpack(w, runtime=rt).T for w in ws[layout]]
                    copies = len(tw)

                    def run_torch():
                        for c in range(copies):
                            torch.matmul(x, tw[c])

                    def run_sw():
                        for c in range(copies):
                            sw.matmul(sx, sws[c])

                    with torch.inference_mode():
                        t0 = time.perf_counter()
                        for _ in range(2):
                            run_torch()
                            run_sw()
                        passes = max(1, int(PYTHON_SAMPLE_S / max((time.perf_counter() - t0) / 4, 1e-6)))
                        t_torch, t_sw = [], []
                        for _ in range(reps):  # alternate, so that both see the same machine
                            for fn, times in ((run_torch, t_torch), (run_sw, t_sw)):
                                # The other library's idle threads spin for a while after its last
                                # call (PyTorch's OpenMP team, the runtime's compute threads): let
                                # them park, so neither is timed against the other's spinning.
                                time.sleep(PYTHON_SETTLE_S)
                                t0 = time.perf_counter()
                                for _ in range(passes):
                                    fn()
                                times.append((time.perf_counter() - t0) / (copies * passes))
                    flops = 2.0 * m * n * k
                    es = 4 if dtype == "f32" else 2
                    med_sw, med_torch = statistics.median(t_sw), statistics.median(t_torch)
                    out.append({"threads": threads, "shape": sh["shape"], "dtype": dtype, "layout": layout,
                                "decode": sh["decode"], "sw_gflops": flops / med_sw * 1e-9,
                                "torch_gflops": flops / med_torch * 1e-9, "ratio_torch": med_torch / med_sw,
                                "ratio_torch_best": min(t_torch) / min(t_sw),
                                "sw_weight_gbs": k * n * es / med_sw * 1e-9,
                                "torch_weight_gbs": k * n * es / med_torch * 1e-9})
                    del sws
                del sx
    finally:
        rt.shutdown()
    return out


def cpu_isa():
    """The model name and the matmul-relevant ISA flags of /proc/cpuinfo."""
    model, flags = "?", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = [x for x in line.split(":", 1)[1].split()
                             if x in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16",
                                      "amx_tile", "amx_int8")]
    except OSError:
        pass
    return model, flags


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
    parser.add_argument("--no-python", action="store_true", help="skip the Python path (sw.matmul on PyTorch tensors)")
    parser.add_argument("--no-ggml", action="store_true", help="do not time ggml's kernels on the quantized weights")
    parser.add_argument("--numpy-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.numpy_worker:
        print(json.dumps(numpy_matmul(json.loads(sys.stdin.read()), args.reps)))
        return

    exe = os.path.join(args.build, "tools", "bench", "bench_cpu")
    if not os.access(exe, os.X_OK):
        sys.exit("%s not found: build first (bash tools/build.sh %s)" % (exe, args.build))
    how, numpy_runner = make_numpy_runner()
    tconf = torch_config()
    print("peers: %s; NumPy %s on %s, measured %s" % (tconf or "PyTorch not installed", np.__version__,
                                                      numpy_blas_name(), how))
    model, isa = cpu_isa()
    print("CPU: %s; %s" % (model, " ".join(isa) or "no AVX2"))
    sw = None if args.no_python or not tconf else import_strideweave(args.build)
    if sw is None and not args.no_python:
        print("Python path skipped: %s" % ("no PyTorch" if not tconf else "no strideweave package in %s"
                                           % os.path.join(args.build, "bindings", "python")))
    inputs = PythonInputs() if sw is not None else None
    ggml_dir, ggml_from = (None, "skipped with --no-ggml") if args.no_ggml else find_ggml(root)
    print("ggml peer: %s" % ("%s (%s)" % (ggml_dir, ggml_from) if ggml_dir else "not available (%s)" % ggml_from))

    runs = {t: [] for t in THREADS}  # threads -> [(c_json, torch, numpy)]
    py_runs = {t: [] for t in THREADS}  # threads -> [[python rows]]
    for run in range(args.runs):
        for t in THREADS:
            text, c = run_c_tool(exe, t, args.reps, args.mib, ggml_dir)
            shapes = [m for m in c["matmul"] if m["dtype"] == "f32"]
            reps = max(3, args.reps // 2)
            tor = torch_matmul(shapes, t, reps) if tconf else {}
            npy = numpy_runner(shapes, t, reps)
            runs[t].append((c, tor, npy))
            if inputs is not None:
                py_runs[t].append(python_matmul(sw, inputs, t, reps))
            if not args.quiet:
                print("\n=== run %d/%d, %d thread(s) ===" % (run + 1, args.runs, t))
                print(text.rstrip())
                print("PyTorch GFLOP/s: " + ", ".join("%s %s %.1f" % (k[0], k[1], v["gflops"]) for k, v in tor.items()))
                print("NumPy np.dot GFLOP/s: " + ", ".join("%s %.1f" % (k, v) for k, v in npy.items()))
                if inputs is not None:
                    print("Python sw.matmul / torch.matmul on the same PyTorch tensors: " + ", ".join(
                        "%s %s %s %.3f" % (p["shape"], p["dtype"], p["layout"], p["ratio_torch"])
                        for p in py_runs[t][-1]))

    med = statistics.median
    summary = {"runs": args.runs, "reps": args.reps, "mib": args.mib, "torch": tconf, "cpu": model, "isa": isa,
               "matmul": [], "experts": [], "elementwise": [], "python_matmul": []}
    loads = [x for t in THREADS for c, _, _ in runs[t] for x in c.get("load", [])]
    print("\n==== summary: medians over %d run(s) per thread count ====" % args.runs)
    if loads:
        print("load average during the runs: %.2f to %.2f on %d cores (other work makes figures noisy)"
              % (min(loads), max(loads), os.cpu_count() or 0))
        summary["load"] = [min(loads), max(loads)]
    print("\nmatmul, GFLOP/s (decode: weight GB/s and / DRAM read roof)")
    print("threads dtype shape                   StrideWeave  PyTorch  SW/torch target    NumPy  cblas   "
          "decode GB/s  /roof")
    for t in THREADS:
        for entry in runs[t][0][0]["matmul"]:
            name, dtype = entry["shape"], entry["dtype"]
            rows = []
            for c, tor, npy in runs[t]:
                mine = next(x for x in c["matmul"] if x["shape"] == name and x["dtype"] == dtype)
                rows.append((mine, tor.get((name, dtype)), npy.get(name) if dtype == "f32" else None,
                             c["roof"]["dram_read_gbs"]))
            sw = med(r["sw_gflops"] for r, _, _, _ in rows)
            item = {"threads": t, "shape": name, "dtype": dtype, "decode": entry["decode"], "sw_gflops": sw,
                    "blas_gflops": med(r["blas_gflops"] for r, _, _, _ in rows) if dtype == "f32" else None}
            line = "%7d %-5s %-22s %11.1f" % (t, dtype, name, sw)
            if all(p is not None for _, p, _, _ in rows):
                item["torch_gflops"] = med(p["gflops"] for _, p, _, _ in rows)
                item["ratio_torch"] = med(r["sw_gflops"] / p["gflops"] for r, p, _, _ in rows)
                item["ratio_torch_best"] = med(r["sw_best"] / p["gflops"] for r, p, _, _ in rows)
                item["target_torch"] = torch_target(dtype, name)
                line += " %8.1f %9.3f %-6s" % (item["torch_gflops"], item["ratio_torch"],
                                               verdict(item["ratio_torch"], item["target_torch"]))
            else:
                line += " %8s %9s %-6s" % ("-", "-", "")
            if dtype == "f32":
                item["numpy_gflops"] = med(n for _, _, n, _ in rows)
                item["ratio_numpy"] = med(r["sw_gflops"] / n for r, _, n, _ in rows)
                line += " %8.1f %6.1f" % (item["numpy_gflops"], item["blas_gflops"])
            else:
                line += " %8s %6s" % ("-", "-")
            if entry["decode"]:
                item["weight_gbs"] = med(r["sw_weight_gbs"] for r, _, _, _ in rows)
                item["read_roof_gbs"] = med(roof for _, _, _, roof in rows)
                item["ratio_roof"] = med(r["sw_weight_gbs"] / roof for r, _, _, roof in rows)
                if all(p is not None for _, p, _, _ in rows):
                    item["torch_weight_gbs"] = med(p["weight_gbs"] for _, p, _, _ in rows)
                line += " %12.2f %6.3f %s" % (item["weight_gbs"], item["ratio_roof"],
                                              verdict(item["ratio_roof"], DECODE_ROOF_TARGET))
            print(line)
            summary["matmul"].append(item)
    summary["quant_decode"] = []
    gj = runs[THREADS[0]][0][0].get("ggml") or {}
    if ggml_dir and gj.get("available"):
        summary["ggml"] = {"available": True, "lib": ggml_dir, "from": ggml_from, "version": gj.get("version")}
    else:
        summary["ggml"] = {"available": False, "reason": gj.get("reason") if ggml_dir else ggml_from}
    if "quant_decode" in runs[THREADS[0]][0][0]:
        print("\nquantized decode 1x4096->1024: GB/s of quantized weight bytes (x f32), / DRAM read roof; "
              "ggml's vec_dot on the same bytes (informational)")
        print("threads dtype    GB/s    roof   /roof   best  target >= %.2f   ggml GB/s  SW/ggml   best  check"
              % DECODE_ROOF_TARGET)
        for t in THREADS:
            for first in runs[t][0][0]["quant_decode"]:
                rows = [(next(q for q in c["quant_decode"] if q["dtype"] == first["dtype"]), c["roof"]["dram_read_gbs"])
                        for c, _, _ in runs[t]]
                item = {"threads": t, "dtype": first["dtype"], "gbs": med(q["gbs"] for q, _ in rows),
                        "read_roof_gbs": med(r for _, r in rows), "ratio_roof": med(q["gbs"] / r for q, r in rows),
                        "ratio_roof_best": med(q["best"] / r for q, r in rows)}
                line = "%7d %-6s %7.2f %7.2f %7.3f %6.3f  %-15s" % (
                    t, item["dtype"], item["gbs"], item["read_roof_gbs"], item["ratio_roof"], item["ratio_roof_best"],
                    verdict(item["ratio_roof"], DECODE_ROOF_TARGET))
                if all("ggml_gbs" in q for q, _ in rows):
                    item["ggml_gbs"] = med(q["ggml_gbs"] for q, _ in rows)
                    item["ratio_ggml"] = med(q["gbs"] / q["ggml_gbs"] for q, _ in rows)
                    item["ratio_ggml_best"] = med(q["best"] / q["ggml_best"] for q, _ in rows)
                    item["ggml_check"] = max(q["ggml_check"] for q, _ in rows)
                    line += " %10.2f %8.3f %6.3f  %s" % (item["ggml_gbs"], item["ratio_ggml"], item["ratio_ggml_best"],
                                                        "ok" if item["ggml_check"] <= 1.0 else "FAIL %.3g"
                                                        % item["ggml_check"])
                else:
                    item["ggml_missing"] = (rows[0][0].get("ggml_missing") if summary["ggml"]["available"]
                                            else summary["ggml"]["reason"])
                    line += " ggml: %s" % (item["ggml_missing"] if summary["ggml"]["available"]
                                           else "not available (below)")
                print(line)
                summary["quant_decode"].append(item)
        if summary["ggml"]["available"]:
            print("ggml peer: ggml %s from %s (%s); check: |StrideWeave - ggml| over the bound both keep "
                  "(docs/quantization.md), <= 1" % (summary["ggml"]["version"], ggml_dir, ggml_from))
        else:
            print("ggml peer: not available (%s)" % summary["ggml"]["reason"])
    if inputs is not None:
        print("\nPython path: sw.matmul(sw.from_dlpack(x), weight) on the PyTorch tensors' memory vs torch.matmul on "
              "them, GFLOP/s (decode: weight GB/s)")
        print("threads dtype shape                 weight      sw.matmul  PyTorch  sw/torch   best target >= %.2f"
              % PYTHON_TARGET)
        for t in THREADS:
            for first in py_runs[t][0]:
                key = (first["shape"], first["dtype"], first["layout"])
                ps = [next(p for p in rows if (p["shape"], p["dtype"], p["layout"]) == key) for rows in py_runs[t]]
                item = dict(first)
                for field in ("sw_gflops", "torch_gflops", "ratio_torch", "ratio_torch_best", "sw_weight_gbs",
                              "torch_weight_gbs"):
                    item[field] = med(p[field] for p in ps)
                item["target_torch"] = PYTHON_TARGET
                rate = ("%10.2f %8.2f" % (item["sw_weight_gbs"], item["torch_weight_gbs"]) if item["decode"] else
                        "%10.1f %8.1f" % (item["sw_gflops"], item["torch_gflops"]))
                print("%7d %-5s %-21s %-10s %s %9.3f %6.3f  %s" % (t, item["dtype"], item["shape"], item["layout"], rate,
                                                                  item["ratio_torch"], item["ratio_torch_best"],
                                                                  verdict(item["ratio_torch"], PYTHON_TARGET)))
                summary["python_matmul"].append(item)
    print("\nexperts: batched matmul over resident experts (ms), one block per expert vs plain and interleaved")
    for t in THREADS:
        es = [c["experts"] for c, _, _ in runs[t]]
        e = {"threads": t, "s": es[0]["s"], "m": es[0]["m"], "i": es[0]["i"], "o": es[0]["o"],
             "view_ms": med(x["view_ms"] for x in es), "plain_ms": med(x["plain_ms"] for x in es),
             "interleaved_ms": med(x["interleaved_ms"] for x in es),
             "ratio_plain": med(x["plain_ms"] / x["view_ms"] for x in es),
             "repack_ms": med(x["interleaved_ms"] - x["view_ms"] for x in es)}
        print("%7d  view %.2f  plain %.2f  (plain/view %.3f %s)  interleaved %.2f: repacking costs %.2f ms"
              % (t, e["view_ms"], e["plain_ms"], e["ratio_plain"], verdict(e["ratio_plain"], 0.9),
                 e["interleaved_ms"], e["repack_ms"]))
        summary["experts"].append(e)
    print("\n%d MiB f32, GB/s moved (reads + writes)" % args.mib)
    print("threads  op                  GB/s  read roof  memcpy   /roof   best  target >= %.2f" % STREAM_TARGET)
    for t in THREADS:
        cs = [c for c, _, _ in runs[t]]
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
