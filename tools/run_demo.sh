#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the
# offloaded MoE decoding demo (examples/python/mixtral_offload.py): a
# Mixtral-architecture stack whose checkpoint the demo writes once (about
# 550 MiB under results/), decoded with its experts read from that file with
# direct I/O under a 25 % primary budget, against all-resident, naive
# on-demand loading, mmap and the same model in PyTorch. Extra arguments go to
# the demo, e.g. tools/run_demo.sh --tier zstd --budget 0.125. The per-token
# figures go to results/mixtral_offload.csv and their plot to
# results/mixtral_offload.png (another directory with SW_RESULTS=DIR). The
# synthetic C demo of earlier releases is build/examples/c/moe_offload.
# It installs only what the demo needs (tools/install_deps.sh --main: no JDK,
# Maven, Rust, Vulkan tools, valgrind or clang); tools/run_tests.sh installs
# the rest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install_deps.sh --main
bash tools/build.sh build
results=${SW_RESULTS:-results}
mkdir -p "$results"
PYTHONPATH="$root/build/bindings/python${PYTHONPATH:+:$PYTHONPATH}" \
  exec python3 examples/python/mixtral_offload.py --dir "$results" "$@"
