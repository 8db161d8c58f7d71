#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the
# MoE expert-offload demo on the embedded default (CPU compute, file tier).
# Extra arguments go to the demo, e.g. tools/run_demo.sh --tier zstd --train.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install_deps.sh
bash tools/build.sh build
exec ./build/examples/c/moe_offload "$@"
