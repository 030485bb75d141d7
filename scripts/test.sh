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

echo "== AddressSanitizer + UBSan build (build-asan): the format, conversion, tokenizer, decoder and C API tests"
# Only the test programs that read untrusted input or manage memory are built here (a whole
# sanitized build doubles the time); each ctest carries its program's name as a label.
sanitized=(format_dtype_test format_layout_test format_vqf_test convert_gguf_test convert_hf_test
           tokenizer_bpe_test chat_template_test decoder_test capi_test kernels_test)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DKESTREL_SANITIZE=ON -DKESTREL_WERROR=ON \
  -DKESTREL_BUILD_BENCH=OFF -DKESTREL_BUILD_EXAMPLES=ON
cmake --build build-asan -j "$jobs" --target "${sanitized[@]}"
label=$(IFS='|'; echo "^(${sanitized[*]})$")
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure --no-tests=error -L "$label"

echo "== aarch64 cross build, tests under qemu: cortex-a53 (neon) and max (neon_dotprod)"
bash scripts/test-arm.sh
