#!/usr/bin/env bash
# The one-command benchmark suite: installs what is missing, builds the
# release, and runs every benchmark in tools/bench/ with its same-run peers
# (tools/bench/report.py), one progress line per benchmark. Writes
# bench-report/report.md and bench-report/report.json (another directory with
# SW_BENCH_REPORT=DIR); each tool's full output goes to bench-report/logs/.
# Extra arguments go to report.py, e.g. --only bench_zstd bench_file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install_deps.sh
bash tools/build.sh build
exec python3 tools/bench/report.py --build build --out "${SW_BENCH_REPORT:-bench-report}" "$@"
