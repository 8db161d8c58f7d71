#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the
# MoE expert-offload demo on the embedded default (CPU compute, file tier).
# Extra arguments go to the demo, e.g. tools/run_demo.sh --tier zstd --train.
# The per-batch figures go to results/moe_offload.csv and their plot to
# results/moe_offload.png (another directory with SW_RESULTS=DIR; a --csv FILE
# among the arguments wins, its plot is FILE with .png). --train writes no CSV.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install_deps.sh
bash tools/build.sh build

results=${SW_RESULTS:-results}
csv=$results/moe_offload.csv
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  if [ "${args[i]}" = "--csv" ] && [ $((i + 1)) -lt ${#args[@]} ]; then csv=${args[i + 1]}; fi
done
png=${csv%.csv}.png
mkdir -p "$(dirname "$csv")"
rm -f "$csv" "$png"
status=0
# The demo takes the last --csv it is given: ours first, so the caller's wins.
./build/examples/c/moe_offload --csv "$csv" "$@" || status=$?
if [ -s "$csv" ]; then
  title="moe_offload${*:+ $*}: per-batch latency and expert hit rate"
  python3 tools/plot_moe.py "$csv" -o "$png" --title "$title" >/dev/null
  echo
  echo "per-batch figures: $csv"
  echo "plot:              $png"
fi
exit "$status"
