#!/usr/bin/env python3
"""Runs every StrideWeave benchmark with its same-run peers and writes one
report: bench-report/report.md (tables) and bench-report/report.json (every
BENCH_JSON / SUMMARY_JSON line the tools printed, the figures, peer figures
and ratios taken from them, and the machine).

    python3 tools/bench/report.py [--build build] [--out bench-report]
                                  [--only NAME ...] [--timeout 900] [--no-ggml-build]

tools/run_benchmarks.sh installs the dependencies, builds the release and
runs this. Each benchmark runs at its tool's default size, spelled out in
BENCHMARKS, and the suite takes one to a few minutes on two cores (more when
other work loads them); each tool's full output goes to
bench-report/logs/NAME.txt. A benchmark that is not built, cannot run here (no
Vulkan driver, no Python bindings), fails or times out is recorded as skipped
with the reason; the suite goes on. Exits 0 unless no benchmark ran at all.

bench_cpu's quantized decode has ggml's kernels as its peer (informational):
when no libggml is found (see bench_cpu.py), this script first runs
tools/bench/build_ggml.sh, which builds one into ~/.cache/strideweave once
(a few minutes); --no-ggml-build skips that, and the report then says why
the peer is not available.

Figures drift 10-30 % between runs on these machines: compare the ratios, each
measured against its peer in the same run, and look at the load average in the
report's header (other work on the two cores distorts the medians; the "best"
ratios, from the fastest repetitions, hold up better).
"""
import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Benchmark:
    """One tool to run: `args` start with "{build}/..." for a built tool or
    with a script path; `rows` turns its parsed JSON into report rows."""

    def __init__(self, name, what, args, rows, env=None, needs=None):
        self.name, self.what, self.args, self.rows, self.env, self.needs = name, what, args, rows, env or {}, needs


def row(figure, ours, peer, unit, ratio, peer_name, ratio_best=None, target=None, note=""):
    """A report row. target is (">=" or "<=", value) on `ratio`, or None."""
    verdict = "-"
    if target is not None and ratio is not None:
        op, value = target
        verdict = "ok" if (ratio >= value if op == ">=" else ratio <= value) else "MISS"
    return {"figure": figure, "ours": ours, "peer": peer, "peer_name": peer_name, "unit": unit, "ratio": ratio,
            "ratio_best": ratio_best, "target": None if target is None else f"{target[0]} {target[1]}",
            "verdict": verdict, "note": note}


# ---- rows per tool, from its JSON lines ---------------------------------------------------------------------

def rows_cpu(parsed):
    summary = parsed["summary"]
    if summary is None:
        raise ValueError("bench_cpu.py printed no SUMMARY_JSON line")
    out = []
    for m in summary["matmul"]:
        what = f"matmul {m['dtype']} {m['shape']}, {m['threads']}T"
        if "ratio_torch" in m:
            out.append(row(what, m["sw_gflops"], m["torch_gflops"], "GFLOP/s", m["ratio_torch"],
                           f"torch.matmul {m['dtype']}", m["ratio_torch_best"], (">=", m["target_torch"])))
        if m.get("numpy_gflops"):
            out.append(row(what, m["sw_gflops"], m["numpy_gflops"], "GFLOP/s", m["ratio_numpy"], "NumPy np.dot"))
        if m.get("blas_gflops"):
            out.append(row(what, m["sw_gflops"], m["blas_gflops"], "GFLOP/s", m["sw_gflops"] / m["blas_gflops"],
                           "system cblas_sgemm", note="informational: Debian OpenBLAS, generic kernels here"))
        if m.get("decode"):
            note = f"PyTorch {m['torch_weight_gbs']:.2f} GB/s" if "torch_weight_gbs" in m else ""
            out.append(row(f"{what}: weight bytes", m["weight_gbs"], m["read_roof_gbs"], "GB/s", m["ratio_roof"],
                           "DRAM read roof", target=(">=", 0.80), note=note))
    ggml = summary.get("ggml") or {"available": False, "reason": "this bench_cpu.py reports no ggml peer"}
    for q in summary.get("quant_decode", []):
        what = f"quantized decode {q['dtype']} 1x4096->1024, {q['threads']}T: weight bytes"
        out.append(row(what, q["gbs"], q["read_roof_gbs"], "GB/s", q["ratio_roof"], "DRAM read roof",
                       q["ratio_roof_best"], (">=", 0.80),
                       note="quantized bytes; x f32, quantized to 8-bit blocks in the call"))
        if "ggml_gbs" in q:
            check = "ok" if q["ggml_check"] <= 1.0 else f"FAILED ({q['ggml_check']:.3g})"
            out.append(row(what, q["gbs"], q["ggml_gbs"], "GB/s", q["ratio_ggml"],
                           f"ggml {ggml.get('version') or ''} vec_dot".replace("  ", " "), q["ratio_ggml_best"],
                           note=f"informational; same bytes, results agree within the bound: {check}"))
        else:
            why = q.get("ggml_missing") or ggml.get("reason")
            out.append(row(what, q["gbs"], None, "GB/s", None, "ggml vec_dot",
                           note=f"ggml peer: not available ({why})"))
    for e in summary.get("experts", []):
        what = f"expert matmul, {e['s']} resident experts ({e['i']}, {e['o']}) f32, {e['threads']}T"
        out.append(row(what, e["view_ms"], e["plain_ms"], "ms (lower is better)", e["ratio_plain"],
                       f"{e['s']} plain matmuls on the same memory", target=(">=", 0.90),
                       note=f"interleaved experts {e['interleaved_ms']:.2f} ms: repacking costs "
                            f"{e['repack_ms']:.2f} ms"))
    for e in summary["elementwise"]:
        out.append(row(f"{e['op']}, {summary['mib']} MiB, {e['threads']}T", e["gbs"], e["read_roof_gbs"], "GB/s",
                       e["ratio_read_roof"], "DRAM read roof", e["ratio_read_roof_best"], (">=", 0.70),
                       note=f"memcpy {e['memcpy_gbs']:.2f} GB/s"))
    return out


