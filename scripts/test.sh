#!/usr/bin/env bash
# Builds Kestrel and runs every test: the native build (warnings as errors, with the SIMDe-emulated
# AVX-512 backend) with the whole ctest suite, and the same built with clang; the backend tests
# again under qemu-x86_64 on CPU models without AVX-512 (Haswell) and without AVX2 (SandyBridge,
# Nehalem); the format, conversion, decoder and C API tests under AddressSanitizer + UBSan; then the
# aarch64 cross builds (GCC and clang), each with its whole suite under qemu on a CPU without
# dotprod (cortex-a53) and one with it (max).
# Usage: scripts/test.sh            (from the repository root; installs packages when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KESTREL_JOBS:-2}
# Each phase's header carries the seconds since the start, so a log shows where CI's time goes
# (the brief keeps the whole run well under 30 minutes).
phase() { echo "== [${SECONDS} s] $*"; }

bash scripts/install-deps.sh

phase "native build (build-ci)"
# KESTREL_SIMDE_BACKENDS adds the AVX-512 VNNI kernels emulated on AVX2 (backend avx512_vnni_simde),
# so the conformance tests check the AVX-512 algorithms on any x86 CI machine.
cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DKESTREL_WERROR=ON -DKESTREL_SIMDE_BACKENDS=ON
cmake --build build-ci -j "$jobs"
ctest --test-dir build-ci -j "$jobs" --output-on-failure

phase "AVX-512 instructions only in avx512_vnni and amx_* code, AVX-VNNI only in avx_vnni code, AMX only in amx_int8 and amx_bf16 code"
# Every function that touches a zmm, opmask or upper-16 vector register, or runs VPDPBUSD, must
# belong to the avx512_vnni backend or to amx_int8 or amx_bf16 (which need everything avx512_vnni does), whose
# code runs only after their CPUID checks (anything else is a SIGILL on AVX2-only CPUs); the SIMDe
# build (avx512_vnni_simde) must have none. The one exception: the VEX form of VPDPBUSD (AVX-VNNI),
# in avx_vnni functions only, and nothing else of AVX-512's there. Tile instructions (AMX) belong
# to amx_int8 and amx_bf16 alone. The units compiled with AVX-512, AVX-VNNI or AMX flags must define no weak
# (shared inline or template) symbol that the linker could pick for other code, and no static
# initializer.
objdump -d --no-show-raw-insn --demangle build-ci/capi/libkestrel.so | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  /%tmm[0-7]|ldtilecfg|tilerelease/ {
    if (fn ~ /kestrel::amx_(int8|bf16)::/) { amx = 1; next }
    if (!(fn in seen)) printf "error: AMX instruction in %s\n", fn
    seen[fn] = bad = 1
  }
  /\{vex\} vpdpbusd/ && fn ~ /kestrel::avx_vnni::/ { vex_vnni = 1; next }
  /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])|vpdpbusd/ {
    if (fn ~ /kestrel::(avx512_vnni|amx_int8|amx_bf16)::/) { found = 1; next }
    if (!(fn in seen)) printf "error: AVX-512 instruction in %s\n", fn
    seen[fn] = bad = 1
  }
  END {
    if (!found) print "error: no AVX-512 instruction at all in libkestrel.so"
    if (!vex_vnni) print "error: no AVX-VNNI instruction at all in libkestrel.so"
    if (!amx) print "error: no AMX instruction at all in libkestrel.so"
    exit (bad || !found || !vex_vnni || !amx) ? 1 : 0
  }'
# The units compiled with the AVX-512 or AVX-VNNI flags (the SIMDe twins are named avx512_simde_*).
isa_objects=()
for unit in avx512_kernels avx512_attention avx512_activations avx_vnni_kernels amx_kernels amx_bf16_kernels; do
  object=$(find build-ci -name "$unit.cc.o" | head -n 1)
  [ -n "$object" ] || { echo "error: no object for $unit.cc in build-ci" >&2; exit 1; }
  isa_objects+=("$object")
done
for isa_object in "${isa_objects[@]}"; do
  weak=$(nm -C "$isa_object" | awk '$1 ~ /^[WwVvu]$/ || $2 ~ /^[WwVvu]$/' || true)
  if [ -n "$weak" ]; then
    echo "error: the AVX-512 / AVX-VNNI / AMX unit $isa_object defines weak (shared inline/template) symbols:" >&2
    echo "$weak" >&2
    exit 1
  fi
  # Nor any static initializer: it would run when the library loads, on every CPU.
  if nm "$isa_object" | grep -q '_GLOBAL__sub_I'; then
    echo "error: the AVX-512 / AVX-VNNI / AMX unit $isa_object has a static initializer (runs at load on every CPU):" >&2
    nm -C "$isa_object" | grep '_GLOBAL__sub_I' >&2
    exit 1
  fi
done
echo "ok: AVX-512 instructions only in avx512_vnni and amx_* functions, AVX-VNNI only in avx_vnni ones, AMX only in amx_int8 and amx_bf16 ones; no weak symbols or static initializers in ${isa_objects[*]}"

phase "clang build (build-clang): warnings as errors, the whole ctest suite"
# Clang is what Android's NDK compiles with; the library must build and pass with it too (GCC's
# leniencies: structured bindings captured by lambdas, GCC-only intrinsic types).
# Without the SIMDe twin, which only adds test coverage the GCC build already gives.
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DKESTREL_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
cmake --build build-clang -j "$jobs"
ctest --test-dir build-clang -j "$jobs" --output-on-failure

phase "x86 CPU models under qemu: Haswell (avx2), SandyBridge and Nehalem (generic)"
bash scripts/test-x86-cpus.sh build-ci

phase "AddressSanitizer + UBSan build (build-asan): the format, conversion, tokenizer, decoder and C API tests"
# Only the test programs that read untrusted input or manage memory are built here (a whole
# sanitized build doubles the time); each ctest carries its program's name as a label.
sanitized=(format_dtype_test format_layout_test format_vqf_test convert_gguf_test convert_hf_test
           tokenizer_bpe_test chat_template_test decoder_test capi_test kernels_test)
# -O1 (and assertions on): the sanitizers' usual level; at -O3 this build took 18 of CI's 30 minutes.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DKESTREL_SANITIZE=ON \
  -DKESTREL_WERROR=ON -DKESTREL_BUILD_BENCH=OFF -DKESTREL_BUILD_EXAMPLES=ON
cmake --build build-asan -j "$jobs" --target "${sanitized[@]}"
label=$(IFS='|'; echo "^(${sanitized[*]})$")
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure --no-tests=error -L "$label"

phase "aarch64 cross builds (GCC, clang), tests under qemu: cortex-a53 (neon) and max (neon_dotprod)"
bash scripts/test-arm.sh
phase "done: every phase above passed"
