"""The Python examples run as tests (small sizes)."""
import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_moe_offload(capsys):
    error = load("moe_offload").main(["--experts", "8", "--d-model", "16", "--batches", "5", "--budget", "3"])
    out = capsys.readouterr().out
    assert error < 1e-3 and "batch 4:" in out and "lru:" in out


def test_train_projection(capsys):
    losses = load("train_projection").main(["--rows", "8", "--width", "4", "--steps", "20"])
    assert losses[-1] < 0.5 * losses[0]
    assert "loss" in capsys.readouterr().out