def rows_file(parsed):
    j = parsed["bench"][-1]
    return [row(f"promotion from the file tier, {p['in_flight']} in flight, {j['mib']} MiB", p["sw_gbps"],
                p["pread_gbps"], "GB/s", p["ratio"], "pread, same threads", p["ratio_best"], (">=", 0.80),
                note=f"source {j['source']}") for p in j["promotion"]]


def rows_file_direct(parsed):
    j = parsed["bench"][-1]
    what = f"promotion from the file tier, O_DIRECT, {j['mib']} MiB"
    sw, pread, fio = j["sw"], j["pread"], j["fio"]
    where = f"file on {j['device']} ({j['fs']}), {j['reps']} repetitions"
    if j.get("anon_huge_mib", -1) >= 0:
        where += f"; in huge pages: {j['anon_huge_mib']} MiB of the destinations' {2 * j['mib']}"
    cached = (f"; WARNING: {100 * sw['cached_fraction']:.0f}% of the file was in the page cache after a move: it did "
              f"not read with O_DIRECT" if sw["cached_fraction"] > 0.01 else "")
    best = pread["best"]
    threads = f"{best['threads']} thread{'s' if best['threads'] > 1 else ''}"
    out = [row(what, sw["gbps"], pread["gbps"], "GB/s", pread["ratio"],
               "O_DIRECT pread at its best queue depth (same regions)", pread["ratio_best"], (">=", j["target"]),
               note=f"best: {threads} x {best['chunk_mib']} MiB of 1-8 threads x 1, 4 MiB; StrideWeave with "
                    f"chunk size and requests in flight chosen by the runtime; {where}{cached}")]
    if fio["available"]:
        best = fio["best"]
        out.append(row(what, sw["gbps"], fio["gbps"], "GB/s", fio["ratio"],
                       f"fio --direct=1 --ioengine={fio['engine']} at its best bs and iodepth", fio["ratio_best"],
                       note=f"informational (fio times its own jobs, runs them back to back and reads into small "
                            f"pages); best: bs {best['bs_mib']}M iodepth {best['iodepth']} of bs 1M, 4M x iodepth "
                            f"1-8, each job reading the file's first {fio['job_mib']} MiB; {fio['version']}"
                            + (f"; engines passed over: {fio['passed_over']}" if fio.get("passed_over") else "")))
    return out


def rows_zstd(parsed):
    j = parsed["bench"][-1]
    out = []
    for r in j["results"]:
        tag = f"{r['dtype']}, shuffle {'on' if r['shuffle'] else 'off'}, ratio {r['compression_ratio']:.2f}"
        out.append(row(f"zstd tier read, 1 thread ({tag})", r["sync_gbs"], r["raw_1t_gbs"], "GB/s",
                       r["sync_vs_raw"], "raw ZSTD_decompressDCtx", r["sync_vs_raw_best"], (">=", 0.80),
                       note=f"CPU seconds ratio {r['sync_cpu_vs_raw']:.2f}"))
        if r["shuffle"]:
            out.append(row(f"zstd tier move, {j['workers']} workers ({tag})", r["move_gbs"], r["raw_workers_gbs"],
                           "GB/s", r["move_vs_raw"], "raw zstd, same threads", r["move_vs_raw_best"], (">=", 0.80),
                           note=f"CPU seconds ratio {r['move_cpu_vs_raw']:.2f}"))
    return out


