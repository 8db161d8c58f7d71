"""The Python examples run as tests (small sizes)."""
import importlib.util
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MOE_SMALL = ["--experts", "8", "--dim", "16", "--tokens", "4", "--batches", "6", "--quiet"]


pytestmark = pytest.mark.e2e  # every example runs as a program

def test_moe_offload(capsys, tmp_path):
    csv = tmp_path / "moe.csv"
    assert load("moe_offload").main(MOE_SMALL + ["--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "outputs identical across runs" in out
    for run in ("offloaded", "resident", "naive"):
        assert f"\n{run} " in out
    rows = csv.read_text().splitlines()
    assert rows[0] == "run,batch,latency_ms,wait_ms,hit_rate"
    assert [r.split(",")[0] for r in rows[1:]] == ["offloaded"] * 6 + ["resident"] * 6 + ["naive"] * 6
    assert all(r.endswith(",1.0000") for r in rows[7:13]) and all(r.endswith(",0.0000") for r in rows[13:])


def test_moe_offload_matches_numpy():
    moe = load("moe_offload")
    o = moe.parse_args(MOE_SMALL + ["--tier", "host"])
    picks = moe.route_all(o)
    got = moe.run(o, picks, "offloaded")
    d = o.dim
    values = moe.expert_values(o)
    experts = [values[e * d * d:(e + 1) * d * d].reshape(d, d, order="F").astype(np.float64) for e in range(o.experts)]
    expected = 0.0
    for b, chosen in enumerate(picks):
        x = moe.make_tokens(o, b).numpy().reshape(d, o.tokens).astype(np.float64)
        expected += sum((experts[e] @ x).sum() for e in chosen)
    assert abs(got["checksum"] - expected) <= 1e-4 * max(1.0, abs(expected))
    assert got["hits"] + got["misses"] == o.batches * o.topk


def test_moe_offload_routes_like_the_c_demo(tmp_path):
    """Same router, same policy: the Python twin's hits per batch are the C demo's."""
    demo = ROOT / "build" / "examples" / "c" / "moe_offload"
    if not demo.exists():
        pytest.skip("the C demo is not built (build/examples/c/moe_offload)")
    args = ["--experts", "16", "--dim", "32", "--tokens", "4", "--batches", "12", "--quiet"]
    c_csv, py_csv = tmp_path / "c.csv", tmp_path / "py.csv"
    subprocess.run([str(demo), *args, "--csv", str(c_csv)], check=True, capture_output=True)
    assert load("moe_offload").main(args + ["--csv", str(py_csv)]) == 0

    def hits(path):
        return [(r.split(",")[0], r.split(",")[-1]) for r in path.read_text().splitlines()[1:]]

    assert hits(py_csv) == hits(c_csv)


@pytest.mark.parametrize("options", [["--tier", "zstd", "--dtype", "bf16"], ["--tier", "host", "--policy", "none"],
                                     ["--tier", "file", "--budget", "0.5", "--topk", "2"]])
def test_moe_offload_options(capsys, options):
    assert load("moe_offload").main(MOE_SMALL + options) == 0
    assert "outputs identical across runs" in capsys.readouterr().out


@pytest.mark.parametrize("options", [[], ["--dtype", "bf16", "--tier", "zstd"]])
def test_moe_offload_train(capsys, options):
    args = ["--experts", "12", "--dim", "32", "--tokens", "16", "--batches", "40", "--train", "--quiet"] + options
    assert load("moe_offload").main(args) == 0
    out = capsys.readouterr().out
    assert "training verified" in out and "every value identical" in out


@pytest.mark.parametrize("options", [["--quiet"], ["--train", "--dtype", "bf16", "--tier", "zstd", "--quiet"]])
def test_moe_offload_on_a_vulkan_primary(capsys, options):
    args = ["--experts", "12", "--dim", "32", "--tokens", "16", "--batches", "12", "--compute", "vulkan"] + options
    status = load("moe_offload").main(args)
    if status == 77:
        pytest.skip("no Vulkan device")
    assert status == 0
    out = capsys.readouterr().out
    assert "Vulkan device memory" in out
    assert ("training verified" if "--train" in options else "outputs identical across runs") in out


def test_plot_moe(tmp_path):
    pytest.importorskip("matplotlib")
    csv = tmp_path / "moe.csv"
    assert load("moe_offload").main(MOE_SMALL + ["--csv", str(csv)]) == 0
    spec = importlib.util.spec_from_file_location("plot_moe", ROOT / "tools" / "plot_moe.py")
    plot_moe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_moe)
    png = tmp_path / "moe.png"
    plot_moe.main([str(csv), "-o", str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_projection(capsys):
    losses = load("train_projection").main(["--rows", "8", "--width", "4", "--steps", "20"])
    assert losses[-1] < 0.5 * losses[0]
    assert "loss" in capsys.readouterr().out


def test_quickstart_python_snippet(capsys):
    """docs/quickstart-python.md's snippet runs and prints what the page says."""
    doc = (ROOT / "docs" / "quickstart-python.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "quickstart-python.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("115.0 [[10. 14. 18.]") and "(2, 64, 64) (2, 64, 4) 2 {'requests': 1" in out


@pytest.mark.parametrize("options", [[], ["--experts", "3", "--layer", "0", "--matrix", "w2"]])
def test_mixtral_experts(capsys, options):
    assert load("mixtral_experts").main(options) == 0
    out = capsys.readouterr().out
    assert ", 0 wrong" in out and "grid (1, 1, " in out


def test_mixtral_experts_c(tmp_path):
    demo = ROOT / "build" / "examples" / "c" / "mixtral_experts"
    if not demo.exists():
        pytest.skip("the C example is not built (build/examples/c/mixtral_experts)")
    # The C example reads a checkpoint the Python one wrote.
    path = tmp_path / "model.safetensors"
    load("mixtral_experts").write_checkpoint(str(path), 5)
    run = subprocess.run([str(demo), "--file", str(path), "--experts", "5", "--layer", "0", "--matrix", "w3"],
                         check=True, capture_output=True, text=True)
    assert "96 values checked, 0 wrong" in run.stdout


def test_moe_layer_trains():
    losses = load("moe_layer").main(["--steps", "12", "--quiet"])
    assert len(losses) == 12 and losses[-1] < 0.8 * losses[0]


MIXTRAL_SMALL = ["--layers", "2", "--experts", "4", "--hidden", "64", "--ffn", "96", "--topk", "2", "--tokens", "8",
                 "--quiet"]


def summary_of(out):
    import json

    lines = [line for line in out.splitlines() if line.startswith("SUMMARY_JSON ")]
    assert len(lines) == 1, out
    return json.loads(lines[0][len("SUMMARY_JSON "):])


@pytest.mark.parametrize("dtype,bound", [("f32", 1e-4), ("bf16", 2 * 2 * 2.0**-8)])
def test_mixtral_offload_equals_pytorch_and_reports(capsys, tmp_path, dtype, bound):
    demo = load("mixtral_offload")
    assert demo.main(MIXTRAL_SMALL + ["--dtype", dtype, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    assert set(s["runs"]) == {"pytorch", "resident", "offloaded", "naive", "mmap"}
    for name, run in s["runs"].items():
        assert run["tokens_per_s"] > 0 and run["max_error_vs_pytorch"] <= bound, (name, run)
        assert set(run) == {"tokens_per_s", "hit_rate", "bytes_read", "bytes_per_token", "max_error_vs_pytorch",
                            "rms_error_vs_pytorch", "peak_rss_bytes", "start_rss_bytes", "budget_bytes", "budgeted"}
        assert 0 <= run["rms_error_vs_pytorch"] <= bound, (name, run)
        assert run["bytes_per_token"] == (None if run["bytes_read"] is None else run["bytes_read"] / 8)
        # Each run's process: its peak at least what it held when the run
        # began, which is at least the interpreter with PyTorch (> 64 MiB).
        assert run["peak_rss_bytes"] >= run["start_rss_bytes"] > 64 << 20, (name, run)
    # The expert budgets: every expert for PyTorch and resident, 1 of 4 per
    # layer and matrix for offloaded (--budget 0.25), none kept for naive,
    # and mmap unbudgeted.
    per_matrix = 64 * 96 * (4 if dtype == "f32" else 2)
    assert s["expert_bytes"] == 2 * 4 * 3 * per_matrix
    budgets = {name: run["budget_bytes"] for name, run in s["runs"].items()}
    assert budgets == {"pytorch": s["expert_bytes"], "resident": s["expert_bytes"], "offloaded": 2 * 1 * 3 * per_matrix,
                       "naive": 0, "mmap": None}
    assert budgets["offloaded"] == s["expert_bytes"] * s["config"]["budget"]
    assert {name: run["budgeted"] for name, run in s["runs"].items()} == {
        "pytorch": True, "resident": True, "offloaded": True, "naive": True, "mmap": False}
    assert s["error_bound"] == bound and s["max_error_vs_pytorch"] <= bound
    for key in ("vs_naive", "vs_resident", "bound_ratio", "prediction_accuracy", "tier_bandwidth", "lru_hit_rate"):
        assert s[key] is not None and s[key] > 0, key
    # The naive run reads every chosen expert's three matrices once per use.
    assert s["runs"]["naive"]["bytes_read"] == 8 * 2 * 2 * 3 * per_matrix
    assert 0 < s["runs"]["offloaded"]["bytes_read"] < s["runs"]["naive"]["bytes_read"]
    assert s["config"]["tier"] == "direct" and s["config"]["budget"] == 0.25
    # One pause after the 8th token (--probe-every 8) reads the run's reads again.
    assert len(s["tier_bandwidths"]) == 1 and s["tier_bandwidth"] == pytest.approx(s["tier_bandwidths"][0])
    assert s["tier_probe_bytes"] == s["runs"]["offloaded"]["bytes_read"]
    # A budget of 1 of 4 experts per layer under top-2 routing: every layer
    # misses (its reads stream through its call), none computes with nothing to read.
    idle = s["offloaded_layers"]
    assert set(idle) == {"all_primary_layers_per_token", "all_primary_layer_ms", "layers_with_misses_per_token",
                         "miss_layer_ms", "ms_per_token", "miss_layers_ms_per_token", "outside_calls_ms_per_token"}
    assert idle["all_primary_layers_per_token"] == 0.0 and idle["all_primary_layer_ms"] is None
    assert idle["layers_with_misses_per_token"] == 2.0 and idle["ms_per_token"] == 0.0
    assert idle["miss_layer_ms"] > 0 and idle["miss_layers_ms_per_token"] > 0
    assert "whose chosen experts were all primary" not in out
    rows = (tmp_path / "mixtral_offload.csv").read_text().splitlines()
    assert rows[0] == "run,batch,latency_ms,wait_ms,hit_rate" and len(rows) == 1 + 5 * 8
    # The wait per token is the offloaded run's only, and its tokens wait (every layer misses).
    waits = {}
    for row in rows[1:]:
        run, _, _, wait, _ = row.split(",")
        waits.setdefault(run, []).append(wait)
    assert all(w == "" for run, ws in waits.items() if run != "offloaded" for w in ws)
    assert all(float(w) > 0 for w in waits["offloaded"])
    assert (tmp_path / "mixtral_offload.png").stat().st_size > 0
    assert "offloaded is " in out and " than naive on-demand loading" in out
    check_mixtral_table(out, s)


def table_of(out):
    """The demo's table: {column: {run: cell}} (the last column, the expert
    budget, is the rest of its line), and the legend's lines."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("run "))
    header = lines[head]
    columns = ["run", "tokens/s", "ms/token", "hit rate", "predicted", "MiB read", "wait ms", "peak RSS",
               "start RSS", "vs resident", "vs naive", "max err", "expert budget"]
    assert re.sub(r" +", " ", header) == "run " + " ".join(columns[1:])
    cells = {}
    i = head + 1
    while lines[i].strip():
        fields = lines[i].split(None, len(columns) - 1)
        cells[fields[0]] = dict(zip(columns, fields))
        i += 1
    legend = []
    i += 1
    while lines[i].startswith("  "):
        legend.append(lines[i].strip())
        i += 1
    return columns, cells, legend


def check_mixtral_table(out, s):
    columns, cells, legend = table_of(out)
    assert set(cells) == set(s["runs"])
    # One legend line per column, in the table's order, then the note on mmap.
    assert [line.split(":")[0] for line in legend[:len(columns)]] == columns
    assert legend[len(columns)].startswith("mmap is not a same-memory comparison")
    runs = s["runs"]
    for name, row in cells.items():
        run = runs[name]
        assert row["peak RSS"] == f"{run['peak_rss_bytes'] / 2**20:.0f}"
        assert row["start RSS"] == f"{run['start_rss_bytes'] / 2**20:.0f}"
        # The ratios are this run's tokens/s over resident's and naive's.
        assert row["vs resident"] == f"{run['tokens_per_s'] / runs['resident']['tokens_per_s']:.2f}x"
        assert row["vs naive"] == f"{run['tokens_per_s'] / runs['naive']['tokens_per_s']:.2f}x"
        assert row["wait ms"] == "-" or name == "offloaded"
    assert cells["resident"]["vs resident"] == "1.00x" and cells["naive"]["vs naive"] == "1.00x"
    assert cells["offloaded"]["vs resident"] == f"{s['vs_resident']:.2f}x"
    assert cells["mmap"]["expert budget"] == "page cache, unbudgeted"
    assert cells["offloaded"]["expert budget"].endswith("(25.0%)")
    assert cells["naive"]["expert budget"] == "0 (none kept)" and cells["pytorch"]["expert budget"].endswith("(all)")


def test_mixtral_offload_decodes_batches(capsys, tmp_path):
    """--batch 3: three sequences, one token of each per step; every layer
    reads the union of their experts once (naive: each chosen expert's
    three matrices once per layer and step, however many rows chose it),
    tokens/s and bytes per token count the tokens of all three, and every
    run equals PyTorch's grouped reference within the bound."""
    demo = load("mixtral_offload")
    assert demo.main(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--batch", "3",
                                      "--runs", "pytorch,resident,offloaded,naive"]) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    assert s["config"]["batch"] == 3 and "in each of 3 sequences decoded together" in out
    for name, run in s["runs"].items():
        assert run["max_error_vs_pytorch"] <= s["error_bound"], name
    per_matrix = 64 * 96 * 2
    naive = s["runs"]["naive"]
    # 8 steps of 2 layers: each step reads between 2 (all three rows chose
    # the same two) and 4 (the layer's every expert) distinct experts.
    assert naive["bytes_read"] % (3 * per_matrix) == 0
    assert 8 * 2 * 2 * 3 * per_matrix <= naive["bytes_read"] <= 8 * 2 * 4 * 3 * per_matrix
    assert naive["bytes_per_token"] == naive["bytes_read"] / 24
    off = s["runs"]["offloaded"]
    assert 0 < off["bytes_read"] <= naive["bytes_read"] and off["bytes_per_token"] == off["bytes_read"] / 24
    rows = (tmp_path / "mixtral_offload.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * 8  # one row per step


def test_mixtral_offload_refuses_batch_with_one_sequence_options(capsys):
    demo = load("mixtral_offload")
    for extra in (["--batch", "2", "--trace"], ["--batch", "2", "--train"], ["--batch", "2", "--save-stream", "x.npy"],
                  ["--batch", "0"]):
        with pytest.raises(SystemExit) as e:
            demo.parse(MIXTRAL_SMALL + extra)
        assert e.value.code == 2
        assert "--batch" in capsys.readouterr().err, extra


QUANT_SMALL = ["--layers", "2", "--experts", "4", "--hidden", "256", "--ffn", "256", "--topk", "2", "--tokens", "4",
               "--warmup", "1", "--quiet"]


@pytest.mark.parametrize("quant,bound", [("q8_0", 2 * 0.02), ("q4_k", 2 * 0.1)])
def test_mixtral_offload_quantized_experts(capsys, tmp_path, quant, bound):
    """--quant: the experts are written once as a GGUF file beside the model
    file (a second run reuses it), and the runs on it (offloaded at the
    same budget as the bf16 offloaded run, naive loading, resident) decode
    within the stated bound of the bf16 PyTorch reference (max |difference|
    / max |reference| of the final hidden states, per layer 0.02 for q8_0,
    0.1 for q4_k), reading fewer bytes per token than bf16."""
    demo = load("mixtral_offload")
    assert demo.main(QUANT_SMALL + ["--quant", quant, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    gguf = tmp_path / f"mixtral-2x4-256-256-bf16.{quant}.gguf"
    assert f"wrote {gguf}: the experts quantized to {quant} by StrideWeave's quantizer" in out
    s = summary_of(out)
    assert set(s["runs"]) == {"pytorch", "resident", "offloaded", "q-offloaded", "q-naive", "q-resident"}
    assert s["quant"]["type"] == quant and s["quant"]["written"] and s["quant_error_bound"] == pytest.approx(bound)
    ratio = {"q8_0": 34 / 64, "q4_k": 144 / 512}[quant]  # block bytes / the block's bf16 bytes
    assert s["quant"]["vs_bf16_bytes"] == pytest.approx(ratio)
    for name in ("q-offloaded", "q-naive", "q-resident"):
        run = s["runs"][name]
        assert run["tokens_per_s"] > 0 and 0 < run["max_error_vs_pytorch"] <= bound, (name, run)
    for name in ("resident", "offloaded"):
        assert s["runs"][name]["max_error_vs_pytorch"] <= 2 * 2 * 2.0**-8
    q, b = s["runs"]["q-offloaded"], s["runs"]["offloaded"]
    assert 0 < q["bytes_per_token"] < b["bytes_per_token"] and q["hit_rate"] is not None
    assert s["runs"]["q-naive"]["bytes_per_token"] > 0
    _, cells, _ = table_of(out)
    assert set(cells) == set(s["runs"])
    assert cells["q-offloaded"]["expert budget"].endswith("(25.0%)") and cells["q-resident"]["expert budget"].endswith(
        "(all)") and cells["q-naive"]["expert budget"] == "0 (none kept)"
    written = gguf.stat().st_mtime_ns
    assert demo.main(QUANT_SMALL + ["--quant", quant, "--dir", str(tmp_path), "--runs", "pytorch,q-resident"]) == 0
    out = capsys.readouterr().out
    assert f"reusing {gguf}" in out and not summary_of(out)["quant"]["written"]
    assert gguf.stat().st_mtime_ns == written


def test_mixtral_offload_refuses_quantized_runs_without_quant(capsys):
    demo = load("mixtral_offload")
    for extra in (["--runs", "pytorch,q-offloaded"], ["--quant", "q4_k"], ["--quant", "q8_0", "--tier", "zstd"],
                  ["--quant", "q8_0", "--train"]):
        with pytest.raises(SystemExit) as e:
            demo.parse(MIXTRAL_SMALL + extra)  # hidden 64 is no multiple of q4_k's 256
        assert e.value.code == 2, extra
        assert "quant" in capsys.readouterr().err, extra


def test_mixtral_offload_measures_each_runs_memory_apart(capsys, tmp_path):
    """Each run's peak resident set is its own process's: the offloaded run,
    after PyTorch's, peaks well below it (in one process it could not
    peak lower than the run before it), and PyTorch's holds every expert."""
    demo = load("mixtral_offload")
    assert demo.main(["--layers", "2", "--experts", "32", "--hidden", "512", "--ffn", "1024", "--tokens", "4",
                      "--budget", "0.125", "--runs", "pytorch,offloaded", "--quiet", "--dir", str(tmp_path)]) == 0
    s = summary_of(capsys.readouterr().out)
    runs, experts = s["runs"], s["expert_bytes"]
    assert experts == 2 * 32 * 3 * 512 * 1024 * 2
    assert runs["offloaded"]["budget_bytes"] == experts // 8  # 4 of 32 experts
    pytorch, offloaded = runs["pytorch"], runs["offloaded"]
    assert pytorch["peak_rss_bytes"] - pytorch["start_rss_bytes"] >= experts
    assert offloaded["peak_rss_bytes"] - offloaded["start_rss_bytes"] < experts // 2
    assert offloaded["peak_rss_bytes"] < pytorch["peak_rss_bytes"] - experts // 2


def test_mixtral_offload_tiers_and_prefetch(capsys, tmp_path):
    demo = load("mixtral_offload")
    for extra in (["--tier", "zstd"], ["--tier", "page-cache", "--prefetch"]):
        assert demo.main(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--runs", "pytorch,offloaded"] + extra) == 0
        s = summary_of(capsys.readouterr().out)
        assert s["runs"]["offloaded"]["max_error_vs_pytorch"] <= s["error_bound"]
        assert s["config"]["tier"] == extra[1]


def test_mixtral_offload_remote_tier(capsys, tmp_path, monkeypatch):
    """--tier remote without endpoints: the demo starts two redis-servers on
    unix sockets, seeds the experts, decodes from them and stops them (their
    directory is gone); the offloaded run equals PyTorch's within the bound
    and reads from the servers. --dir is relative, as the benchmark passes it
    (redis-server changes to its --dir, so the servers' paths must be
    absolute). A missing redis-server fails: the test command installs it."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not on the PATH; tools/install_deps.sh installs it")
    demo = load("mixtral_offload")
    monkeypatch.chdir(tmp_path.parent)
    assert demo.main(MIXTRAL_SMALL + ["--dir", tmp_path.name, "--runs", "pytorch,offloaded", "--tier", "remote",
                                      "--remote-endpoints", ""]) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    assert s["config"]["tier"] == "remote" and "started 2 redis-servers" in out and "seeded " in out
    off = s["runs"]["offloaded"]
    assert off["max_error_vs_pytorch"] <= s["error_bound"] and off["bytes_read"] > 0
    assert s["tier_bandwidth"] > 0 and s["bound_ratio"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sw-demo-redis-")]


def test_mixtral_offload_splits_the_time_of_its_layers(capsys, tmp_path):
    """With 2 of 4 experts primary per layer, some layers find both chosen
    experts primary (their call reads nothing) and the others read: each
    layer's call is counted once, and with the time outside the calls they
    make up the run's."""
    demo = load("mixtral_offload")
    assert demo.main(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--runs", "offloaded", "--budget", "0.5",
                                      "--tokens", "16"]) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    idle = s["offloaded_layers"]
    assert idle["all_primary_layers_per_token"] + idle["layers_with_misses_per_token"] == 2
    assert idle["all_primary_layers_per_token"] > 0 and idle["all_primary_layer_ms"] > 0
    assert idle["layers_with_misses_per_token"] > 0 and idle["miss_layer_ms"] > 0
    assert idle["outside_calls_ms_per_token"] > 0
    token_ms = 1000 / s["runs"]["offloaded"]["tokens_per_s"]
    assert idle["ms_per_token"] + idle["miss_layers_ms_per_token"] + idle["outside_calls_ms_per_token"] == \
        pytest.approx(token_ms)
    assert f"of the offloaded run's {token_ms:.2f} ms per token: {idle['ms_per_token']:.2f} ms in the" in out


def test_mixtral_offload_probes_the_tier_between_segments(capsys, tmp_path):
    demo = load("mixtral_offload")
    assert demo.main(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--runs", "resident,offloaded", "--probe-every", "3",
                                      "--prefetch"]) == 0  # its reads are logged for the probes too
    s = summary_of(capsys.readouterr().out)
    # Pauses before tokens 1, 4 and 7 and after the 8th: each segment's reads
    # are read again at its end, byte for byte what the run read.
    assert len(s["tier_bandwidths"]) == 3 and all(b > 0 for b in s["tier_bandwidths"])
    assert s["tier_probe_bytes"] == s["runs"]["offloaded"]["bytes_read"] > 0
    # Each pause replays the reads twice (preads, the file carrier) and the
    # bound takes the faster.
    assert len(s["tier_probe_replays"]) == 3
    for bandwidth, (preads, carrier) in zip(s["tier_bandwidths"], s["tier_probe_replays"]):
        assert preads > 0 and carrier > 0 and bandwidth == max(preads, carrier)
    assert "device_bound_ratio" in s and "device_read_bandwidth" in s


def test_mixtral_offload_bound_is_the_sum_over_segments():
    # Each segment between two pauses is bound by its own max(resident
    # compute, bytes / the bandwidth probed for it at its end).
    demo = load("mixtral_offload")
    o = demo.parse(["--tokens", "4", "--probe-every", "2"])
    res, off = demo.Stats("resident"), demo.Stats("offloaded")
    res.step_ms = [10.0, 10.0, 1.0, 1.0]  # compute 20 ms, then 2 ms
    off.probes = [(0, 0, None), (2, 1.0, 200.0), (4, 4.0, 200.0)]  # 1 byte at 200 B/s, then 3
    lower, compute, transfer = demo.lower_bound(o, off, res)
    assert (lower, compute, transfer) == pytest.approx((0.020 + 0.015, 0.022, 0.005 + 0.015))
    off.probes = [(0, 0, None), (2, 0, None), (4, 4.0, 100.0)]  # a segment that read nothing
    assert demo.lower_bound(o, off, res) == pytest.approx((0.020 + 0.040, 0.022, 0.040))
    off.probes = []  # not probed: the compute term alone
    assert demo.lower_bound(o, off, res) == pytest.approx((0.022, 0.022, 0.0))


def test_mixtral_offload_device_bound_is_the_sum_over_segments():
    # Per segment max(resident compute, the time the device was busy between
    # the end of one pause's probe and the start of the next one's); the
    # probes' own device time is counted apart.
    demo = load("mixtral_offload")
    o = demo.parse(["--tokens", "4", "--probe-every", "2"])
    res, off = demo.Stats("resident"), demo.Stats("offloaded")
    res.step_ms = [10.0, 10.0, 1.0, 1.0]
    # (tokens, (bytes, busy s) before the probe, after it)
    off.device = [(0, (0, 0.0), (0, 0.0)), (2, (100, 0.010), (300, 0.030)), (4, (700, 0.040), (900, 0.050))]
    lower, compute, busy, dev_bytes, probe_busy, probe_bytes = demo.device_bound(o, off, res)
    assert (lower, compute, busy) == pytest.approx((0.020 + 0.010, 0.022, 0.010 + 0.010))
    assert (dev_bytes, probe_bytes) == (100 + 400, 200 + 200) and probe_busy == pytest.approx(0.030)
    off.device = off.device[:1]  # one pause: no segment
    assert demo.device_bound(o, off, res) is None
    # A device the kernel does not count has no snapshot.
    assert demo.DiskActivity(4095, 1048575).snapshot() is None


@pytest.mark.parametrize("options,message", [(["--probe-every", "0"], "--probe-every"),
                                             (["--probe-mib", "0"], "--probe-mib")])
def test_mixtral_offload_probe_options_are_checked(capsys, options, message):
    demo = load("mixtral_offload")
    with pytest.raises(SystemExit):
        demo.parse(options)
    assert message in capsys.readouterr().err


def test_mixtral_offload_promotes_a_layers_predictions_together(tmp_path):
    # Predicted {2, 0} with 0 and 1 resident, 0 the least recently used:
    # promoted in one request the policy keeps 0 and evicts 1 for 2 (alone,
    # 2 would have evicted 0, the other prediction).
    demo = load("mixtral_offload")
    o = demo.parse(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--budget", "0.5"])
    path = tmp_path / "m.safetensors"
    demo.make_model(o, str(path))
    model = demo.StrideWeaveModel(o, str(path), policy_for=lambda: demo.sw.LRUPolicy(o.budget_tiles))
    try:
        te = model.layers[1]["w1"][0]
        for e in (0, 1):
            model.promote(1, "w1", [e]).wait()
        assert model.promote_ahead(1, "w1", [2, 0], demand=True)
        model.drain()
        assert [te.tile_state((0, 0, e)).location for e in range(4)] == ["primary", "secondary", "primary",
                                                                          "secondary"]
        assert model.explicit_bytes == 3 * 64 * 96 * 2  # 0, 1, then 2: the resident 0 is not read again
        assert model.promote_ahead(1, "w1", [0, 2], demand=False)  # both in place: nothing requested
        assert model.ahead == {(1, "w1"): {}} and model.explicit_bytes == 3 * 64 * 96 * 2
    finally:
        model.release()


def test_mixtral_offload_counts_every_byte_it_reads(capsys, tmp_path):
    # Without prefetch each miss reads the expert's three matrices once: w1
    # and w3 through the expert matmul's plan, w2 through the promotion the
    # layer starts beside them (counted by the demo, not by the LRU).
    demo = load("mixtral_offload")
    assert demo.main(MIXTRAL_SMALL + ["--dir", str(tmp_path), "--runs", "offloaded", "--no-prefetch",
                                      "--budget", "0.5"]) == 0  # 2 of 4 experts: w2 is promoted beside w1, w3
    s = summary_of(capsys.readouterr().out)
    off = s["runs"]["offloaded"]
    required = 8 * 2 * 2  # tokens x layers x top-k
    misses = round(required * (1 - off["hit_rate"]))
    assert 0 < misses < required
    assert off["bytes_read"] == 3 * misses * 64 * 96 * 2


def test_mixtral_offload_checkpoint_is_a_hugging_face_mixtral_layout(tmp_path):
    from safetensors import safe_open

    demo = load("mixtral_offload")
    o = demo.parse(MIXTRAL_SMALL + ["--dir", str(tmp_path)])
    path = str(tmp_path / "m.safetensors")
    assert demo.make_model(o, path) is True and demo.make_model(o, path) is False  # written once
    with safe_open(path, "pt") as f:
        keys = set(f.keys())
        assert f.get_slice("model.layers.1.block_sparse_moe.experts.3.w2.weight").get_shape() == [64, 96]
        assert f.get_slice("model.layers.0.block_sparse_moe.experts.0.w1.weight").get_shape() == [96, 64]
        assert f.get_slice("model.layers.0.block_sparse_moe.gate.weight").get_shape() == [4, 64]
    assert len(keys) == 2 * (4 * 3 + 2)


# The C twin (examples/c/mixtral_offload.c) against the Python demo's offloaded
# run. Seed 1's stream has, in bf16, two experts of exactly equal probability
# at the top-2 boundary (token 1, layer 0): both programs must break the tie
# alike (the lower index).
TWIN = ["--layers", "2", "--experts", "8", "--hidden", "128", "--ffn", "256", "--topk", "2", "--tokens", "8",
        "--seed", "1"]
# Bound on |difference| of a token's sum and of its absolute sum, relative to
# its absolute sum (docs/moe-offload.md, "The C twin"): f32 differs by a few
# ulps (silu's exp, the router's and softmax's accumulation order); bf16 is
# bit-identical but where an f32 intermediate lies within those ulps of a
# bf16 rounding boundary, an element then one bf16 ulp (up to 2^-7 of it)
# away: with hidden 128 one such element moves a token's sums by up to about
# 2^-12 of its absolute sum, and 2^-11 admits two.
TWIN_TOLERANCE = {"f32": 1e-6, "bf16": 2.0**-11}


def trace_of(out):
    routes, finals, other = [], {}, {}
    for line in out.splitlines():
        if not line.startswith("TRACE "):
            continue
        kind, fields = line.split()[1], dict(f.split("=", 1) for f in line.split()[2:])
        if kind == "route":
            routes.append(line)
        elif kind == "final":
            finals[int(fields["token"])] = fields
        else:
            assert kind not in other, line
            other[kind] = fields
    assert set(other) == {"checksum", "hit_rate"}, out
    return routes, finals, other


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_mixtral_offload_c_twin_agrees_with_python(capsys, tmp_path, dtype):
    twin = ROOT / "build" / "examples" / "c" / "mixtral_offload"
    if not twin.exists():
        pytest.skip("the C example is not built (build/examples/c/mixtral_offload)")
    demo = load("mixtral_offload")
    stream = tmp_path / "stream.npy"
    args = TWIN + ["--dtype", dtype, "--dir", str(tmp_path), "--runs", "offloaded", "--quiet", "--no-prefetch"]
    assert demo.main(args + ["--save-stream", str(stream), "--trace"]) == 0
    out = capsys.readouterr().out
    py_routes, py_finals, py = trace_of(out)
    py_read = summary_of(out)["runs"]["offloaded"]["bytes_read"]
    saved = np.load(stream)
    assert saved.dtype == np.float32 and np.array_equal(saved, demo.token_stream(demo.parse(args)).float().numpy())

    model = tmp_path / f"mixtral-2x8-128-256-{dtype}.safetensors"
    run = subprocess.run([str(twin), "--model", str(model), "--stream", str(stream), "--topk", "2"],
                         check=True, capture_output=True, text=True)
    c_routes, c_finals, c = trace_of(run.stdout)
    assert len(py_routes) == 8 * 2 and c_routes == py_routes
    assert c["hit_rate"] == py["hit_rate"] and 0 < int(c["hit_rate"]["hits"]) < int(c["hit_rate"]["required"]) == 32
    # Both count every tile they read: the LRU's plans and w2's promotions.
    assert f"{py_read / 2**20:.1f} MiB read from the model file" in run.stdout and py_read > 0
    # and times its decode: ms per token and tokens/s, one the other's inverse.
    timed = re.search(r"; ([0-9.]+) ms per token \(([0-9.]+) tokens/s\)$", run.stdout, re.M)
    assert timed, run.stdout
    ms, rate = float(timed.group(1)), float(timed.group(2))
    assert ms > 0 and abs(rate * ms / 1000 - 1) < 0.03, timed.group(0)
    assert set(c_finals) == set(py_finals) == set(range(8))
    tol = TWIN_TOLERANCE[dtype]
    for t, p in py_finals.items():
        scale = float(p["abs"])
        for key in ("sum", "abs"):
            assert abs(float(c_finals[t][key]) - float(p[key])) <= tol * scale, (t, key, c_finals[t], p)
    for key in ("sum", "abs"):
        assert abs(float(c["checksum"][key]) - float(py["checksum"][key])) <= tol * float(py["checksum"]["abs"])
    assert {k: c["checksum"][k] for k in ("tokens", "hidden", "dtype")} == {"tokens": "8", "hidden": "128",
                                                                            "dtype": dtype}
    if dtype == "bf16":
        # Rounding where PyTorch rounds makes most tokens bit-identical; a
        # rounding step missed or added would change nearly every token.
        same = [t for t in range(8) if c_finals[t] == py_finals[t]]
        assert len(same) >= 4, (same, c_finals, py_finals)


def test_mixtral_offload_c_twin_refuses_a_stream_of_another_width(tmp_path):
    twin = ROOT / "build" / "examples" / "c" / "mixtral_offload"
    if not twin.exists():
        pytest.skip("the C example is not built (build/examples/c/mixtral_offload)")
    demo = load("mixtral_offload")
    o = demo.parse(TWIN + ["--dir", str(tmp_path)])
    model = tmp_path / "m.safetensors"
    demo.make_model(o, str(model))
    stream = tmp_path / "wide.npy"
    np.save(stream, np.zeros((3, 129), np.float32))
    run = subprocess.run([str(twin), "--model", str(model), "--stream", str(stream)], capture_output=True, text=True)
    assert run.returncode == 2 and f"{stream} is not a C-order (tokens, 128) float32 array" in run.stderr


MIXTRAL_TRAIN = ["--layers", "2", "--experts", "8", "--hidden", "64", "--ffn", "128", "--topk", "2", "--tokens",
                 "16", "--budget", "0.25", "--steps", "3", "--train", "--quiet"]


def pytorch_training(demo, o):
    """The training in PyTorch alone, from the checkpoint the demo wrote: the
    trained experts, how many expert matrices each step's routing used (the
    experts its tile-sparse gradients hold) and how many were ever used."""
    import torch.nn.functional as F

    path = pathlib.Path(o.dir) / f"mixtral-{o.layers}x{o.experts}-{o.hidden}-{o.ffn}-{o.dtype}.safetensors"
    shared = demo.Shared(o, str(path))
    x, target = demo.token_stream(o).float(), demo.train_target(o)
    ref = demo.TorchTraining(o, shared)
    used, ever = [], set()
    for _ in range(o.steps):
        h, routes = ref.forward(x)
        used.append(3 * sum(len(np.unique(r)) for r in routes))
        ever |= {(layer, int(e)) for layer, r in enumerate(routes) for e in np.unique(r)}
        F.mse_loss(h, target).backward()
        ref.sgd(o.lr)
    return ref, used, 3 * len(ever)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_mixtral_offload_train_equals_pytorch(capsys, tmp_path, dtype):
    demo = load("mixtral_offload")
    args = MIXTRAL_TRAIN + ["--dtype", dtype, "--dir", str(tmp_path)]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    assert s["mode"] == "train" and s["ok"] is True and "training verified" in out
    assert s["config"]["dtype"] == dtype and s["config"]["train_dtype"] == "f32" and s["config"]["budget_tiles"] == 2
    # The loss falls at every step, on both sides alike.
    losses = s["losses"]
    assert len(losses) == 4 and all(b < a for a, b in zip(losses, losses[1:]))
    assert s["loss_first"] == losses[0] and s["loss_last"] == losses[-1]
    assert np.allclose(losses, s["pytorch_losses"], rtol=1e-5) and s["same_routing"] is True
    assert s["max_error_vs_pytorch"] <= 1e-4 and s["max_update_error_vs_pytorch"] <= 1e-3
    assert s["min_relative_change"] > 100 * 1e-4  # the bound cannot hide a step
    # One update per expert each step's routing used: the gradients held exactly those.
    _, used, _ = pytorch_training(demo, demo.parse(args))
    assert s["updates_per_step"] == used and s["updates"] == sum(used)
    # Each matrix cycles more experts per step than its budget of 2: every
    # update is evicted dirty (written to the scratch tier) before the next
    # one of the same expert, and read back for it.
    assert s["coalesced_updates"] == 0
    assert s["dirty_writes"] == s["updates"] == s["dirty_evictions"] + s["final_writes"]
    assert 0 < s["final_writes"] <= 6 * 2 and s["dirty_evictions"] > 0 and s["still_dirty"] == 0
    assert s["reloads"] > 0 and s["max_primary"] == 2
    assert s["bytes_written"] == s["dirty_writes"] * 64 * 128 * 4
    assert 0 < s["hit_rate"] < 1 and s["transient"] > 0
    # The table: one row per step, then the trained experts' loss.
    assert [line.split()[0] for line in out.splitlines() if line[:4].strip() in ("1", "2", "3", "end")] == [
        "1", "2", "3", "end"]


@pytest.mark.parametrize("tier", ["zstd", "page-cache"])
def test_mixtral_offload_train_with_every_expert_primary(capsys, tmp_path, tier):
    """Budget 1: nothing is evicted while training, each expert's updates
    pile up on its dirty tile and the final eviction writes each once."""
    demo = load("mixtral_offload")
    args = MIXTRAL_TRAIN + ["--budget", "1", "--tier", tier, "--dtype", "f32", "--dir", str(tmp_path)]
    assert demo.main(args) == 0
    s = summary_of(capsys.readouterr().out)
    assert s["config"]["tier"] == tier and s["config"]["budget_tiles"] == 8
    _, used, trained = pytorch_training(demo, demo.parse(args))
    assert s["updates"] == sum(used) and s["dirty_evictions"] == 0 and s["reloads"] == 0
    assert s["final_writes"] == s["dirty_writes"] == trained
    assert s["coalesced_updates"] == s["updates"] - trained
    assert s["max_error_vs_pytorch"] <= 1e-4 and s["loss_last"] < s["loss_first"]


@pytest.mark.parametrize("fault", ["a skipped update", "a learning rate 1% off"])
def test_mixtral_offload_train_catches_a_wrong_update(capsys, tmp_path, monkeypatch, fault):
    """The comparison with PyTorch fails the run when one matrix's last SGD
    step is skipped or applied with a slightly wrong learning rate."""
    demo = load("mixtral_offload")
    sgd, calls = demo.TrainingTier.sgd, []

    def faulty(self, lr):
        calls.append((self.layer, self.w))
        if len(calls) == 3 * 6:  # the last step's update of the last matrix
            if fault == "a skipped update":
                self.full.grad = None
                return 0
            lr *= 1.01
        return sgd(self, lr)

    monkeypatch.setattr(demo.TrainingTier, "sgd", faulty)
    assert demo.main(MIXTRAL_TRAIN + ["--dtype", "f32", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    s = summary_of(out)
    assert calls[-1] == (1, "w3") and s["ok"] is False and "TRAINING CHECK FAILED" in out
    assert "ERROR: the experts differ from PyTorch's" in out and s["max_update_error_vs_pytorch"] > 1e-3
    assert s["dirty_writes"] == s["updates"] - s["coalesced_updates"]  # what was applied still reached the tier


def test_mixtral_offload_train_saves_a_mixtral_checkpoint(capsys, tmp_path):
    from safetensors import safe_open

    demo = load("mixtral_offload")
    out_path = tmp_path / "trained.safetensors"
    args = MIXTRAL_TRAIN + ["--dtype", "bf16", "--dir", str(tmp_path), "--save", str(out_path)]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    s = summary_of(out)
    assert s["saved"] == {"path": str(out_path), "tensors": 2 * (8 * 3 + 2), "identical": True}
    assert "every expert identical to its tier" in out
    ref, _, _ = pytorch_training(demo, demo.parse(args))
    with safe_open(str(out_path), "pt") as f:
        assert f.get_slice("model.layers.1.block_sparse_moe.experts.7.w2.weight").get_shape() == [64, 128]
        assert f.get_slice("model.layers.0.block_sparse_moe.gate.weight").get_shape() == [8, 64]
        for (layer, m), experts in ref.w.items():
            for e, p in enumerate(experts):
                saved = f.get_tensor(demo.expert_name(layer, e, m))
                assert saved.dtype == p.dtype and saved.shape == p.shape
                scale = float(p.detach().abs().max())
                assert float((saved - p.detach()).abs().max()) <= 1e-4 * scale, (layer, m, e)
        assert set(f.keys()) == {demo.expert_name(layer, e, m) for layer in range(2) for e in range(8)
                                 for m in demo.MATRICES} | {demo.gate_name(i) for i in range(2)} | {
                                     demo.norm_name(i) for i in range(2)}


@pytest.mark.parametrize("options,message", [(["--save", "x.safetensors"], "--save writes the trained model"),
                                             (["--train", "--steps", "0"], "--steps must be at least 1"),
                                             (["--train", "--lr", "-1"], "--lr must be a positive finite number"),
                                             (["--train", "--lr", "nan"], "--lr must be a positive finite number")])
def test_mixtral_offload_train_options_are_checked(capsys, options, message):
    with pytest.raises(SystemExit) as e:
        load("mixtral_offload").parse(options)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_moe_floor_models_the_demos_own_cache(capsys, tmp_path):
    """tools/moe_floor.py replays the demo's routing through the demo's LRU
    cache: its plain-LRU policy hits and reads exactly what the offloaded
    run did, the oracle reads the same bytes earlier (never slower), and
    each ratio is its time over max(compute, transfer)."""
    demo = load("mixtral_offload")
    opts = ["--layers", "3", "--experts", "8", "--hidden", "64", "--ffn", "96", "--tokens", "16", "--quiet"]
    assert demo.main(opts + ["--dir", str(tmp_path), "--runs", "offloaded"]) == 0
    s = summary_of(capsys.readouterr().out)
    spec = importlib.util.spec_from_file_location("moe_floor", ROOT / "tools" / "moe_floor.py")
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    assert floor.main(opts + ["--dir", str(tmp_path), "--product-ms", "0.1", "--glue-ms", "0.2",
                              "--bandwidth-gbs", "1.0"]) == 0
    f = summary_of(capsys.readouterr().out)["policies"]
    run = s["runs"]["offloaded"]
    assert f["lru"]["hit_rate"] == run["hit_rate"]
    assert f["lru"]["mib_per_token"] * 2**20 * 16 == run["bytes_read"]
    assert f["oracle"]["mib_per_token"] == f["lru"]["mib_per_token"]
    assert f["oracle"]["hit_rate"] >= f["lru"]["hit_rate"] and f["oracle"]["ms_per_token"] <= f["lru"]["ms_per_token"]
    for p in f.values():
        compute = 3 * (0.2 + 2 * 3 * 0.1)
        transfer = p["mib_per_token"] * 2**20 / 1e6
        assert p["bound_ms"] == pytest.approx(max(compute, transfer))
        assert p["ratio"] == pytest.approx(p["ms_per_token"] / p["bound_ms"]) and p["ratio"] >= 1
