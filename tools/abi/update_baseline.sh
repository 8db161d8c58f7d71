#!/usr/bin/env bash
# Regenerates abi/libstrideweave.abi, the ABI baseline the test command
# compares the library with (tests/abi, tools/abi/check_abi.py), from the
# release build: run it when an ABI change is intended (a new struct field,
# a release), and commit the result with the change.
#   tools/abi/update_baseline.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build}
bash tools/build.sh "$build"
mkdir -p abi
python3 tools/abi/check_abi.py --write-baseline "$build/runtime/libstrideweave.so" abi/libstrideweave.abi include/strideweave