def rows_await(parsed):
    j = parsed["bench"][-1]
    paths = {p["path"]: p for p in j["paths"]}
    peer_names = {"peer_cond": "eventfd + epoll_wait, then a condition variable",
                  "peer_cb": "eventfd + epoll_wait, then a condition variable, with loop_cb's callback protocol",
                  "peer_fd": "eventfd + epoll_wait, then an eventfd the caller polls"}
    same = j.get("same_cpu_pct") or {}
    placement = (f"; loop thread on the woken caller's CPU in {same['loop_cb']:.0f}% of iterations, the peer's "
                 f"helper in {same['peer_cond']:.0f}%" if same else "")
    out = []
    for p in j["paths"]:
        if p["peer"] is None:
            continue
        peer = paths[p["peer"]]
        late = (f", {2 * j['hand_offs']} when the callback comes after the completion"
                if p["path"] == "loop_cb" else "")
        what = f"await round trip: {p['path']} ({j['hand_offs']} hand-offs{late})"
        peer_name = f"{j['hand_offs']} bare hand-offs: {peer_names.get(p['peer'], p['peer'])}"
        out.append(row(what + ", median", p["median_us"], peer["median_us"], "us (lower is better)", p["ratio_peer"],
                       peer_name, p["ratio_min_peer"], ("<=", j["target_ratio_peer"]),
                       note=f"p99 {p['p99_us']:.1f} us, peer's {peer['p99_us']:.1f} us{placement}"))
        out.append(row(what + ", p99", p["p99_us"], peer["p99_us"], "us (lower is better)", p["ratio_p99_peer"],
                       peer_name, target=("<=", j["target_ratio_p99_peer"])))
    return out


def rows_tiled(parsed):
    j = parsed["bench"][-1]
    out = [row(f"projection of 8 resident 4 MiB tiles, {j['threads']}T", j["project_gbps"], j["memcpy_gbps"], "GB/s",
               j["project_ratio"], "memcpy, same threads", target=(">=", 0.90))]
    # One MoE loop per way of reading the file: "moe_page_cache", "moe_direct_io".
    names = {"page_cache": "from the page cache", "direct_io": "read with O_DIRECT"}
    for key, m in j.items():
        if not (key.startswith("moe_") and isinstance(m, dict)):
            continue
        how = names.get(key[len("moe_"):], key[len("moe_"):])
        out.append(row(f"MoE step from the file tier, {how}", m["step_ms"],
                       max(m["compute_ms"], m["transfer_ms"]), "ms (lower is better)", m["overlap_ratio"],
                       "max(compute, transfer)", target=("<=", 1.15),
                       note=f"compute {m['compute_ms']:.1f} ms, transfer {m['transfer_ms']:.1f} ms per step"
                       + (f"; reads from the page cache are copies on the cores that compute (serially "
                          f"{m['compute_ms'] + m['transfer_ms']:.1f} ms)" if key == "moe_page_cache" else "")))
    return out


def rows_projection(parsed):
    j = parsed["bench"][-1]
    ours = j["strideweave_gbps"]
    what = f"projection of {j['mib']} MiB of resident experts, Python, {j['threads']}T"
    out = [row(what, ours, j["numpy_take_gbps"], "GB/s", j["ratio_vs_numpy_take"], "numpy.take(out=)")]
    if j.get("torch"):
        out.append(row(what, ours, j["torch_index_select_gbps"], "GB/s", j["ratio_vs_torch_index_select"],
                       "torch.index_select(out=)", target=(">=", 1.0)))
    return out


def rows_vulkan(parsed):
    j = parsed["bench"][-1]
    cpu, vk = j["cpu"], j["vulkan"]
    units = {"gbs": "GB/s", "gflops": "GFLOP/s", "us": "us (lower is better)", "ms": "ms (lower is better)"}
    out = []
    for key, value in vk.items():
        name, _, suffix = key.rpartition("_")
        if key not in cpu or suffix not in units:
            continue
        # A figure the build refuses prints 0; its ratio means nothing.
        ratio = value / cpu[key] if value and cpu[key] else None
        out.append(row(name.replace("_", " "), value, cpu[key], units[suffix], ratio, "CPU carrier",
                       note="" if ratio is not None else "refused or not measured"))
    if vk.get("bare_submit_us") and vk.get("submit_us"):
        out.append(row("Vulkan submit: one 1-element op and its read", vk["submit_us"], vk["bare_submit_us"],
                       "us (lower is better)", vk["submit_us"] / vk["bare_submit_us"],
                       "bare vkQueueSubmit + fence + mapped read", target=("<=", 1.5)))
    return out


