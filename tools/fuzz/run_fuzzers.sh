#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer +
# UndefinedBehaviorSanitizer, the library instrumented for coverage) and runs
# each for a share of a time budget, starting from its checked-in corpus
# (tests/corpus/<target>/, read only: new inputs go to a scratch directory).
#
#   tools/fuzz/run_fuzzers.sh [--seconds TOTAL] [--build DIR] [--keep DIR] [TARGET...]
#
# --seconds  the whole budget, split evenly over the targets (default 90)
# --build    the build directory (default build-fuzz)
# --keep     copy the inputs each run added to DIR/<target>/ (to grow a corpus)
# Prints one line per target with its executions, and "fuzz: N targets,
# N executions, N crashes". A crash, leak or sanitizer report fails the
# script; its input is saved as fuzz-artifacts/<target>/crash-*: add it to
# tests/corpus/<target>/ as a regression input with the fix.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
total=90
build=build-fuzz
keep=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) total=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "run_fuzzers: clang is not installed (tools/install_deps.sh installs it)"
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Ddebug=true -Doptimization=1 -Dpython=disabled -Dvulkan=disabled -Dremote=disabled >/dev/null || exit 1
fi
ninja -C "$build" >/dev/null || { echo "run_fuzzers: the build failed"; ninja -C "$build" | tail -30; exit 1; }
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/tests/fuzz/fuzz_*; do
    # Executables only: meson keeps each target's objects in fuzz_<target>.p/.
    [ -f "$f" ] && [ -x "$f" ] && targets+=("$(basename "$f" | sed 's/^fuzz_//')")
  done
fi
per=$(( total / ${#targets[@]} ))
[ "$per" -lt 1 ] && per=1
artifacts="$root/fuzz-artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
all_execs=0
crashes=0
for t in "${targets[@]}"; do
  exe="$build/tests/fuzz/fuzz_$t"
  corpus="tests/corpus/$t"
  mkdir -p "$scratch/$t" "$artifacts/$t"
  log="$scratch/$t.log"
  "$exe" "$scratch/$t" "$corpus" -max_total_time="$per" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
    -max_len=4096 -artifact_prefix="$artifacts/$t/" >"$log" 2>&1
  status=$?
  execs=$(awk '/^stat::number_of_executed_units:/ {print $2}' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  added=$(find "$scratch/$t" -type f | wc -l)
  execs=${execs:-0}
  all_execs=$((all_execs + execs))
  if [ "$status" -ne 0 ]; then
    crashes=$((crashes + 1))
    echo "fuzz $t: FAILED after $execs executions (exit $status); input saved in $artifacts/$t/"
    grep -E "ERROR|expectation failed|runtime error|SUMMARY" "$log" | head -20
    tail -40 "$log"
  elif [ "$execs" -eq 0 ]; then
    # A target that ran nothing checked nothing.
    crashes=$((crashes + 1))
    echo "fuzz $t: FAILED: no executions reported"
    tail -20 "$log"
  else
    printf 'fuzz %-20s %10s executions in %ss, coverage %s, %s new inputs\n' "$t" "$execs" "$per" "${cov:-?}" "$added"
  fi
  if [ -n "$keep" ] && [ "$added" -gt 0 ]; then
    mkdir -p "$keep/$t"
    cp "$scratch/$t"/* "$keep/$t/"
  fi
done
echo "fuzz: ${#targets[@]} targets, $all_execs executions, $crashes crashes"
[ "$crashes" -eq 0 ]
