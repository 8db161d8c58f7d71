#!/usr/bin/env bash
# Configures (once) and builds a build directory: tools/build.sh DIR [meson options...]
#
# Shows progress: on a terminal ninja's own [n/N] status line; otherwise
# (CI logs, pipes) one line about every 10 % of the build steps, with the
# compiler's output kept in DIR/build-output.log and printed only when the
# build fails. Ends with how long the build took.
#
# The Java binding and the Vulkan backend are `auto` features: meson enables
# them when it finds a JDK (and swig), or the Vulkan loader and glslc. A
# directory configured before those were installed (after the demo's minimal
# install, say) is reconfigured once they appear, so that the full install
# that follows builds them too.
set -euo pipefail
dir=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# What the auto features depend on, as found on this machine now.
toolchain_probe() {
  printf 'javac=%s\n' "$(command -v javac || true)"
  printf 'swig=%s\n' "$(command -v swig || true)"
  printf 'glslc=%s\n' "$(command -v glslc || true)"
  printf 'vulkan=%s\n' "$(pkg-config --modversion vulkan 2>/dev/null || true)"
  printf 'liburing=%s\n' "$(pkg-config --modversion liburing 2>/dev/null || true)"
}
probe_file=$dir/meson-private/strideweave-toolchain-probe
write_probe() { if [ -d "$dir/meson-private" ]; then toolchain_probe >"$probe_file"; fi; }

start=$SECONDS
if [ ! -f "$dir/build.ninja" ]; then
  echo "build: configuring $dir"
  log=$(mktemp)
  if ! meson setup "$dir" "$@" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    echo "build: meson setup failed (tools/install_deps.sh installs what it needs)" >&2
    exit 1
  fi
  rm -f "$log"
  write_probe
elif [ ! -f "$probe_file" ]; then
  write_probe
elif [ "$(toolchain_probe)" != "$(cat "$probe_file")" ]; then
  echo "build: the JDK, swig or Vulkan tools changed since $dir was configured; reconfiguring"
  meson setup --reconfigure "$dir" "$@" >/dev/null
  write_probe
fi

elapsed() { local s=$((SECONDS - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if [ -t 1 ]; then
  # ninja's status line ([finished/total] step), rewritten in place.
  ninja -C "$dir"
else
  out=$dir/build-output.log
  : >"$out"
  last=-1
  status=0
  # One line per step from ninja ("[n/N] ..."); print one every 10 %.
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$out"
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\  ]]; then
      n=${BASH_REMATCH[1]}
      # meson regenerating build.ninja restarts ninja with a new total.
      [ "${BASH_REMATCH[2]}" != "${total:-}" ] && [ -n "${total:-}" ] && last=$((n * 10 / BASH_REMATCH[2]))
      total=${BASH_REMATCH[2]}
      tenth=$((n * 10 / total))
      if [ "$tenth" -gt "$last" ] && [ "$n" -gt 0 ]; then
        last=$tenth
        printf 'build: %s %3d%% (%d/%d steps, %s)\n' "$dir" $((n * 100 / total)) "$n" "$total" "$(elapsed)"
      fi
    fi
  done < <(NINJA_STATUS='[%f/%t] ' ninja -C "$dir" 2>&1; echo "ninja-exit-status $?")
  status=$(sed -n 's/^ninja-exit-status //p' "$out" | tail -1)
  if [ "${status:-1}" -ne 0 ]; then
    # The failing steps and their compiler output.
    sed -n '/^FAILED: /,$p' "$out" | grep -vE '^(\[[0-9]+/[0-9]+\] |ninja-exit-status )' >&2 || cat "$out" >&2
    echo "build: $dir FAILED after $(elapsed) (full output: $out)" >&2
    exit 1
  fi
fi
echo "build: $dir ready ($(elapsed))"