def rows_python(parsed):
    out = []
    for r in parsed["bench"][-1]["results"]:
        what = f"Python call sw.{r['op']} {r['n']}x{r['n']}, {r['layout']} inputs"
        note = f"C call alone {r['c_call_us']:.2f} us"
        out.append(row(what, r["strideweave_us"], r["torch_us"], "us (lower is better)", r["ratio_torch"],
                       "PyTorch", target=("<=", 2.0), note=note))
        out.append(row(what, r["strideweave_us"], r["numpy_us"], "us (lower is better)", r["ratio_numpy"], "NumPy",
                       note=note))
    return out


def rows_moe_decode(parsed):
    out = []
    for j in parsed["bench"]:
        if "moe_decode" in j:
            m = j["moe_decode"]
            what = f"MoE decoding, {m['tier']} tier, budget {100 * m['budget']:.1f}%"
            batch = m.get("batch", 1)
            if batch > 1:
                what = f"MoE decoding, {batch} sequences together, {m['tier']} tier, budget {100 * m['budget']:.1f}%"
                if m.get("vs_batch1") is not None:
                    note = (f"{m['bytes_per_token'] / 1024:.0f} KiB read per token, "
                            f"{m['bytes_per_token_vs_batch1']:.2f}x one sequence's; hit rate {100 * m['hit_rate']:.0f}%")
                    out.append(row(what + ": aggregate tokens/s", m["offloaded_tps"],
                                   m["offloaded_tps"] / m["vs_batch1"], "tokens/s", m["vs_batch1"],
                                   "one sequence at the same budget", target=(">=", 1.8) if batch == 4 else None,
                                   note=note))
                if m["bound_ratio"] is not None:
                    out.append(row(what + ": time per token / its lower bound", m["bound_ratio"], None, "ratio",
                                   m["bound_ratio"], "max(resident compute, bytes / bandwidth)", target=("<=", 1.15)))
                continue
            if m["tier"] == "remote":
                note = (f"{m['bytes_per_token'] / 1024:.0f} KiB read per token, hit rate {100 * m['hit_rate']:.0f}%, "
                        f"vs resident {m['vs_resident']:.2f}; two local redis-servers on unix sockets")
                out.append(row(what, m["offloaded_tps"], m.get("direct_tps"), "tokens/s", m.get("vs_direct"),
                               "the direct-I/O file tier at the same budget", note=note))
                if m["bound_ratio"] is not None:
                    out.append(row(what + ": time per token / its lower bound", m["bound_ratio"], None, "ratio",
                                   m["bound_ratio"], "max(resident compute, bytes / the remote carrier's replay)"))
                continue
            note = (f"hit rate {100 * m['hit_rate']:.0f}% (plain LRU {100 * m['lru_hit_rate']:.0f}%), vs resident "
                    f"{m['vs_resident']:.2f}, max error {m['max_error_vs_pytorch']:.1e}")
            out.append(row(what, m["offloaded_tps"], m["naive_tps"], "tokens/s", m["vs_naive"],
                           "naive on-demand loading", target=(">=", 1.5), note=note))
            if m["bound_ratio"] is not None:
                idle = m.get("idle_ms_per_token")
                note = "" if not idle else (f"{idle:.1f} of its {1000 / m['offloaded_tps']:.1f} ms per token computed "
                                            f"with no read of its own in flight")
                out.append(row(what + ": time per token / its lower bound", m["bound_ratio"], None, "ratio",
                               m["bound_ratio"], "max(resident compute, bytes / bandwidth)", target=("<=", 1.15),
                               note=note))
        elif "moe_decode_quant" in j:
            m = j["moe_decode_quant"]
            q = m["quant"].upper()
            what = f"MoE decoding, {q} experts offloaded, {m['tier']} tier, budget {100 * m['budget']:.1f}%"
            targeted = m["quant"] == "q4_k"  # the issue's targets are Q4_K's
            note = (f"hit rate {100 * (m.get('q_offloaded_hit_rate') or 0):.0f}%; max error vs the bf16 PyTorch "
                    f"reference {m.get('q_offloaded_max_error', float('nan')):.1e} (rms "
                    f"{m.get('q_offloaded_rms_error', float('nan')):.1e})")
            if m.get("bytes_vs_bf16_offloaded") is not None:
                out.append(row(what + ": bytes read per token", m["q_offloaded_bytes_per_token"],
                               m["offloaded_bytes_per_token"], "bytes/token (lower is better)",
                               m["bytes_vs_bf16_offloaded"], "bf16 offloaded at the same budget (ratio: ours / bf16)",
                               target=("<=", 0.3) if targeted else None, note=note))
            if m.get("tps_vs_bf16_offloaded") is not None:
                out.append(row(what, m["q_offloaded_tps"], m["offloaded_tps"], "tokens/s",
                               m["tps_vs_bf16_offloaded"], "bf16 offloaded at the same budget",
                               target=(">=", 2.5) if targeted else None, note=note))
            if m.get("q_naive_tps"):
                out.append(row(what, m["q_offloaded_tps"], m["q_naive_tps"], "tokens/s",
                               m["q_offloaded_tps"] / m["q_naive_tps"],
                               f"naive on-demand loading of the {q} file"))
            if m.get("q_resident_tps"):
                out.append(row(what, m["q_offloaded_tps"], m["q_resident_tps"], "tokens/s",
                               m["q_offloaded_tps"] / m["q_resident_tps"], f"{q} experts all resident"))
        elif "expert_matmul" in j:
            e = j["expert_matmul"]
            out.append(row(f"expert matmul on resident tiles, 2 experts {e['hidden']}x{e['ffn']} bf16, 1 token",
                           e["expert_matmul_us"], e["plain_gemm_us"], "us (lower is better)", e["ratio"],
                           "sw.matmul on the same bytes (ratio: plain / expert)", target=(">=", 0.9)))
        elif "expert_ffn" in j:
            e = j["expert_ffn"]
            what = f"expert feed-forward on resident tiles, 2 experts {e['hidden']}x{e['ffn']} bf16, 1 token"
            out.append(row(what, e["expert_ffn_us"], e["unfused_us"], "us (lower is better)", e["ratio"],
                           "the layer unfused (sw.matmul, silu, mul) on the same bytes (ratio: unfused / fused)",
                           target=(">=", 0.9)))
            out.append(row(what, e["expert_ffn_us"], e["pytorch_us"], "us (lower is better)", e["ratio_pytorch"],
                           "PyTorch F.linear layer (ratio: PyTorch / fused)"))
    return out


