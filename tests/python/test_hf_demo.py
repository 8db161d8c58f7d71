"""The README's main demo (tools/hf_demo.py) end to end on a small model:
every run, the table, the CSV and the SUMMARY_JSON line."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def test_demo_runs_every_peer_and_reports(tmp_path):
    env = dict(os.environ, SW_HF_DEMO_TINY="1", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "hf_demo.py"), "--dir", str(tmp_path), "--tokens", "6",
                        "--slow-tokens", "3", "--no-limit", "--batches", "1,3"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("SUMMARY_JSON ")
    summary = json.loads(last[len("SUMMARY_JSON "):])
    runs = summary["runs"]
    assert set(runs) == {"resident", "strideweave", "strideweave+prefetch", "naive", "mmap", "accelerate"}
    for name, run in runs.items():
        assert "failed" not in run, (name, run)
    assert runs["resident"]["n_tokens"] == 6 and runs["accelerate"]["n_tokens"] == 3
    assert runs["strideweave"]["forced_positions"] == 6
    assert summary["limit_enforced"] is False
    for key in ("vs_accelerate", "vs_naive", "vs_mmap_budget", "vs_resident"):
        assert summary[key] > 0, key
    assert isinstance(summary["tokens_equal"], bool)
    assert summary["targets"]["peak_rss_within_bound"] in (True, False)
    # accelerate really offloaded to disk.
    assert runs["accelerate"]["device_counts"].get("disk", 0) > 0
    assert set(summary["batches"]) == {"1", "3"}
    assert summary["batches"]["3"]["aggregate_tps"] > 0 and summary["batches"]["1"]["vs_b1"] == 1.0
    csv = (tmp_path / "hf_demo.csv").read_text().splitlines()
    assert csv[0].startswith("run,tokens,decode_tps") and len(csv) == 7
    assert "Legend:" in r.stdout
