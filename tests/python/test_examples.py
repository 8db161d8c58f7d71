"""The Python examples run as tests (small sizes)."""
import importlib.util
import pathlib
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