def rows_remote(parsed):
    summary = parsed["summary"]
    if summary is None:
        raise ValueError("bench_remote printed no SUMMARY_JSON line")
    out = []
    for r in summary["results"]:
        blocks = r["blocks"]
        what = (f"remote tier {r['op']}, {blocks} block{'s' if blocks > 1 else ''} of {r['block_bytes'] >> 20} MiB, "
                f"{'unix socket' if r['transport'] == 'unix' else 'loopback TCP'}")
        note = (f"per block p50/p99 {r['sw_p50_ms']:.2f}/{r['sw_p99_ms']:.2f} ms, peer's "
                f"{r['raw_p50_ms']:.2f}/{r['raw_p99_ms']:.2f} ms; the carrier's CRC-32C {r['crc_ms']:.2f} ms per block "
                f"({100 * r['crc_share']:.0f}% of its time), ratio without it {r['ratio_without_crc']:.2f}")
        out.append(row(what, r["sw_gbs"], r["raw_gbs"], "GB/s", r["ratio"],
                       "bare hiredis async client on a libuv loop, same commands, chunks and requests in flight",
                       r["ratio_best"], (">=", summary["target"]), note=note))
    return out


def have_torch():
    return importlib.util.find_spec("torch") is not None


BENCHMARKS = [
    Benchmark("bench_cpu", "matmul f32 and bf16 vs PyTorch and NumPy, decode (f32, bf16, each quantized dtype) and "
              "elementwise vs the DRAM roof (1 and 2 threads)",
              [sys.executable, "tools/bench/bench_cpu.py", "--build", "{build}", "--runs", "3", "--reps", "15",
               "--mib", "64"], rows_cpu, needs="{build}/tools/bench/bench_cpu"),
    Benchmark("bench_file", "file-tier promotion vs pread",
              ["{build}/tools/bench/bench_file", "--mib", "512", "--reps", "7"], rows_file),
    Benchmark("bench_file_direct", "file-tier promotion with O_DIRECT vs O_DIRECT pread and fio at their best queue "
              "depths",
              ["{build}/tools/bench/bench_file", "--direct", "--mib", "1024", "--reps", "5"], rows_file_direct),
    Benchmark("bench_zstd", "zstd tier vs raw ZSTD_decompress",
              ["{build}/tools/bench/bench_zstd", "--mib", "64", "--reps", "7"], rows_zstd),
    Benchmark("bench_projection", "projection of resident experts vs torch.index_select(out=) and numpy.take(out=)",
              [sys.executable, "tools/bench/bench_projection.py", "--repeats", "15"], rows_projection,
              env={"STRIDEWEAVE_PYTHONPATH": "{build}/bindings/python"}, needs="{build}/bindings/python/strideweave"),
    Benchmark("bench_await", "await round-trip latency vs the same thread hand-offs made bare",
              ["{build}/tools/bench/bench_await", "--iters", "10000", "--warmup", "500"], rows_await),
    Benchmark("bench_tiled", "projection vs memcpy; MoE step vs max(compute, transfer)",
              ["{build}/tools/bench/bench_tiled", "--reps", "15"], rows_tiled),
    Benchmark("bench_remote", "remote tier promote and dirty evict vs a bare hiredis client (redis-servers of its own, "
              "unix socket and loopback TCP)",
              ["{build}/tools/bench/bench_remote", "--runs", "11"], rows_remote),
    Benchmark("bench_vulkan", "Vulkan carrier vs CPU carrier: ops, matmul, backward, submit latency",
              ["{build}/tools/bench/bench_vulkan", "--reps", "9"], rows_vulkan),
    Benchmark("bench_moe_decode", "offloaded Mixtral-architecture decoding vs resident, naive, mmap and PyTorch at "
              "budgets 12.5/25/50 % and from zstd and remote servers, batches of 4 and 8 at 25 %, Q4_K experts at 25 %; the expert matmul vs plain GEMMs; the expert feed-forward vs "
              "the unfused layer and PyTorch's",
              [sys.executable, "tools/bench/bench_moe_decode.py", "--tokens", "32", "--quant", "q4_k"],
              rows_moe_decode,
              env={"STRIDEWEAVE_PYTHONPATH": "{build}/bindings/python"}, needs="{build}/bindings/python/strideweave"),
    Benchmark("bench_python_overhead", "Python op call overhead vs PyTorch and NumPy",
              [sys.executable, "tools/bench/bench_python_overhead.py", "--number", "20000", "--repeats", "7"],
              rows_python, env={"STRIDEWEAVE_PYTHONPATH": "{build}/bindings/python"},
              needs="{build}/bindings/python/strideweave"),
]


