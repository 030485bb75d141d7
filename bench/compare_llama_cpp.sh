#!/usr/bin/env bash
# Kestrel against llama.cpp on the same GGUF files, on this machine, runs alternating.
#
#   bench/compare_llama_cpp.sh [BUILD_DIR (default build)] [WORK_DIR (default BUILD_DIR/llama-cpp-compare)]
#
# Makes Qwen3-1.7B-shaped GGUF files (random Q4_0 / Q8_0 weights, or F16 / BF16 ones,
# bench/make_synthetic_gguf.py),
# converts each with kestrel-convert (the default keeps the source's dtype; auto layout tiles it),
# then alternates kestrel-bench and llama.cpp, each round led by the other engine
# (bench/llama_cpp_bench.mjs, through the node-llama-cpp npm package's prebuilt libraries; installed
# into WORK_DIR on first use: npm and ~400 MB). Prints a
# markdown table of both engines' tokens/s and their ratio, then one setting the two-thread figures
# against the x86 issue's targets, with one thread's decode fractions reported (bench/compare_table.py).
# Environment: TYPES (default
# "q4_0 q8_0"; also f16, bf16), SHAPE (qwen3-1.7b, or qwen3-0.6b: a float 1.7B is 3.4 GB per
# file), THREADS (1,2), ROUNDS (2: each engine runs this many times, alternating), REPS (3),
# KESTREL_BENCH_ARGS (more kestrel-bench options, e.g. "--weights small-pages" to hold the weights on
# anonymous 4 KiB pages, as llama.cpp holds the tensors it repacks; "--backend avx_vnni" to pick a
# backend), LLAMA_CPU_VARIANT (e.g. "alderlake" or "haswell": llama.cpp loads only that one of its
# CPU builds, so an AVX2 or AVX-VNNI machine can be imitated on a newer one; the others are moved
# aside for the run and put back after it). Both files are settled in the
# page cache first (bench/settle_page_cache.py): a file just written reads far slower through a
# mapping here, and llama.cpp maps its GGUF.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=${2:-$build/llama-cpp-compare}
types=${TYPES:-q4_0 q8_0}
shape=${SHAPE:-qwen3-1.7b}
threads=${THREADS:-1,2}
rounds=${ROUNDS:-2}
reps=${REPS:-3}
read -r -a kestrel_args <<< "${KESTREL_BENCH_ARGS:-}"
node_llama_version=3.22.1

for tool in node npm python3; do
  command -v "$tool" >/dev/null || { echo "compare_llama_cpp.sh: needs $tool (apt-get install nodejs npm python3)" >&2; exit 1; }
done
for exe in kestrel-convert kestrel-bench; do
  [ -x "$build/examples/$exe" ] || { echo "compare_llama_cpp.sh: $build/examples/$exe not built" >&2; exit 1; }
done
mkdir -p "$work/npm" "$work/results"
if [ ! -d "$work/npm/node_modules/node-llama-cpp" ]; then
  # --ignore-scripts: the prebuilt binaries are used as shipped; nothing is compiled.
  npm install --prefix "$work/npm" --no-audit --no-fund --ignore-scripts "node-llama-cpp@$node_llama_version" >&2
fi
cp bench/llama_cpp_bench.mjs "$work/npm/"
if [ -n "${LLAMA_CPU_VARIANT:-}" ]; then
  bins="$work/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
  keep="$bins/libggml-cpu-$LLAMA_CPU_VARIANT.so"
  [ -f "$keep" ] || { echo "compare_llama_cpp.sh: no $keep" >&2; exit 1; }
  aside="$work/cpu-variants-aside"
  mkdir -p "$aside"
  # Put back what an interrupted run left aside, then again when this one ends, however it ends.
  mv "$aside"/libggml-cpu-*.so "$bins"/ 2>/dev/null || true
  trap 'mv "$aside"/libggml-cpu-*.so "$bins"/ 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  for lib in "$bins"/libggml-cpu-*.so; do [ "$lib" = "$keep" ] || mv "$lib" "$aside"/; done
  echo "# llama.cpp CPU build: $LLAMA_CPU_VARIANT only" >&2
fi

results=()
for type in $types; do
  gguf="$work/$shape-$type.gguf"
  vqf="$work/$shape-$type.vqf"
  [ -f "$gguf" ] || python3 bench/make_synthetic_gguf.py --shape "$shape" --type "$type" -o "$gguf" >&2
  [ -f "$vqf" ] || "$build/examples/kestrel-convert" "$gguf" -o "$vqf" >&2
  python3 bench/settle_page_cache.py "$gguf" "$vqf"
  gguf_path=$(realpath "$gguf")
  for round in $(seq "$rounds"); do
    # The engines take turns going first, so that a machine slowing or quickening within a round
    # does not favour one side of every pair.
    engines="kestrel llama.cpp"
    [ $((round % 2)) -eq 0 ] && engines="llama.cpp kestrel"
    for engine in $engines; do
      out="$work/results/$type-$engine-$round.json"
      echo "# $type round $round: $engine" >&2
      if [ "$engine" = kestrel ]; then
        "$build/examples/kestrel-bench" -m "$vqf" -p 64 -n 32 -t "$threads" -r "$reps" -o json ${kestrel_args[@]+"${kestrel_args[@]}"} > "$out"
      else
        (cd "$work/npm" && node llama_cpp_bench.mjs --model "$gguf_path" --p 64 --n 32 --t "$threads" --r "$reps") > "$out"
      fi
      results+=("$type=$out")
    done
  done
done
python3 bench/compare_table.py "${results[@]}"
