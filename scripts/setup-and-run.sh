#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to generated text: installs the packages, builds
# Kestrel, converts the stories260K model to VQF and runs kestrel-run on it.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KESTREL_JOBS:-2}

bash scripts/install-deps.sh
cmake -S . -B build-run -G Ninja -DCMAKE_BUILD_TYPE=Release -DKESTREL_BUILD_TESTS=OFF -DKESTREL_BUILD_BENCH=OFF
cmake --build build-run -j "$jobs"

models=build-run/models
mkdir -p "$models"
src=../shared/models/stories260K
if [ ! -f "$src/stories260K.bin" ]; then
  # Not beside the repository: fetch the public copy (Andrej Karpathy's tinyllamas, MIT).
  src="$models/download"
  mkdir -p "$src"
  base=https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K
  for f in stories260K.bin tok512.bin; do
    [ -f "$src/$f" ] || curl -fL --retry 3 -o "$src/$f" "$base/$f"
  done
fi
./build-run/examples/kestrel-convert "$src/stories260K.bin" --tokenizer "$src/tok512.bin" -o "$models/stories260K-q8_0.vqf" --type q8_0
./build-run/examples/kestrel-run -m "$models/stories260K-q8_0.vqf" -p "Once upon a time" -n 200 --temp 0 --verbose