# ---- running ---------------------------------------------------------------------------------------------------

def parse_json_lines(text):
    """{"bench": [BENCH_JSON objects], "summary": the last SUMMARY_JSON object or None}"""
    parsed = {"bench": [], "summary": None}
    for line in text.splitlines():
        for key, tag in (("bench", "BENCH_JSON "), ("summary", "SUMMARY_JSON ")):
            if line.startswith(tag):
                value = json.loads(line[len(tag):])
                if key == "bench":
                    parsed["bench"].append(value)
                else:
                    parsed["summary"] = value
    return parsed


def last_lines(text, n=3):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def run_one(bench, build, logs, timeout):
    """Runs one benchmark; returns its record for the report."""
    fill = lambda s: s.replace("{build}", str(build))  # noqa: E731
    args = [fill(a) for a in bench.args]
    shown = ["python3" if a == sys.executable else os.path.relpath(a, ROOT) if a.startswith(str(ROOT)) else a
             for a in args]
    record = {"name": bench.name, "what": bench.what, "command": " ".join(shown),
              "status": "skipped", "reason": None, "seconds": 0.0, "bench_json": [], "summary_json": None,
              "rows": [], "notes": []}
    exe = args[0] if args[0] != sys.executable else None
    needed = fill(bench.needs) if bench.needs else exe
    if needed and not os.path.exists(needed):
        record["reason"] = f"not built: {os.path.relpath(needed, ROOT)} is missing"
        return record
    env = dict(os.environ)
    env.update({k: fill(v) for k, v in bench.env.items()})
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        code = None
    record["seconds"] = time.perf_counter() - t0
    (logs / f"{bench.name}.txt").write_text(f"$ {record['command']}\n{out}\n--- stderr ---\n{err}")
    if code is None:
        record["reason"] = f"timed out after {timeout} s"
        return record
    try:
        parsed = parse_json_lines(out)
    except ValueError as e:
        record["reason"] = f"unreadable JSON line: {e}"
        return record
    record["bench_json"], record["summary_json"] = parsed["bench"], parsed["summary"]
    if code != 0:
        record["reason"] = f"exit status {code}: {last_lines(err or out)}"
        return record
    if not parsed["bench"] and parsed["summary"] is None:
        record["reason"] = f"unavailable here: {last_lines(err or out) or 'no BENCH_JSON line'}"
        return record
    try:
        record["rows"] = bench.rows(parsed)
    except (KeyError, ValueError, IndexError, StopIteration, TypeError, ZeroDivisionError) as e:
        record["reason"] = f"unexpected JSON ({type(e).__name__}: {e})"
        return record
    record["status"] = "ok"
    return record


# ---- the machine -------------------------------------------------------------------------------------------------

def read_text(path):
    try:
        return pathlib.Path(path).read_text()
    except OSError:
        return ""


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def build_type(build):
    try:
        options = json.loads(read_text(build / "meson-info" / "intro-buildoptions.json"))
        return next(o["value"] for o in options if o["name"] == "buildtype")
    except (ValueError, StopIteration):
        return None


