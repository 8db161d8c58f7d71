#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the
# main demo (tools/hf_demo.py): a Hugging Face Mixtral-architecture checkpoint
# (8 layers, 8 experts of 1024 x 2816, 1056 MiB of bf16 experts in seven
# safetensors shards), written once with transformers under results/ and
# reused, is run inside transformers 5 by strideweave.hf with its routed
# experts read from the shards with direct I/O under a 25 % budget, and
# compared in fresh processes with transformers all-resident (the speed ceiling
# and the greedy-token reference), accelerate's disk offload, naive on-demand
# expert loading and mmap, every run but the resident one under the same
# memory-cgroup limit. Extra arguments go to the demo, e.g.
# tools/run_demo.sh --tokens 64 --runs strideweave,naive. The table's figures
# go to results/hf_demo.csv and their plot to results/hf_demo.png (another
# directory with SW_RESULTS=DIR). The previous main demo, the offloaded
# stack of Mixtral blocks, is examples/python/mixtral_offload.py (benchmarked by
# tools/bench/bench_moe_decode.py); the synthetic C demo of earlier releases is
# build/examples/c/moe_offload.
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
  exec python3 tools/hf_demo.py --dir "$results" "$@"
