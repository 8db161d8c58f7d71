#!/usr/bin/env bash
# Installs what StrideWeave needs, if it is missing:
#   tools/install_deps.sh --main   what the main job (tools/run_demo.sh) needs:
#                                  the build toolchain, libuv, zstd, oneDNN,
#                                  cmocka, swig and the Python headers, and the
#                                  demo's Python packages (numpy, torch,
#                                  safetensors, matplotlib, zstandard)
#   tools/install_deps.sh          everything tools/run_tests.sh needs: the above
#                                  and the Java binding's JDK and Maven, the
#                                  Vulkan tools, the Rust toolchain and bindgen,
#                                  valgrind, clang/libFuzzer, abigail-tools,
#                                  OpenBLAS, mypy, hiredis and redis-server
#                                  (the remote carrier and its suite), and the
#                                  wheel check's patchelf and auditwheel
# Supports Debian 12 (bookworm) on x86-64 with apt-get, run as root or by a
# user with sudo; the Python packages go to the python3 on the PATH (or
# $PYTHON) through its pip.
# Idempotent: a second run installs nothing. Debian packages via apt-get,
# Python packages via pip, the Java binding's Maven dependencies from Maven
# Central into ~/.m2 (after which `mvn -o` works), a Rust toolchain via rustup
# when cargo is missing, and the Rust binding's crates and pinned bindgen-cli
# via cargo (these three in the full set only).
set -euo pipefail

case "${1:-}" in
  --main) set_name=main ;;
  "") set_name=full ;;
  *) echo "usage: tools/install_deps.sh [--main]" >&2; exit 2 ;;
esac
# Anything but Debian 12 on x86-64 may work but is not what this script is
# written for: say so, and stop only when there is no apt-get at all.
if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  echo "install_deps: needs apt-get and dpkg (Debian 12); install the packages listed in $0 by hand" >&2
  exit 1
fi
if [ "$(uname -m)" != x86_64 ] || ! grep -qs '^VERSION_ID="12"' /etc/os-release || ! grep -qs '^ID=debian' /etc/os-release; then
  echo "install_deps: warning: written for Debian 12 on x86-64; this is $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-an unknown system}") on $(uname -m)" >&2
fi

# libdnnl-dev: oneDNN, the CPU carrier's GEMM (runtime/carriers/cpu/gemm.cpp).
# clang and libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes):
# the fuzz targets (tools/fuzz/run_fuzzers.sh). valgrind: the Python examples'
# leak check (tools/leaks/check_python_examples.py).
# OpenBLAS is only tools/bench/bench_cpu's informational cblas_sgemm row.
# libhiredis-dev: the remote carrier (runtime/carriers/remote), and
# redis-server the servers its suite starts and stops (tests/c/test_remote.c).
# liburing-dev: the file carriers' O_DIRECT transfers through io_uring
# (runtime/async/loop.cpp; without it they use libuv's thread pool). fio:
# the O_DIRECT peer of tools/bench/bench_file.c --direct.
# ccache: meson compiles through it when it is on the PATH; the test command's
# wheel build (tools/wheel/build_wheel.sh) then reuses the release build's
# objects instead of compiling the library a second time.
APT_PACKAGES=(
  meson ninja-build pkg-config g++
  libcmocka-dev libuv1-dev libzstd-dev
  libdnnl-dev
  libopenblas-dev libopenblas0-pthread
  swig
  glslc libvulkan-dev mesa-vulkan-drivers
  abigail-tools
  curl libclang-dev
  clang libclang-rt-14-dev
  valgrind
  libhiredis-dev redis-server
  liburing-dev fio
  ccache
)
# The main job's subset: the library, its C test suites' cmocka (the build
# directory it configures is the one the tests use) and the Python binding.
# Without a JDK or the Vulkan tools meson leaves the Java binding and the
# Vulkan backend out (both `auto`); tools/build.sh reconfigures when they
# appear later.
APT_MAIN=(
  meson ninja-build pkg-config g++
  libcmocka-dev libuv1-dev libzstd-dev
  libdnnl-dev liburing-dev
  swig
)
# The Python bindings compile against the headers of the python3 that runs the
# tests; Debian's python3 needs python3-dev for them (pyenv builds ship them).
if ! "${PYTHON:-python3}" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  APT_PACKAGES+=(python3-dev)
  APT_MAIN+=(python3-dev)
