#!/usr/bin/env bash
# Builds Kestrel and runs every test: the native build (warnings as errors) with the whole ctest
# suite; the format, conversion, decoder and C API tests again under AddressSanitizer + UBSan; then
# the aarch64 cross build with its whole suite under qemu on a CPU without dotprod (cortex-a53) and
# one with it (max).
# Usage: scripts/test.sh            (from the repository root; installs packages when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KESTREL_JOBS:-2}

bash scripts/install-deps.sh

echo "== native build (build-ci)"
cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DKESTREL_WERROR=ON
cmake --build build-ci -j "$jobs"
ctest --test-dir build-ci -j "$jobs" --output-on-failure

echo "== AddressSanitizer + UBSan build (build-asan): format, conversion and C API tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKESTREL_SANITIZE=ON -DKESTREL_WERROR=ON \
  -DKESTREL_BUILD_BENCH=OFF -DKESTREL_BUILD_EXAMPLES=ON
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure -R 'format|convert|vqf|capi|decoder|tokenizer'

echo "== aarch64 cross build, tests under qemu: cortex-a53 (neon) and max (neon_dotprod)"
bash scripts/test-arm.sh
