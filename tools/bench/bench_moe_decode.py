#!/usr/bin/env python3
"""The main job as a benchmark: offloaded Mixtral-architecture decoding
(examples/python/mixtral_offload.py) at primary budgets of 12.5, 25 and 50 %
of the experts with the model file read with direct I/O, and at 25 % from
the zstd tier, each run beside its same-run peers (all resident, naive
on-demand loading, mmap, PyTorch); at 25 % from the remote tier (two
redis-servers the demo starts on unix sockets, or
STRIDEWEAVE_REMOTE_ENDPOINTS) against the direct-I/O file tier; batches of 4 and 8 sequences decoded
together at 25 %, direct (aggregate tokens/s against one sequence's, bytes
read per token, the bound ratio at each batch; beside resident and
PyTorch at the same batch); the expert matmul's resident path
against plain GEMMs on the same bytes (sw.matmul of each chosen expert); and
the expert feed-forward's (sw.expert_ffn) against the same layer unfused on
the same bytes and against PyTorch's. With --quant TYPE (q8_0, q4_0, q4_k,
q6_k, mxfp4; repeatable) also the demo's --quant run at 25 %, direct: the
experts quantized to TYPE in a GGUF file, offloaded at the same budget
against the bf16 offloaded run (bytes read per token, tokens/s), naive
on-demand loading of the quantized file and the quantized experts all
resident, each with its error against the bf16 PyTorch reference.

    PYTHONPATH=build/bindings/python python3 tools/bench/bench_moe_decode.py [--tokens 32] [--quick]
        [--quant TYPE ...]

Prints a table and one BENCH_JSON line per configuration.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import pathlib
import shutil
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
if os.environ.get("STRIDEWEAVE_PYTHONPATH"):
    sys.path.insert(0, os.environ["STRIDEWEAVE_PYTHONPATH"])

import torch  # noqa: E402

import strideweave as sw  # noqa: E402


def load_demo():
    spec = importlib.util.spec_from_file_location("mixtral_offload", ROOT / "examples" / "python" / "mixtral_offload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expert_matmul_vs_gemm(hidden, ffn, repeats=400):
    """The resident path: one expert_matmul of k = 2 experts for one token
    against two sw.matmul calls on dense copies of the same experts. Run it
    with Python's collector kept out (the demo's QuietCollector)."""
    E = 8
    te = sw.TiledEvictable(sw.carriers.CPU(0, dtype=sw.bfloat16), sw.carriers.Host(E * hidden * ffn, dtype=sw.bfloat16),
                           (1, 1, E), (hidden, ffn, 1))
    full = te.full_tensor()
    weights = torch.randn(E, ffn, hidden, dtype=torch.bfloat16)
    for e in range(E):
        te.update_async(full, sw.from_dlpack(weights[e:e + 1].permute(2, 1, 0)), sw.TileSelection([[0], [0], [e]])).wait()
    x = sw.from_dlpack(torch.randn(1, hidden).to(torch.bfloat16))
    ids = sw.from_dlpack(torch.tensor([[1, 5]]))
    dense = [sw.from_dlpack(weights[e].T) for e in (1, 5)]

    expert = lambda: te.expert_matmul(full, x, ids).wait()  # noqa: E731
    plain = lambda: [sw.matmul(x, w, out_dtype=sw.float32) for w in dense]  # noqa: E731
    # The two alternate call by call, so that both see the same clock speed,
    # cache state and neighbours on the machine.
    times = {expert: [], plain: []}
    expert(), plain()
    for _ in range(repeats):
        for f in (expert, plain):
            t0 = time.perf_counter()
            f()
            times[f].append(time.perf_counter() - t0)
    t_expert, t_plain = (sorted(times[f])[repeats // 2] for f in (expert, plain))
    te.release()
    return {"hidden": hidden, "ffn": ffn, "expert_matmul_us": t_expert * 1e6, "plain_gemm_us": t_plain * 1e6,
            "ratio": t_plain / t_expert, "bytes_per_call": 2 * hidden * ffn * 2}


def expert_ffn_vs_unfused(hidden, ffn, repeats=400):
    """The resident path of a whole layer's experts: one sw.expert_ffn of
    k = 2 resident bf16 experts for one token, against the same layer
    unfused on dense copies of the same experts (per expert sw.matmul of x by
    w1 and by w3, sw.silu, sw.mul, sw.matmul by w2, then the gated sum), and
    against PyTorch's F.linear layer on the same weights (its threads as the
    runtime's compute threads). Alternating call by call."""
    E = 8
    cpu = lambda: sw.carriers.CPU(0, dtype=sw.bfloat16)  # noqa: E731
    g = torch.Generator().manual_seed(5)
    ws = {"w1": torch.randn(E, ffn, hidden, generator=g).to(torch.bfloat16),
          "w3": torch.randn(E, ffn, hidden, generator=g).to(torch.bfloat16),
          "w2": torch.randn(E, hidden, ffn, generator=g).to(torch.bfloat16)}
    tiles = {}
    for name, w in ws.items():
        te = sw.TiledEvictable(cpu(), sw.carriers.Host(w.numel(), dtype=sw.bfloat16), (1, 1, E),
                               (w.shape[2], w.shape[1], 1))
        full = te.full_tensor()
        for e in range(E):
            te.update_async(full, sw.from_dlpack(w[e:e + 1].permute(2, 1, 0)), sw.TileSelection([[0], [0], [e]])).wait()
        tiles[name] = (te, full)
    xt = torch.randn(1, hidden).to(torch.bfloat16)
    x = sw.from_dlpack(xt)
    ids = sw.from_dlpack(torch.tensor([[1, 5]]))
    gt = torch.tensor([[0.6, 0.4]])
    gates = sw.from_dlpack(gt)
    dense = {name: [sw.from_dlpack(w[e].T) for e in (1, 5)] for name, w in ws.items()}

    fused = lambda: sw.expert_ffn(x, ids, tiles["w1"][1], tiles["w3"][1], tiles["w2"][1], gates).wait()  # noqa: E731

    def unfused():
        out = None
        for j in range(2):
            h = sw.silu(sw.matmul(x, dense["w1"][j])) * sw.matmul(x, dense["w3"][j])
            y = sw.astype(sw.matmul(h, dense["w2"][j]), sw.float32) * float(gt[0, j])
            out = y if out is None else out + y
        return sw.astype(out, sw.bfloat16)

    def pytorch():
        ys = [torch.nn.functional.linear(torch.nn.functional.silu(torch.nn.functional.linear(xt, ws["w1"][e])) *
                                         torch.nn.functional.linear(xt, ws["w3"][e]), ws["w2"][e]) for e in (1, 5)]
        return (gt[:, :, None] * torch.stack(ys, 1).float()).sum(1).to(torch.bfloat16)

    def timed(fs, n):
        times = {f: [] for f in fs}
        for f in fs:
            f()
        for _ in range(n):
            for f in fs:
                t0 = time.perf_counter()
                f()
                times[f].append(time.perf_counter() - t0)
        return [sorted(times[f])[n // 2] for f in fs]

    t_fused, t_unfused = timed((fused, unfused), repeats)
    # PyTorch apart: its OpenMP threads spin after each call and would take
    # the cores from the runtime's threads in an alternating loop.
    saved = torch.get_num_threads()
    torch.set_num_threads(sw.default_runtime().compute_threads)
    (t_torch,) = timed((pytorch,), repeats)
    torch.set_num_threads(saved)
    for te, _ in tiles.values():
        te.release()
    return {"hidden": hidden, "ffn": ffn, "expert_ffn_us": t_fused * 1e6, "unfused_us": t_unfused * 1e6,
            "pytorch_us": t_torch * 1e6, "ratio": t_unfused / t_fused, "ratio_pytorch": t_torch / t_fused,
            "bytes_per_call": 2 * 3 * hidden * ffn * 2}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--dir", default=os.environ.get("SW_RESULTS", "results"))
    p.add_argument("--quick", action="store_true", help="small model (a smoke run, not a measurement)")
    p.add_argument("--quant", action="append", default=[], choices=("q8_0", "q4_0", "q4_k", "q6_k", "mxfp4"),
                   help="also decode from the experts quantized to this dtype (repeatable)")
    p.add_argument("--only-quant", action="store_true", help="only the --quant configurations")
    o = p.parse_args(argv)
    demo = load_demo()
    size = ["--layers", "2", "--experts", "8", "--hidden", "256", "--ffn", "512"] if o.quick else []
    configs = [("direct", 0.125, 1), ("direct", 0.25, 1), ("direct", 0.5, 1), ("zstd", 0.25, 1),
               ("remote", 0.25, 1), ("direct", 0.25, 4), ("direct", 0.25, 8)]
    if o.only_quant:
        configs = []
    rows = []
    for tier, budget, batch in configs:
        if tier == "remote" and shutil.which("redis-server") is None and not os.environ.get(
                "STRIDEWEAVE_REMOTE_ENDPOINTS"):
            print("bench_moe_decode: remote tier skipped: no redis-server on the PATH and no "
                  "STRIDEWEAVE_REMOTE_ENDPOINTS", file=sys.stderr, flush=True)
            continue
        args = size + ["--tier", tier, "--budget", str(budget), "--tokens", str(o.tokens), "--dir", o.dir,
                       "--quiet", "--csv", os.path.join(o.dir, f"bench_moe_{tier}_{budget}_b{batch}.csv")]
        if batch > 1:
            args += ["--batch", str(batch)]
        if batch > 1 or tier == "remote":  # resident for the bound, PyTorch for the error
            args += ["--runs", "pytorch,resident,offloaded"]
        out = io.StringIO()
        print(f"bench_moe_decode: tier {tier}, budget {100 * budget:.1f}%, batch {batch} ...", file=sys.stderr,
              flush=True)
        with contextlib.redirect_stdout(out):
            status = demo.main(args)
        line = next(x for x in out.getvalue().splitlines() if x.startswith("SUMMARY_JSON "))
        s = json.loads(line[len("SUMMARY_JSON "):])
        runs = s["runs"]
        tps = lambda name: runs[name]["tokens_per_s"] if name in runs else None  # noqa: E731
        r = {"tier": tier, "budget": budget, "batch": batch, "status": status, "vs_naive": s.get("vs_naive"),
             "vs_resident": s.get("vs_resident"), "bound_ratio": s.get("bound_ratio"),
             "device_bound_ratio": s.get("device_bound_ratio"),
             "lru_hit_rate": s["lru_hit_rate"], "hit_rate": runs["offloaded"]["hit_rate"],
             "offloaded_tps": tps("offloaded"), "naive_tps": tps("naive"), "resident_tps": tps("resident"),
             "pytorch_tps": tps("pytorch"), "mmap_tps": tps("mmap"), "max_error_vs_pytorch": s["max_error_vs_pytorch"],
             "bytes_per_token": runs["offloaded"]["bytes_per_token"],
             "idle_ms_per_token": (s.get("offloaded_layers") or {}).get("ms_per_token")}
        direct = next((x for x in rows if (x["tier"], x["budget"], x["batch"]) == ("direct", budget, 1)), None)
        if tier == "remote" and direct:  # the file tier read with direct I/O at the same budget
            r["direct_tps"] = direct["offloaded_tps"]
            r["vs_direct"] = r["offloaded_tps"] / direct["offloaded_tps"]
        one = next((x for x in rows if (x["tier"], x["budget"], x["batch"]) == (tier, budget, 1)), None)
        if batch > 1 and one:  # the same budget and tier, one sequence
            r["vs_batch1"] = r["offloaded_tps"] / one["offloaded_tps"]
            r["bytes_per_token_vs_batch1"] = r["bytes_per_token"] / one["bytes_per_token"]
        rows.append(r)
        print("BENCH_JSON " + json.dumps({"moe_decode": r}, sort_keys=True))
    qrows = []
    for quant in o.quant:
        args = size + ["--tier", "direct", "--budget", "0.25", "--tokens", str(o.tokens), "--dir", o.dir, "--quiet",
                       "--quant", quant, "--csv", os.path.join(o.dir, f"bench_moe_{quant}.csv")]
        out = io.StringIO()
        print(f"bench_moe_decode: {quant} experts, tier direct, budget 25.0% ...", file=sys.stderr, flush=True)
        with contextlib.redirect_stdout(out):
            status = demo.main(args)
        line = next(x for x in out.getvalue().splitlines() if x.startswith("SUMMARY_JSON "))
        s = json.loads(line[len("SUMMARY_JSON "):])
        runs = s["runs"]
        r = {"quant": quant, "tier": "direct", "budget": 0.25, "status": status,
             "quant_bytes_vs_bf16": s["quant"]["vs_bf16_bytes"], "gguf_bytes": s["quant"]["file_bytes"],
             "lru_hit_rate": s["lru_hit_rate"], "tps_vs_bf16_offloaded": s.get("q_vs_offloaded_tps"),
             "bytes_vs_bf16_offloaded": s.get("q_vs_offloaded_bytes"), "quant_error_bound": s["quant_error_bound"]}
        for name in ("pytorch", "resident", "offloaded", "q-offloaded", "q-naive", "q-resident"):
            if name in runs:
                key = name.replace("-", "_")
                r[f"{key}_tps"] = runs[name]["tokens_per_s"]
                r[f"{key}_bytes_per_token"] = runs[name]["bytes_per_token"]
                r[f"{key}_hit_rate"] = runs[name]["hit_rate"]
                r[f"{key}_max_error"] = runs[name]["max_error_vs_pytorch"]
                r[f"{key}_rms_error"] = runs[name]["rms_error_vs_pytorch"]
        qrows.append(r)
        print("BENCH_JSON " + json.dumps({"moe_decode_quant": r}, sort_keys=True))
    if o.only_quant:
        print_quant(qrows)
        return 0 if all(r["status"] == 0 for r in qrows) else 1
    # The demo's experts, and Mixtral 8x7B's (4096 x 14336: 117 MB a call,
    # past any L3, where the call's fixed cost no longer shows).
    sizes = [(128, 256)] if o.quick else [(1024, 2816), (4096, 14336)]
    with demo.QuietCollector():
        ems = [expert_matmul_vs_gemm(hidden, ffn, 400 if hidden * ffn < 1 << 24 else 40) for hidden, ffn in sizes]
        ffns = [expert_ffn_vs_unfused(hidden, ffn, 400 if hidden * ffn < 1 << 24 else 30) for hidden, ffn in sizes]
    for em in ems:
        print("BENCH_JSON " + json.dumps({"expert_matmul": em}, sort_keys=True))
    for ef in ffns:
        print("BENCH_JSON " + json.dumps({"expert_ffn": ef}, sort_keys=True))

    def cell(v, fmt, suffix=""):
        return f"{v:{fmt}}{suffix}" if v is not None else "-".rjust(int(fmt.split(".")[0]) + len(suffix))

    print(f"\n{'tier':7s} {'budget':>7s} {'B':>2s} {'tok/s':>7s} {'naive':>7s} {'resident':>9s} {'pytorch':>8s} "
          f"{'mmap':>7s} {'vs naive':>9s} {'vs res.':>8s} {'vs B=1':>7s} {'KiB/tok':>8s} {'bound':>7s} {'device':>7s} "
          f"{'hit':>6s} {'LRU hit':>8s} {'max err':>8s}")
    for r in rows:
        print(f"{r['tier']:7s} {100 * r['budget']:6.1f}% {r['batch']:2d} {r['offloaded_tps']:7.2f} "
              f"{cell(r['naive_tps'], '7.2f')} {cell(r['resident_tps'], '9.2f')} {cell(r['pytorch_tps'], '8.2f')} "
              f"{cell(r['mmap_tps'], '7.2f')} {cell(r['vs_naive'], '8.2f', 'x')} {cell(r['vs_resident'], '7.2f', 'x')} "
              f"{cell(r.get('vs_batch1'), '6.2f', 'x')} {cell(r['bytes_per_token'] / 1024, '8.0f')} "
              f"{cell(r['bound_ratio'], '7.2f')} {cell(r['device_bound_ratio'], '7.2f')} {100 * r['hit_rate']:5.1f}% "
              f"{100 * r['lru_hit_rate']:7.1f}% {r['max_error_vs_pytorch']:8.1e}")
    print()
    for em in ems:
        print(f"expert matmul, resident, 2 experts of {em['hidden']}x{em['ffn']} bf16 for one token: "
              f"{em['expert_matmul_us']:.0f} us; two plain GEMMs on the same bytes {em['plain_gemm_us']:.0f} us: "
              f"ratio {em['ratio']:.2f} (target >= 0.9)")
    print_quant(qrows)
    for ef in ffns:
        print(f"expert feed-forward, resident, 2 experts of {ef['hidden']}x{ef['ffn']} bf16 (w1, w3, w2) for one "
              f"token: {ef['expert_ffn_us']:.0f} us; the unfused layer on the same bytes {ef['unfused_us']:.0f} us "
              f"(ratio {ef['ratio']:.2f}, target >= 0.9), PyTorch's F.linear layer {ef['pytorch_us']:.0f} us "
              f"(ratio {ef['ratio_pytorch']:.2f})")
    return 0 if all(r["status"] == 0 for r in rows + qrows) else 1


def print_quant(qrows):
    for r in qrows:
        print(f"\n{r['quant']} experts ({r['quant_bytes_vs_bf16']:.3f}x the bf16 bytes), direct tier, budget 25%:")
        print(f"  {'run':12s} {'tok/s':>7s} {'KiB/tok':>8s} {'hit':>6s} {'max err':>8s} {'rms err':>8s}")
        for name in ("pytorch", "resident", "offloaded", "q-offloaded", "q-naive", "q-resident"):
            key = name.replace("-", "_")
            if f"{key}_tps" not in r:
                continue
            bpt, hit = r[f"{key}_bytes_per_token"], r[f"{key}_hit_rate"]
            print(f"  {name:12s} {r[f'{key}_tps']:7.2f} {'-' if bpt is None else f'{bpt / 1024:.0f}':>8s} "
                  f"{'-' if hit is None else f'{100 * hit:.1f}%':>6s} {r[f'{key}_max_error']:8.1e} "
                  f"{r[f'{key}_rms_error']:8.1e}")
        if r["tps_vs_bf16_offloaded"] is not None:
            print(f"  {r['quant']} offloaded against bf16 offloaded at the same budget: bytes per token "
                  f"{r['bytes_vs_bf16_offloaded']:.2f}x (target <= 0.3 for q4_k), tokens/s "
                  f"{r['tps_vs_bf16_offloaded']:.2f}x (target >= 2.5 for q4_k)")


if __name__ == "__main__":
    sys.exit(main())