fi
# The Java binding (bindings/java): a JDK 17 or later (javac and the JNI
# headers SWIG's wrapper compiles against) and Maven. Any JDK >= 17 already on
# the PATH will do; otherwise Debian's default JDK.
java_major=$(javac -version 2>&1 | sed -nE 's/^javac ([0-9]+).*/\1/p')
if [ -z "$java_major" ] || [ "$java_major" -lt 17 ]; then
  APT_PACKAGES+=(default-jdk-headless)
fi
APT_PACKAGES+=(maven)
# torch: the PyTorch interop tests (tests/python/test_torch.py) and the peer of
# tools/bench/bench_cpu.py and bench_python_overhead.py; threadpoolctl holds
# NumPy's BLAS to the benchmark's thread count. matplotlib draws the demo's
# plot (tools/plot_moe.py); safetensors writes the Mixtral demo's checkpoint and
# zstandard is the raw-zstd peer of its zstd tier.
PIP_PACKAGES=(numpy pytest torch threadpoolctl matplotlib safetensors zstandard)

# auditwheel: repairs the wheel tools/wheel/build_wheel.sh builds (bundles its
# native libraries), with PyPI's patchelf (below).
PIP_PACKAGES+=(auditwheel)
# mypy: the type check of the Python examples, the demo and the docs' Python
# against the package's stubs (tools/typecheck/check_types.py).
PIP_PACKAGES+=(mypy)
# tinygrad: tests/python/test_tinygrad.py checks strideweave.interop.to_tinygrad on its CPU device.
PIP_PACKAGES+=(tinygrad)
# gguf: llama.cpp's own Python package (gguf-py), the reference that
# tests/python/test_quant.py checks the quantized dtypes against.
PIP_PACKAGES+=(gguf)
# transformers 5 (its experts interface) builds the Hugging Face models of
# strideweave.hf, its tests and the main demo; accelerate is the demo's
# disk-offload peer.
PIP_PACKAGES+=(transformers accelerate)
# gguf (llama.cpp's gguf-py) writes and reads the GGUF files of
# tests/python/test_gguf_files.py and the GGUF seed corpus.
PIP_PACKAGES+=(gguf)
# The main demo's imports (tools/hf_demo.py; examples/python/mixtral_offload.py).
PIP_MAIN=(numpy torch safetensors matplotlib zstandard transformers accelerate)
if [ "$set_name" = main ]; then
  APT_PACKAGES=("${APT_MAIN[@]}")
  PIP_PACKAGES=("${PIP_MAIN[@]}")
fi

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
  if [ "$p" = transformers ]; then
    # strideweave.hf needs transformers 5 (transformers.integrations.moe).
    "$PY" -c "import sys, transformers; sys.exit(int(transformers.__version__.split('.')[0]) < 5)" 2>/dev/null \
      || pip_missing+=("transformers>=5,<6")
    continue
  fi
  "$PY" -c "import $p" 2>/dev/null || pip_missing+=("$p")
