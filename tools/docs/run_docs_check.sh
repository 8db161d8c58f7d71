#!/usr/bin/env bash
# Compiles and runs the documentation's code blocks (tools/docs/check_docs.py)
# against the release build tree: the C library and its uninstalled pkg-config
# file (build/), the Python package (build/bindings/python), the Java jar
# (bindings/java/target, from the Maven build) and the Rust crate
# (bindings/rust, built by cargo into CARGO_TARGET_DIR, default
# bindings/rust/target, so nothing is compiled again). Run it after those
# builds; arguments go to check_docs.py (--lang, --file). Prints one line per
# block and "docs: N passed, N failed, N skipped"; exits non-zero on a failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
export PKG_CONFIG_PATH="$root/build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$root/build/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/bindings/rust/target}"
exec python3 tools/docs/check_docs.py "$@"
