#!/usr/bin/env bash
# Regenerates the figures in bench/README.md on this machine: kernel microbenchmarks (every backend
# against the generic one, same run) and end-to-end kestrel-bench runs on synthetic Qwen3-1.7B-shaped
# quantized models and a Qwen3-0.6B-shaped bf16 one (random weights: speed does not depend on their
# values).
# Usage: bench/run_benchmarks.sh [BUILD_DIR (default build)] [MODEL_DIR (default BUILD_DIR/bench-models)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${2:-$build/bench-models}
mkdir -p "$models"
for spec in q4_0:plain q4_0:tiled q8_0:plain q8_0:tiled; do
  type=${spec%%:*} layout=${spec##*:}
  file="$models/qwen3-1.7b-$type-$layout.vqf"
  [ -f "$file" ] || "$build/examples/kestrel-convert" --synthetic qwen3-1.7b --type "$type" --layout "$layout" -o "$file"
done
# The test-only avx512_vnni_simde backend (an emulation) is left out: its timings mean nothing.
echo "## kernels"
"$build/bench/kestrel-kernels-bench" --benchmark_min_time=0.5 \
  --benchmark_filter='^(generic|avx2|avx_vnni|avx512_vnni|neon|neon_dotprod)/((gemv|gemm)_(q4_0|q8_0|f16|bf16|f32).*2048x2048|quantize|rope|attention_f32_2heads/(64|4096))|^amx_(int8|bf16)/gemm_q|^amx_bf16/f32_to_bf16|^(avx2|avx_vnni|avx512_vnni|neon|neon_dotprod)/gemv_.*(151936|50656|303872|chunks_from_memory)|thread_pool'
if [ -x "$build/bench/kestrel-x86-issue-rates" ]; then
  echo "## x86 issue rates (the AVX2 Q4_0 kernel's ceiling)"
  "$build/bench/kestrel-x86-issue-rates"
fi
if [ -x "$build/bench/kestrel-x86-avx512-issue-rates" ]; then
  echo "## x86 AVX-512 VNNI issue rates (the avx512_vnni prefill loop's ceiling; says so and stops without it)"
  "$build/bench/kestrel-x86-avx512-issue-rates"
fi
for spec in q4_0-tiled q4_0-plain q8_0-tiled q8_0-plain; do
  echo "## kestrel-bench qwen3-1.7b $spec"
  "$build/examples/kestrel-bench" -m "$models/qwen3-1.7b-$spec.vqf" -p 64 -n 32 -t 1,2 -r 3
done
# The x86 backends the CPU runs besides the one chosen automatically (avx2 and, with AVX-VNNI,
# avx_vnni stand in for CPUs without AVX-512; avx512_vnni for AVX-512 CPUs without AMX, where
# amx_bf16 is chosen; amx_int8 for its bit-identical prompts); kestrel-bench says so and stops for
# one it cannot run.
if [ "$(uname -m)" = x86_64 ]; then
  for backend in avx2 avx_vnni avx512_vnni amx_int8; do
    for spec in q4_0-tiled q8_0-tiled; do
      echo "## kestrel-bench qwen3-1.7b $spec --backend $backend"
      "$build/examples/kestrel-bench" -m "$models/qwen3-1.7b-$spec.vqf" -p 64 -n 32 -t 1,2 -r 3 --backend "$backend" || true
    done
  done
fi
# Float weights, as kestrel-convert keeps a bf16 Hugging Face model by default.
float_model="$models/qwen3-0.6b-bf16.vqf"
[ -f "$float_model" ] || "$build/examples/kestrel-convert" --synthetic qwen3-0.6b --type bf16 -o "$float_model"
echo "## kestrel-bench qwen3-0.6b bf16"
"$build/examples/kestrel-bench" -m "$float_model" -p 64 -n 32 -t 1,2 -r 3
echo "## kestrel-bench qwen3-1.7b q4_0-tiled, decode after 1024 positions"
"$build/examples/kestrel-bench" -m "$models/qwen3-1.7b-q4_0-tiled.vqf" -p 0 -d 1024 -n 32 -t 2 -r 2
echo "## kestrel-bench qwen3-1.7b q4_0-tiled and q8_0-tiled, weights mapped (page cache, settled by a sequential re-read) and copied onto anonymous 4 KiB pages, instead of copied onto huge pages"
for spec in q4_0-tiled q8_0-tiled; do
  python3 bench/settle_page_cache.py "$models/qwen3-1.7b-$spec.vqf"
  for weights in mapped small-pages; do
    "$build/examples/kestrel-bench" -m "$models/qwen3-1.7b-$spec.vqf" -p 64 -n 32 -t 1,2 -r 3 --weights "$weights"
  done
done