done
if ((${#pip_missing[@]})); then
  # Debian's own python3 refuses pip installs (PEP 668, "externally managed"):
  # the Python packages go into a virtual environment instead.
  if "$PY" -c 'import os, sys, sysconfig; sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")) else 1)' 2>/dev/null \
      || ! "$PY" -m pip --version >/dev/null 2>&1; then
    echo "install_deps: $(command -v "$PY") is the system's Python, which pip does not install into (or it has no pip)." >&2
    echo "install_deps: make a virtual environment, activate it and run again:" >&2
    echo "  sudo apt-get install python3-venv && python3 -m venv ~/strideweave-venv && . ~/strideweave-venv/bin/activate" >&2
    exit 1
  fi
  echo "install_deps: installing Python packages: ${pip_missing[*]}"
  "$PY" -m pip install -q "${pip_missing[@]}"
fi
if [ "$set_name" = main ]; then
  echo "install_deps: the main job's dependencies present (tools/install_deps.sh without --main adds the test tools)"
  exit 0
fi
# auditwheel needs patchelf 0.14.5 or later and Debian 12's is 0.14.3: PyPI's
# patchelf, a program in the python's scripts directory (no module to import).
py_scripts=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if ! "$py_scripts/patchelf" --version >/dev/null 2>&1; then
  echo "install_deps: installing Python packages: patchelf"
  "$PY" -m pip install -q patchelf
fi
# The Java binding's plugins and test dependencies. go-offline misses what
# surefire resolves only when it runs, its JUnit Platform provider (and an old
# plexus-utils it asks for): fetched by name, in step with pom.xml's
# surefire.version.
JAVA_POM=$(cd "$(dirname "$0")/.." && pwd)/bindings/java/pom.xml
MAVEN_EXTRA=(org.apache.maven.surefire:surefire-junit-platform:3.5.4 org.codehaus.plexus:plexus-utils:1.1)
maven_cached() {
  mvn -B -q -o -f "$JAVA_POM" dependency:go-offline >/dev/null 2>&1 || return 1
  for a in "${MAVEN_EXTRA[@]}"; do
    mvn -B -q -o -f "$JAVA_POM" dependency:get -Dartifact="$a" >/dev/null 2>&1 || return 1
  done
}
if command -v mvn >/dev/null && ! maven_cached; then
  echo "install_deps: caching the Java binding's Maven dependencies"
  mvn -B -q -ntp -f "$JAVA_POM" dependency:go-offline
  for a in "${MAVEN_EXTRA[@]}"; do
    mvn -B -q -ntp -f "$JAVA_POM" dependency:get -Dartifact="$a"
  done
fi
# The Rust binding (bindings/rust): a toolchain (rustup's stable when cargo is
# missing; the crates need Rust 1.82 or later), its crates from crates.io
# (pinned by Cargo.lock), and bindgen-cli at the version
# bindings/rust/strideweave-sys/regenerate.sh pins (libclang-dev above), for
# the test that the checked-in bindings are current. A failure here leaves
# the Rust suite to report SKIP; it does not stop the other suites.
export PATH="$HOME/.cargo/bin:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v cargo >/dev/null 2>&1; then
  echo "install_deps: installing a Rust toolchain (rustup, stable)"
  # rustup-init reads its role from its file name: keep the name.
  rustup_dir=$(mktemp -d)
  rustup_init=$rustup_dir/rustup-init
  if curl -sSf --proto '=https' --tlsv1.2 -o "$rustup_init" \
      https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init; then
    chmod +x "$rustup_init"
    "$rustup_init" -y -q --profile minimal --default-toolchain stable --no-modify-path >/dev/null \
      || echo "install_deps: rustup-init failed; the Rust suite will be skipped" >&2
  else
    echo "install_deps: could not download rustup-init; the Rust suite will be skipped" >&2
  fi
  rm -rf "$rustup_dir"
fi
if command -v cargo >/dev/null 2>&1; then
  bindgen_version=$(sed -n 's/^BINDGEN_VERSION=//p' "$root/bindings/rust/strideweave-sys/regenerate.sh")
  if [ "$(bindgen --version 2>/dev/null | awk '{print $2}')" != "$bindgen_version" ]; then
    echo "install_deps: installing bindgen-cli $bindgen_version (cargo install, a few minutes once)"
    cargo install -q bindgen-cli --version "$bindgen_version" --locked \
      || echo "install_deps: bindgen-cli failed to install; the bindings check will SKIP" >&2
  fi
  (cd "$root/bindings/rust" && cargo fetch -q --locked) \
    || echo "install_deps: cargo fetch failed; the Rust suite may fail to build" >&2
fi
echo "install_deps: all dependencies present"
