#!/usr/bin/env bash
# Cross-builds Kestrel for aarch64 with GCC (build-arm) and with clang (build-arm-clang: what
# Android's NDK compiles with), and runs each build's whole test suite under qemu-user twice: on a
# Cortex-A53 model (ARMv8.0, no dotprod: the "neon" backend must be picked) and on qemu's "max"
# model (dotprod and fp16: "neon_dotprod"). A green Cortex-A53 run also proves that no dotprod
# instruction ran, since qemu would stop it with SIGILL. See ../shared/docs/arm-cross.md.
# Usage: scripts/test-arm.sh   (from anywhere; installs the cross packages when missing)
# Environment: KESTREL_JOBS (default 2) build and ctest parallelism; KESTREL_ARM_TIMEOUT (default
# 300) seconds per test, so a hung qemu cannot block CI.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KESTREL_JOBS:-2}
timeout=${KESTREL_ARM_TIMEOUT:-300}

bash scripts/install-arm-deps.sh

# Every function that contains an SDOT/UDOT must belong to the dotprod backend. Exit status 2:
# no dotprod instruction at all.
check_dotprod() {
  local elf=$1
  aarch64-linux-gnu-objdump -d --demangle --no-show-raw-insn "$elf" | awk -v elf="$elf" '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
    $2 ~ /^(sdot|udot|usdot|sudot)$/ {
      if (fn !~ /neon_dotprod/) { printf "error: %s: %s in %s\n", elf, $2, fn; bad = 1 }
      else found = 1
    }
    END { exit bad ? 1 : (found ? 0 : 2) }'
}

# Every test runs under CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64), the example checks too (they
# put the emulator in front of the program); the host-only ones (the Python binding, the install +
# downstream build) are not registered in a cross build.
run_ctest() {
  local build=$1 cpu=$2 backend=$3
  echo "== $build: ctest under qemu -cpu $cpu (expects backend $backend)"
  QEMU_CPU=$cpu KESTREL_EXPECT_BACKEND=$backend \
    ctest --test-dir "$build" -j "$jobs" --timeout "$timeout" --output-on-failure
}

# One cross build (directory, toolchain file) with its checks and both CPU models' suites.
build_and_test() {
  local build=$1 toolchain=$2
  echo "== aarch64 cross build ($build, $toolchain)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DKESTREL_WERROR=ON \
    -DKESTREL_BUILD_TESTS=ON -DKESTREL_BUILD_BENCH=ON -DKESTREL_BUILD_EXAMPLES=ON
  cmake --build "$build" -j "$jobs"

  # The dependencies must be the arm64 ones (package version files check only pointer size).
  for dep in absl fmt benchmark; do
    dir=$(sed -n "s/^${dep}_DIR:PATH=//p" "$build/CMakeCache.txt")
    case "$dir" in
      */aarch64-linux-gnu/*) ;;
      *) echo "error: ${dep}_DIR is '$dir', not an aarch64-linux-gnu package" >&2; exit 1 ;;
    esac
  done

  echo "== $build: dotprod instructions only in neon_dotprod code"
  # And the dotprod unit must export no inline or template (weak) symbol that the linker could
  # pick for other code.
  local status=0
  check_dotprod "$build/capi/libkestrel.so" || status=$?
  if [ "$status" = 2 ]; then echo "error: no dotprod instruction found at all in libkestrel.so" >&2; exit 1; fi
  if [ "$status" != 0 ]; then exit 1; fi
  check_dotprod "$build/tests/kernels_test"
  local dotprod_object weak
  dotprod_object=$(find "$build" -name 'neon_dotprod_kernels.cc.o' | head -n 1)
  weak=$(aarch64-linux-gnu-nm -C "$dotprod_object" | awk '$1 ~ /^[WwVvu]$/ || $2 ~ /^[WwVvu]$/' || true)
  if [ -n "$weak" ]; then
    echo "error: the dotprod unit defines weak (shared inline/template) symbols:" >&2
    echo "$weak" >&2
    exit 1
  fi
  echo "ok: SDOT only in neon_dotprod functions; no weak symbols in $dotprod_object"

  run_ctest "$build" cortex-a53 neon
  run_ctest "$build" max neon_dotprod
}

build_and_test build-arm cmake/toolchains/aarch64-linux-gnu.cmake
build_and_test build-arm-clang cmake/toolchains/aarch64-linux-gnu-clang.cmake
echo "== ARM tests passed on cortex-a53 (neon) and max (neon_dotprod), GCC and clang builds"