def machine(build):
    cpuinfo = read_text("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    mem = next((int(line.split()[1]) for line in read_text("/proc/meminfo").splitlines()
                if line.startswith("MemTotal:")), 0)
    status = git("status", "--porcelain", "--untracked-files=no")
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "avx512": "avx512f" in flags,
        "isa": isa_of(flags),
        "memory_gib": round(mem / (1 << 20), 1),
        "load_average_start": list(os.getloadavg()),
        "kernel": platform.release(),
        "git_commit": git("rev-parse", "HEAD"),
        "git_branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "build_dir": os.path.relpath(build, ROOT) if str(build).startswith(str(ROOT)) else str(build),
        "build_type": build_type(build),
        "python": platform.python_version(),
        "numpy": numpy_version,
        "torch": have_torch(),
    }


def isa_of(flags):
    """The instruction sets the CPU kernels dispatch on, as /proc/cpuinfo names them."""
    names = [("avx2", "AVX2"), ("fma", "FMA"), ("avx512f", "AVX-512F"), ("avx512bw", "AVX-512BW"),
             ("avx512_vnni", "AVX512_VNNI"), ("avx512_bf16", "AVX512_BF16"), ("avx512_fp16", "AVX512_FP16"),
             ("amx_tile", "AMX"), ("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8")]
    have = set(flags.split()) if isinstance(flags, str) else set(flags)
    return [label for flag, label in names if flag in have]


def isa_kernels(isa):
    """Which kernels the figures ran, from the ISA (runtime/carriers/cpu/gemm.cpp's dispatch)."""
    if "AMX-BF16" in isa:
        bf16 = "bf16 GEMM on oneDNN's AMX kernels"
    elif "AVX512_BF16" in isa:
        bf16 = "bf16 GEMM on oneDNN's AVX512_BF16 kernels"
    else:
        bf16 = "bf16 GEMM widened to f32 (no bf16 dot-product instructions)"
    vec = "x86-64-v4 (AVX-512)" if "AVX-512BW" in isa else "x86-64-v3 (AVX2)" if "AVX2" in isa else "baseline"
    return f"f32 GEMM on oneDNN; {bf16}; elementwise, reductions and decode GEMV in the {vec} variants"


# ---- the report ------------------------------------------------------------------------------------------------

def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def markdown(report):
    m = report["machine"]
    ok = [b for b in report["benchmarks"] if b["status"] == "ok"]
    skipped = [b for b in report["benchmarks"] if b["status"] != "ok"]
    rows = [r for b in ok for r in b["rows"]]
    misses = [r for r in rows if r["verdict"] == "MISS"]
    met = [r for r in rows if r["verdict"] == "ok"]
    load = m["load_average_start"]
    lines = [
        "# StrideWeave benchmark report",
        "",
        f"- date: {m['date']}",
        f"- commit: `{m['git_commit']}` ({m['git_branch']}{', with uncommitted changes' if m['git_dirty'] else ''})",
        f"- machine: {m['cpu_model']}, {m['logical_cpus']} logical CPUs{', AVX-512' if m['avx512'] else ''}, "
        f"{m['memory_gib']} GiB, Linux {m['kernel']}",
        f"- ISA: {', '.join(m.get('isa') or ['baseline x86-64'])}; CPU kernels by it: {isa_kernels(m.get('isa') or [])}",
        f"- load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; at end: "
        f"{' '.join(f'{x:.2f}' for x in report['load_average_end'])}"
        + (" (the machine was busy: medians are noisy, prefer the \"best\" ratios)" if load[0] > 1.0 else ""),
        f"- build: `{m['build_dir']}` ({m['build_type']}); Python {m['python']}, NumPy {m['numpy']}, "
        f"PyTorch {'installed' if m['torch'] else 'not installed'}"
        + (f"; bench_cpu's ggml peer: {report['ggml_build']}" if report.get("ggml_build") else ""),
        f"- suite time: {report['seconds']:.0f} s; {len(ok)} benchmark(s) ran, {len(skipped)} skipped; "
        f"targets: {len(met)} met, {len(misses)} missed",
        "",
        "Every ratio is StrideWeave's figure over its peer's, measured in the same run. \"best\" compares the "
        "fastest repetitions. Targets are the project's, as tools/bench/README.md gives them.",
        "",
        "## Summary",
        "",
        "| benchmark | what | status | time |",
        "| --- | --- | --- | --- |",
    ]
    for b in report["benchmarks"]:
        status = "ok" if b["status"] == "ok" else f"skipped: {b['reason']}"
        lines.append(f"| {b['name']} | {b['what']} | {status.replace('|', '/')} | {b['seconds']:.1f} s |")
    if misses:
        lines += ["", "Missed targets:", ""]
        lines += [f"- {r['figure']}: ratio {fmt(r['ratio'], 3)} vs target {r['target']} (peer: {r['peer_name']})"
                  for r in misses]
    for b in report["benchmarks"]:
        lines += ["", f"## {b['name']}", "", f"{b['what']}. `{b['command']}`", ""]
        if b["status"] != "ok":
            lines.append(f"Skipped: {b['reason']}")
            continue
        lines += ["| figure | StrideWeave | peer | unit | peer is | ratio | best | target | verdict | note |",
                  "| --- | ---: | ---: | --- | --- | ---: | ---: | --- | --- | --- |"]
        for r in b["rows"]:
            lines.append(f"| {r['figure']} | {fmt(r['ours'])} | {fmt(r['peer'])} | {r['unit']} | {r['peer_name']} | "
                         f"{fmt(r['ratio'], 3)} | {fmt(r['ratio_best'], 3)} | {r['target'] or '-'} | {r['verdict']} | "
                         f"{r['note']} |")
        for note in b["notes"]:
            lines += ["", note]
    lines.append("")
    return "\n".join(lines)


