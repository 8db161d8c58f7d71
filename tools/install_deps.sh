#!/usr/bin/env bash
# Installs what StrideWeave needs to build and test, if it is missing.
# Idempotent: a second run installs nothing. Debian packages via apt-get,
# Python packages via pip.
set -euo pipefail

# libdnnl-dev: oneDNN, the CPU carrier's GEMM (runtime/carriers/cpu/gemm.cpp).
# clang and libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes):
# the fuzz targets (tools/fuzz/run_fuzzers.sh). valgrind: the Python examples'
# leak check (tools/leaks/check_python_examples.py).
# OpenBLAS is only tools/bench/bench_cpu's informational cblas_sgemm row.
APT_PACKAGES=(
  meson ninja-build pkg-config g++
  libcmocka-dev libuv1-dev libzstd-dev
  libdnnl-dev
  libopenblas-dev libopenblas0-pthread
  swig
  glslc libvulkan-dev mesa-vulkan-drivers
  abigail-tools
  clang libclang-rt-14-dev
  valgrind
)
# The Python bindings compile against the headers of the python3 that runs the
# tests; Debian's python3 needs python3-dev for them (pyenv builds ship them).
if ! "${PYTHON:-python3}" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  APT_PACKAGES+=(python3-dev)
fi
# torch: the PyTorch interop tests (tests/python/test_torch.py) and the peer of
# tools/bench/bench_cpu.py and bench_python_overhead.py; threadpoolctl holds
# NumPy's BLAS to the benchmark's thread count. matplotlib draws the demo's
# plot (tools/plot_moe.py).
PIP_PACKAGES=(numpy pytest torch threadpoolctl matplotlib)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
pip_missing=()
for p in "${PIP_PACKAGES[@]}"; do
  "$PY" -c "import $p" 2>/dev/null || pip_missing+=("$p")
done
if ((${#pip_missing[@]})); then
  echo "install_deps: installing Python packages: ${pip_missing[*]}"
  "$PY" -m pip install -q "${pip_missing[@]}"
fi
echo "install_deps: all dependencies present"
