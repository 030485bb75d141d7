#!/usr/bin/env bash
# Runs the native build's backend tests again under qemu-x86_64 on older x86 CPU models, so the
# fallbacks are exercised on every CI machine and not only on CPUs that lack the features (the CI
# machine itself has AVX-512 VNNI, so natively the registry always picks avx512_vnni):
#   Haswell      AVX2+FMA+F16C, no AVX-VNNI, no AVX-512  -> "avx2" must be picked
#   SandyBridge  AVX but no AVX2, FMA or F16C             -> "generic"
#   Nehalem      no AVX, no XSAVE (the YMM-state check must not run XGETBV)  -> "generic"
# Each model runs x86_backend_test (automatic selection against KESTREL_EXPECT_BACKEND, refusal of
# every backend the model lacks) and backend_model_test (the stories260K / aidreams260K greedy
# oracles on every backend the model allows); Haswell also runs kernels_test (every kernel of avx2
# and of the SIMDe-emulated AVX-512 build against the reference) and capi_test (the C API on the
# backend it picks by itself). A green run also shows that no
# instruction beyond each model's set ran, since qemu stops one with SIGILL. qemu 7.2's TCG has no
# AVX-512 or AVX-VNNI, so those two backends are tested natively only.
# Usage: scripts/test-x86-cpus.sh [BUILD_DIR (default build-ci)]   (an x86-64 build with tests)
# Environment: KESTREL_X86_QEMU_TIMEOUT (default 900) seconds per test program; KESTREL_JOBS (default
# 2): 1 runs the programs one after another instead of in two lanes.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-ci}
timeout_s=${KESTREL_X86_QEMU_TIMEOUT:-900}

if [ "$(uname -m)" != x86_64 ]; then
  echo "test-x86-cpus.sh: SKIPPED: not an x86-64 machine"
  exit 0
fi
if ! command -v qemu-x86_64 >/dev/null; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends qemu-user
fi
for program in x86_backend_test backend_model_test kernels_test capi_test; do
  [ -x "$build/tests/$program" ] || { echo "error: $build/tests/$program not built" >&2; exit 1; }
done

logs="$build/x86-cpu-logs"  # each run's whole output, kept for a look after a failure
mkdir -p "$logs"

run() {
  local cpu=$1 backend=$2 program=$3
  echo "-- qemu-x86_64 -cpu $cpu (expects $backend): $program"
  local log="$logs/$cpu-$program.log"
  # TCG warns once per CPUID feature of the model it cannot emulate (TSX, PCID, ...); those lines
  # are dropped, everything else is shown when the program fails.
  if ! KESTREL_EXPECT_BACKEND=$backend timeout "$timeout_s" \
      qemu-x86_64 -cpu "$cpu" "$build/tests/$program" --reporter compact > "$log" 2>&1; then
    grep -v "TCG doesn't support requested feature" "$log" >&2 || true
    echo "error: $program failed under qemu-x86_64 -cpu $cpu" >&2
    exit 1
  fi
  grep -E "^Passed" "$log" || { echo "error: no Catch2 summary from $program" >&2; exit 1; }
}

# Two lanes side by side, one a core: the Haswell runs of the model, kernel and C API suites take
# 3-6 minutes each under TCG (one after another they were over half of CI's time). Each lane's
# output is kept apart and shown when both are done.
lane_a() {
  run Haswell avx2 backend_model_test
  run Haswell avx2 capi_test
}
lane_b() {
  run Haswell avx2 kernels_test
  run Haswell avx2 x86_backend_test
  run SandyBridge generic x86_backend_test
  run SandyBridge generic backend_model_test
  run Nehalem generic x86_backend_test
  run Nehalem generic backend_model_test
}
if [ "${KESTREL_JOBS:-2}" -ge 2 ]; then
  (lane_a) > "$logs/lane-a.out" 2>&1 &
  pid_a=$!
  (lane_b) > "$logs/lane-b.out" 2>&1 &
  pid_b=$!
  status=0
  wait "$pid_a" || status=1
  wait "$pid_b" || status=1
  cat "$logs/lane-a.out" "$logs/lane-b.out"
  [ "$status" = 0 ] || exit 1
else
  lane_a
  lane_b
fi
echo "== x86 CPU models passed: Haswell (avx2), SandyBridge and Nehalem (generic)"