def ensure_ggml(logs, skip):
    """Builds ggml for bench_cpu's quantized peer when none is found (see
    bench_cpu.py's find_ggml), unless `skip`; returns what was done."""
    spec = importlib.util.spec_from_file_location("bench_cpu_driver", ROOT / "tools" / "bench" / "bench_cpu.py")
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    found, how = driver.find_ggml(str(ROOT))
    if found:
        return f"found: {found} ({how})"
    if skip:
        return f"not built (--no-ggml-build): {how}"
    print("bench_cpu's ggml peer: none found, building it (tools/bench/build_ggml.sh, a few minutes once) ...",
          end="", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", str(ROOT / "tools" / "bench" / "build_ggml.sh")], cwd=ROOT, capture_output=True,
                          text=True)
    (logs / "build_ggml.txt").write_text(f"{proc.stdout}\n--- stderr ---\n{proc.stderr}")
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f" failed, {took:.0f} s (logs/build_ggml.txt)", flush=True)
        return f"build failed: {last_lines(proc.stderr or proc.stdout)}"
    print(f" done, {took:.0f} s", flush=True)
    return "built by tools/bench/build_ggml.sh"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"), help="meson build directory (release)")
    parser.add_argument("--out", default=str(ROOT / "bench-report"), help="report directory")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a benchmark counts as skipped")
    parser.add_argument("--no-ggml-build", action="store_true",
                        help="do not build ggml (tools/bench/build_ggml.sh) for bench_cpu's peer when none is found")
    args = parser.parse_args(argv)
    build, out = pathlib.Path(args.build).resolve(), pathlib.Path(args.out).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    chosen = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    unknown = set(args.only or ()) - {b.name for b in BENCHMARKS}
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; known: "
                     f"{', '.join(b.name for b in BENCHMARKS)}")

    report = {"machine": machine(build), "benchmarks": []}
    if any(b.name == "bench_cpu" for b in chosen):
        report["ggml_build"] = ensure_ggml(logs, skip=args.no_ggml_build)
    load = report["machine"]["load_average_start"][0]
    print(f"benchmarks: {len(chosen)} to run, load average {load:.2f} on {os.cpu_count()} CPUs"
          + ("; the machine is busy, figures will be noisy" if load > 1.0 else ""), flush=True)
    t0 = time.perf_counter()
    for i, bench in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {bench.name}: {bench.what} ...", end="", flush=True)
        record = run_one(bench, build, logs, args.timeout)
        if record["status"] == "ok" and not report["machine"]["torch"]:
            if bench.name == "bench_projection":
                record["notes"].append("PyTorch is not installed: the comparison against torch.index_select(out=) "
                                       "(the target) is skipped.")
        if record["status"] == "ok" and bench.name == "bench_file_direct":
            fio = record["bench_json"][-1].get("fio") or {}
            if not fio.get("available"):
                record["notes"].append(f"The fio peer is omitted: {fio.get('reason') or 'not reported'}.")
        report["benchmarks"].append(record)
        done = "ok" if record["status"] == "ok" else f"skipped ({record['reason']})"
        print(f" {done}, {record['seconds']:.1f} s", flush=True)
    report["seconds"] = time.perf_counter() - t0
    report["load_average_end"] = list(os.getloadavg())
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    rows = [r for b in report["benchmarks"] for r in b["rows"]]
    print(f"benchmarks: {sum(b['status'] == 'ok' for b in report['benchmarks'])} ran, "
          f"{sum(b['status'] != 'ok' for b in report['benchmarks'])} skipped in {report['seconds']:.0f} s; "
          f"targets {sum(r['verdict'] == 'ok' for r in rows)} met, {sum(r['verdict'] == 'MISS' for r in rows)} "
          f"missed")
    print(f"report: {os.path.relpath(out / 'report.md', os.getcwd())} and "
          f"{os.path.relpath(out / 'report.json', os.getcwd())}")
    return 0 if any(b["status"] == "ok" for b in report["benchmarks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
