#!/usr/bin/env bash
# Configures (once) and builds a build directory: tools/build.sh DIR [meson options...]
set -euo pipefail
dir=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
echo "build: $dir ready"
