#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the release, the
# AddressSanitizer+UndefinedBehaviorSanitizer and the ThreadSanitizer
# configurations, and runs every test suite (under TSan only the suites of the
# "async" label, with tests/tsan.supp for the uninstrumented oneDNN), the
# Python suite, the Java suite (Maven, against the release build's libraries),
# the Java example run from the jar, and the Rust binding's cargo suites
# against the release and the sanitizer libraries (counted as one suite each).
# The hardening checks run within it (docs/guarantees.md): the fuzz corpora
# replay as tests of every configuration, the fault sweep and the concurrency
# soak are tests too (the soak also under TSan), the fuzz targets run for a
# short time under libFuzzer (clang), and the Python examples run under
# valgrind.
# mypy type-checks the Python examples, the main demo and the docs' Python
# blocks against the package's stubs (tools/typecheck/check_types.py).
# Every code block of the README and docs/ is compiled and run
# (tools/docs/run_docs_check.sh).
# ggml's reference k-quant quantizers, which the Python suite compares
# StrideWeave's Q4_K and Q6_K bytes with, are built (libggml-base only,
# tools/bench/build_ggml.sh --base-only, cached in ~/.cache/strideweave) in
# the background while the C configurations build; without them (no network
# for the sources, say) that comparison reports SKIP with the reason.
#
# --quick: the quick tier of TESTING.md instead: the release build, its C
# suites and the Python suite without its end-to-end programs (the tests
# marked e2e: the examples, the main demo, the hf command line), a few
# minutes with the first build.
#
# Prints one closing line "tests: N passed, N failed, N skipped".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_tests.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
bash tools/install_deps.sh || exit 1
# Compiles go through ccache (meson finds it on the PATH): the wheel's build
# reuses the release tree's objects. The compile directory stays out of the
# hash (debug info names it; the wheel strips it) and paths are taken from
# the source root, so build/ and build-wheel/ share the objects.
export CCACHE_NOHASHDIR=1 CCACHE_BASEDIR=$root
# No suite measures the disk or reads the user's cache of device profiles
# (docs/model-files.md, "The device profile") but the tests of the profile
# itself (tests/c/test_device_profile.c), which set their own.
export STRIDEWEAVE_IO_PROBE=0

