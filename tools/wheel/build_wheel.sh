#!/usr/bin/env bash
# Builds the Python package's release wheel and checks it as a user gets it:
#   1. `pip wheel .` through meson-python (pyproject.toml): the release build
#      type with the compiler options of the release tree `build/` (debug
#      info too, where `pip install .` has none; step 2 strips it), so that
#      with ccache on the PATH (the test command installs it) the compiles
#      hit the objects that tree's build left in the cache; meson-python's
#      build directory is build-wheel/ and is kept, so a second run only
#      rebuilds what changed (without ccache the first compiles the library
#      once more: minutes on 2 cores);
#   2. `auditwheel repair --strip`: copies the native libraries the wheel needs
#      from the system (libuv, libzstd, oneDNN's libdnnl, libgomp, ...) into
#      it, strips the symbols of every library in it (meson-python packs the
#      build's files as they are) and gives it its manylinux platform tag;
#   3. installs the repaired wheel into a fresh virtual environment and runs
#      tools/wheel/smoke.py there, from a directory outside the source tree.
# Needs what tools/install_deps.sh installs (auditwheel and patchelf are in its
# full set) and PyPI (meson-python, meson, swig and numpy are fetched by pip).
# Prints `wheel: ok (<file name>, <size> MiB)` last; exits non-zero when a step
# fails. Usage: tools/wheel/build_wheel.sh [OUTDIR]   (default build-wheel-dist/)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PY=${PYTHON:-python3}
out=$(mkdir -p "${1:-$root/build-wheel-dist}" && cd "${1:-$root/build-wheel-dist}" && pwd)
builddir=$root/build-wheel
start=$SECONDS
elapsed() { local s=$((SECONDS - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
fail() { echo "wheel: FAILED: $*" >&2; exit 1; }

# auditwheel runs the first patchelf on the PATH and needs 0.14.5 or later
# (Debian 12's is 0.14.3): PyPI's, in the python's scripts directory, first.
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
patchelf --version >/dev/null 2>&1 || fail "patchelf is missing (tools/install_deps.sh installs it from PyPI)"
"$PY" -m auditwheel --version >/dev/null 2>&1 || fail "auditwheel is missing (tools/install_deps.sh installs it)"

rm -rf "$out/raw" "$out"/strideweave-*.whl
mkdir -p "$out/raw"
log=$out/build.log
echo "wheel: building the release wheel (meson-python, build directory build-wheel/)"
# pip -v passes meson's and ninja's output through: keep it in the log and
# show a line about every 10 % of ninja's steps.
: >"$log"
last=-1
while IFS= read -r line; do
  printf '%s\n' "$line" >>"$log"
  # (not meson-python's "[n/N] /path" lines as it packs the wheel)
  if [[ $line =~ ^\ *\[([0-9]+)/([0-9]+)\]\ [^/] ]]; then
    n=${BASH_REMATCH[1]}
    # meson regenerating build.ninja restarts ninja with a new total.
    [ "${BASH_REMATCH[2]}" != "${total:-}" ] && [ -n "${total:-}" ] && last=$((n * 10 / BASH_REMATCH[2]))
    total=${BASH_REMATCH[2]}
    tenth=$((n * 10 / total))
    if [ "$tenth" -gt "$last" ]; then
      last=$tenth
      printf 'wheel: build %3d%% (%d/%d steps, %s)\n' $((n * 100 / total)) "$n" "$total" "$(elapsed)"
    fi
  fi
done < <("$PY" -m pip wheel . -v --no-deps -w "$out/raw" \
    -Cbuild-dir="$builddir" \
    -Csetup-args=-Dbuildtype=release -Csetup-args=-Ddebug=true \
    2>&1; echo "pip-exit-status $?")
status=$(sed -n 's/^pip-exit-status //p' "$log" | tail -1)
if [ "${status:-1}" -ne 0 ]; then
  grep -E -A40 '^(FAILED: |ERROR: |meson\.build:[0-9]+:[0-9]+: ERROR|.*meson.build:[0-9]+:[0-9]+: ERROR)' "$log" | head -80 >&2 || tail -60 "$log" >&2
  fail "pip wheel (full log: $log)"
fi
raw_wheel=$(ls "$out"/raw/strideweave-*.whl)
echo "wheel: built $(basename "$raw_wheel") in $(elapsed)"

"$PY" -m auditwheel repair --strip -w "$out" "$raw_wheel" >>"$log" 2>&1 || { tail -30 "$log" >&2; fail "auditwheel repair (full log: $log)"; }
wheel=$(ls "$out"/strideweave-*manylinux*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || fail "auditwheel wrote no manylinux wheel (full log: $log)"
# The libraries the repaired wheel carries.
"$PY" - "$wheel" <<'EOF'
import sys, zipfile
names = sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".so" in n.rsplit("/", 1)[-1])
print("wheel: repaired %s; native files:" % sys.argv[1].rsplit("/", 1)[-1])
for n in names:
    print("  " + n)
EOF

# A fresh virtual environment, run from outside the source tree, with no
# PYTHONPATH: the package can come from the wheel only.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv" || fail "python3 -m venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" >>"$log" 2>&1 \
  || { tail -30 "$log" >&2; fail "pip install of the wheel into a fresh venv (full log: $log)"; }
cp tools/wheel/smoke.py "$tmp/smoke.py"
(cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH "$tmp/venv/bin/python" smoke.py) || fail "tools/wheel/smoke.py in a fresh venv"

echo "wheel: built, repaired and checked in $(elapsed); $wheel"
size=$(stat -c %s "$wheel" | awk '{printf "%.1f", $1 / 1048576}')
echo "wheel: ok ($(basename "$wheel"), $size MiB)"
