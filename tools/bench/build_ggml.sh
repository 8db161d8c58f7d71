#!/usr/bin/env bash
# Builds ggml's CPU backend (libggml-base.so, libggml-cpu.so) for the
# quantized-decode peer of tools/bench/bench_cpu.py, once, into
#   ~/.cache/strideweave/ggml-VERSION/lib
# from the sources vendored in the llama-cpp-python sdist of a pinned version,
# taken from PyPI with pip. Only ggml is configured and built (not llama.cpp,
# not the Python extension): cmake with shared libraries and -march=native,
# two jobs, under nice. With --base-only, only libggml-base.so (about 20 s):
# ggml_quantize_chunk and its reference quantizers, which the test command
# builds for tests/python/test_quant.py's byte-for-byte k-quant comparison.
#
#   bash tools/bench/build_ggml.sh [--base-only]   # prints the lib directory last
#   STRIDEWEAVE_GGML_VERSION=0.3.36 bash tools/bench/build_ggml.sh
#
# Idempotent: a finished build (its lib directory with the libraries and a
# stamp) is reused at once. Exits non-zero with the reason when pip, cmake or
# the compiler fails; the build's output is kept in ggml-VERSION/build.log.
set -euo pipefail
base_only=false
case "${1:-}" in
  "") ;;
  --base-only) base_only=true ;;
  *) echo "usage: build_ggml.sh [--base-only]" >&2; exit 2 ;;
esac
version=${STRIDEWEAVE_GGML_VERSION:-0.3.36}
cache=${HOME}/.cache/strideweave/ggml-${version}
lib=$cache/lib
stamp=$lib/.complete
base_stamp=$lib/.base-complete

fail() {
  echo "build_ggml: $*" >&2
  exit 1
}

if [ -f "$stamp" ] && [ -e "$lib/libggml-base.so" ] && [ -e "$lib/libggml-cpu.so" ]; then
  echo "build_ggml: ggml from llama-cpp-python $version already built"
  echo "$lib"
  exit 0
fi
if $base_only && [ -f "$base_stamp" ] && [ -e "$lib/libggml-base.so" ]; then
  echo "build_ggml: ggml-base from llama-cpp-python $version already built"
  echo "$lib"
  exit 0
fi
command -v cmake >/dev/null || fail "cmake not found (apt-get install cmake)"
command -v c++ >/dev/null || fail "no C++ compiler (c++) found"
python=${PYTHON:-python3}
"$python" -m pip --version >/dev/null 2>&1 || fail "$python -m pip does not run: pip is needed to fetch the sources"

start=$SECONDS
mkdir -p "$cache"
log=$cache/build.log
: >"$log"

sdist=$(ls "$cache"/download/llama_cpp_python-"$version".tar.gz 2>/dev/null || true)
if [ -z "$sdist" ]; then
  echo "build_ggml: [1/4] downloading the llama-cpp-python $version sdist (about 75 MB)"
  if ! nice -n 19 "$python" -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$version" -d "$cache/download" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "pip download of llama-cpp-python==$version failed (log: $log)"
  fi
  sdist=$(ls "$cache"/download/llama_cpp_python-"$version".tar.gz 2>/dev/null || true)
  [ -n "$sdist" ] || fail "pip saved no llama_cpp_python-$version.tar.gz in $cache/download"
else
  echo "build_ggml: [1/4] sdist already downloaded: $sdist"
fi

src=$cache/src
ggml=$src/llama_cpp_python-$version/vendor/llama.cpp/ggml
if [ ! -f "$ggml/CMakeLists.txt" ]; then
  echo "build_ggml: [2/4] extracting vendor/llama.cpp/ggml"
  rm -rf "$src"
  mkdir -p "$src"
  tar -xzf "$sdist" -C "$src" --wildcards "llama_cpp_python-$version/vendor/llama.cpp/ggml/*" >>"$log" 2>&1 ||
    fail "cannot extract ggml from $sdist (log: $log)"
  [ -f "$ggml/CMakeLists.txt" ] || fail "$sdist holds no vendor/llama.cpp/ggml/CMakeLists.txt"
else
  echo "build_ggml: [2/4] sources already extracted"
fi
# The sdist leaves out ggml's pkg-config template, which a standalone
# configuration fills in (and nothing here uses): an empty one will do.
[ -f "$ggml/ggml.pc.in" ] || : >"$ggml/ggml.pc.in"

build=$cache/build
echo "build_ggml: [3/4] configuring ggml (cmake, shared libraries, GGML_NATIVE)"
if ! nice -n 19 cmake -S "$ggml" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_NATIVE=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  fail "cmake configuration failed (log: $log)"
fi

targets=(ggml-base ggml-cpu)
$base_only && targets=(ggml-base)
echo "build_ggml: [4/4] building ${targets[*]} (-j2, nice; $($base_only && echo 'about 20 s' || echo 'a few minutes') on two cores)"
# cmake's own [ n%] lines are the progress; the compiler's output goes to the log.
if ! nice -n 19 cmake --build "$build" --target "${targets[@]}" -j2 2>&1 | tee -a "$log" |
  grep --line-buffered -E '^\[ *[0-9]+%\]' | sed -u 's/^/build_ggml:   /'; then
  :
fi
base=$(find "$build" -name 'libggml-base.so' | head -n 1)
cpu=$(find "$build" -name 'libggml-cpu.so' | head -n 1)
if [ -z "$base" ] || { ! $base_only && [ -z "$cpu" ]; }; then
  grep -E 'error|Error' "$log" | tail -n 20 >&2 || true
  fail "the build produced no $($base_only && echo libggml-base.so || echo 'libggml-base.so / libggml-cpu.so') (log: $log)"
fi
rm -rf "$lib"
mkdir -p "$lib"
# The libraries and their versioned names (symlinks kept as they are).
if $base_only; then
  cp -P "$(dirname "$base")"/libggml-base.so* "$lib"/
  echo "llama-cpp-python $version" >"$base_stamp"
else
  cp -P "$(dirname "$base")"/libggml-base.so* "$(dirname "$cpu")"/libggml-cpu.so* "$lib"/
  echo "llama-cpp-python $version" >"$stamp"
  echo "llama-cpp-python $version" >"$base_stamp"
fi
echo "build_ggml: done in $((SECONDS - start)) s"
echo "$lib"