# Each stage's header says how long the command has run so far (SECONDS:
# since the script started, its installs included).
stage() { printf '== %s  [%dm%02ds]\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

passed=0
failed=0
skipped=0
failures=()
record() {  # record NAME STATUS
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$1"); fi
}

# Meson suites: count individual tests from meson's summary.
run_meson() {  # run_meson LABEL DIR [VAR=value...] [-- meson test arguments...]
  local label=$1 dir=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local log
  log=$(mktemp)
  env ${envs[@]+"${envs[@]}"} meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" >"$log" 2>&1
  local status=$?
  local ok fail skip
  ok=$(awk '/^Ok:/ {print $2}' "$log")
  fail=$(awk '/^Fail:/ {print $2}' "$log")
  skip=$(awk '/^Skipped:/ {print $2}' "$log")
  timeout_n=$(awk '/^Timeout:/ {print $2}' "$log")
  ok=${ok:-0}; fail=${fail:-0}; timeout_n=${timeout_n:-0}
  fail=$((fail + timeout_n))
  if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
  grep -E "^ *[0-9]+/[0-9]+ " "$log" | sed "s/^/[$label] /"
  if [ "$fail" -ne 0 ]; then
    cat "$log"
    failures+=("$label")
  fi
  passed=$((passed + ok))
  failed=$((failed + fail))
  skipped=$((skipped + ${skip:-0}))
  rm -f "$log"
}

stage "build: release"
bash tools/build.sh build || { echo "tests: 0 passed, 1 failed"; exit 1; }

if [ "$quick" -eq 1 ]; then
  stage "C suites (release)"
  run_meson c-release build
  stage "Python suites (without the end-to-end programs, marked e2e)"
  python3 -m pytest -q -m "not e2e" tests/python
  record python $?
  echo
  stage "end (quick tier)"
  if ((${#failures[@]})); then echo "failed: ${failures[*]}"; fi
  echo "tests: $passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit
fi

ggml_log=$(mktemp)
bash tools/bench/build_ggml.sh --base-only >"$ggml_log" 2>&1 &
ggml_pid=$!
# The sanitizer trees build at -O1 (as the sanitizers' own docs advise): at
# -O2 the CPU kernels' instantiations (runtime/carriers/cpu/cpu_elementwise.cpp
# and its neighbours) took twice as long to compile under ASan+UBSan, and their suites run in
# seconds either way.
stage "build: asan+ubsan"
bash tools/build.sh build-sanitize -Db_sanitize=address,undefined -Db_lundef=false -Ddebug=true -Doptimization=1 -Dpython=disabled -Djava=disabled \
  || { echo "tests: 0 passed, 1 failed"; exit 1; }
stage "build: tsan"
bash tools/build.sh build-tsan -Db_sanitize=thread -Db_lundef=false -Ddebug=true -Doptimization=1 -Dpython=disabled -Djava=disabled \
  || { echo "tests: 0 passed, 1 failed"; exit 1; }

stage "C suites (release)"
run_meson c-release build
stage "C suites (asan+ubsan)"
run_meson c-sanitize build-sanitize \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
stage "async suites (tsan)"
run_meson async-tsan build-tsan TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp \
  -- --suite async

stage "fuzzing (libFuzzer, clang, asan+ubsan; ${SW_FUZZ_SECONDS:-90} s over every target)"
fuzz_log=$(mktemp)
bash tools/fuzz/run_fuzzers.sh --seconds "${SW_FUZZ_SECONDS:-90}" 2>&1 | tee "$fuzz_log"
fuzz_status=${PIPESTATUS[0]}
fuzz_ok=$(grep -cE '^fuzz [a-z_]+ +[0-9]+ executions' "$fuzz_log")
fuzz_bad=$(grep -cE '^fuzz [a-z_]+: FAILED' "$fuzz_log")
passed=$((passed + fuzz_ok))
failed=$((failed + fuzz_bad))
if [ "$fuzz_status" -ne 0 ]; then
  [ "$fuzz_bad" -eq 0 ] && failed=$((failed + 1))
  failures+=("fuzzing")
fi
rm -f "$fuzz_log"

stage "hardening figures (from the asan+ubsan run)"
# What the fault sweep covered and what the soaks ran, from meson's log.
grep -hE '^(fault sweep: [0-9]+ \(kind, n\) points covered|soak: [0-9]+ threads)' \
  build-sanitize/meson-logs/testlog.txt 2>/dev/null | sed 's/^/  /'

if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  stage "Python suites"
  if wait "$ggml_pid" && ggml_lib=$(tail -n 1 "$ggml_log") && [ -e "$ggml_lib/libggml-base.so" ]; then
    export STRIDEWEAVE_TEST_LIBGGML=$ggml_lib/libggml-base.so
    echo "ggml's reference quantizers: $STRIDEWEAVE_TEST_LIBGGML"
  else
    echo "ggml's reference quantizers: not built, the k-quant byte comparison skips:"
    tail -n 5 "$ggml_log" | sed 's/^/  /'
  fi
  # conftest.py imports the package from the release build tree (build/bindings/python).
  python3 -m pytest -q tests/python
  record python $?
  rm -f "$ggml_log"
  stage "type check: the Python examples, the main demo and the docs' Python blocks against the stubs (mypy)"
  python3 tools/typecheck/check_types.py
  record typecheck $?
  stage "leaks: Python examples (valgrind memcheck)"
  python3 tools/leaks/check_python_examples.py
  record leaks-python-examples $?
  stage "Python wheel (release build, auditwheel repair, the quickstart in a fresh venv)"
  bash tools/wheel/build_wheel.sh
  record python-wheel $?
fi

# The Java binding: meson built its JNI layer into build/bindings/java when
# swig and a JDK were found; Maven compiles the classes, runs the JUnit suite
# against those libraries (-Dstrideweave.library.path, set by the pom) and
# packs the jar, from which the example then runs, extracting the libraries.
java_build=$root/build/bindings/java
if [ -f "$java_build/native/libstrideweave_jni.so" ] && command -v mvn >/dev/null && command -v java >/dev/null; then
  stage "Java suites"
  log=$(mktemp)
  mvn -B -ntp -f bindings/java/pom.xml -Dstrideweave.build="$java_build" \
    -Dstrideweave.c.demo="$root/build/examples/c/moe_offload" verify >"$log" 2>&1
  status=$?
  grep -E "Tests run:|BUILD" "$log" | sed "s/^/[java] /"
  [ "$status" -ne 0 ] && cat "$log"
  rm -f "$log"
  record java "$status"
  stage "Java example (from the jar)"
  java --enable-native-access=ALL-UNNAMED \
    -cp "bindings/java/target/strideweave-0.3.0.jar:bindings/java/target/test-classes" \
    org.strideweave.examples.MoeOffload --experts 16 --dim 128 --batches 12 --tokens 8 --quiet
  record java-example $?
else
  stage "Java suites: SKIP (no JNI layer in build/bindings/java, or no Maven or java)"
  skipped=$((skipped + 1))
fi

stage "Rust suites"
# bindings/rust against the release build tree's library: linked through its
# uninstalled pkg-config file, run through the rpath cargo gives the tests
# (and LD_LIBRARY_PATH for the doctests); the example's test compares the
# Rust MoE demo with the C demo built above.
export PATH="$HOME/.cargo/bin:$PATH"
if command -v cargo >/dev/null 2>&1; then
  (cd bindings/rust && \
    PKG_CONFIG_PATH="$root/build/meson-uninstalled" LD_LIBRARY_PATH="$root/build/runtime" \
    STRIDEWEAVE_C_DEMO="$root/build/examples/c/moe_offload" STRIDEWEAVE_REQUIRE_C_DEMO=1 \
    cargo test --locked --all-features -- --show-output 2>&1) | tee /tmp/strideweave-rust-tests.$$ | grep -vE '^\s+(Compiling|Downloaded|Downloading) '
  record rust "${PIPESTATUS[0]}"
  grep -h '^SKIP' /tmp/strideweave-rust-tests.$$ | sed 's/^/[rust] /'
  rm -f /tmp/strideweave-rust-tests.$$

  stage "Rust suites (asan+ubsan library)"
  # The same suites (doctests aside) against the sanitizer build's library,
  # leak checking included: a reference the binding forgets to release, or
  # a handle it uses after releasing it, fails here. The Rust code is not
  # instrumented, so the ASan runtime the library links is preloaded into the
  # test processes only (cargo's runner), never into cargo or rustc; its own
  # target directory keeps the release run's artefacts.
  asan_rt=$(ldd build-sanitize/runtime/libstrideweave.so | awk '/libasan/ {print $3}')
  # The C demo the example test runs on a Vulkan primary keeps the driver
  # mapped until LeakSanitizer has looked, as under meson (tests/lsan_keep_loaded.c).
  keep_loaded=$root/build-sanitize/examples/c/liblsan_keep_loaded.so
  if [ -n "$asan_rt" ]; then
    (cd bindings/rust && export STRIDEWEAVE_LIB_DIR="$root/build-sanitize/runtime" \
        CARGO_TARGET_DIR="$root/bindings/rust/target/sanitize" && \
      cargo build -q --locked --all-features --examples && \
      STRIDEWEAVE_C_DEMO="$root/build-sanitize/examples/c/moe_offload" STRIDEWEAVE_REQUIRE_C_DEMO=1 \
      cargo test --locked --all-features --tests \
        --config "target.'cfg(all())'.runner = ['env', 'LD_PRELOAD=$asan_rt $keep_loaded', 'LSAN_OPTIONS=suppressions=$root/tests/lsan.supp', 'ASAN_OPTIONS=detect_leaks=1:abort_on_error=1', 'UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1']" \
        2>&1) | grep -vE '^\s+(Compiling|Downloaded|Downloading) '
    record rust-sanitize "${PIPESTATUS[0]}"
  else
    echo "SKIP: rust-sanitize: build-sanitize's library links no ASan runtime"
    skipped=$((skipped + 1))
  fi
else
  echo "SKIP: rust: no cargo (tools/install_deps.sh could not install a toolchain)"
  echo "SKIP: rust-sanitize: no cargo"
  skipped=$((skipped + 2))
fi

stage "docs: the code blocks of README.md and docs/*.md"
bash tools/docs/run_docs_check.sh
record docs $?

echo
stage "end"
if ((${#failures[@]})); then echo "failed: ${failures[*]}"; fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
