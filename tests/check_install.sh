#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a downstream project
# against it with find_package(Kestrel) (shared and static) and with pkg-config; checks that the
# shared library exports only the C API.
set -euo pipefail
build=$1 source=$2 model=${3:-}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
lib=$(find "$prefix" -name libkestrel.so.0 | head -1)
[ -n "$lib" ] || { echo "libkestrel.so.0 (SONAME = ABI version) was not installed"; exit 1; }
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}')
bad=$(echo "$exported" | grep -v '^kestrel_' || true)
[ -z "$bad" ] || { echo "symbols outside the C API are exported:"; echo "$bad" | head; exit 1; }
echo "$exported" | grep -q '^kestrel_model_load$' || { echo "kestrel_model_load is not exported"; exit 1; }
cmake -S "$source/tests/downstream" -B "$prefix/downstream" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$prefix/downstream" > /dev/null
LD_LIBRARY_PATH=$(dirname "$lib") "$prefix/downstream/downstream_shared" $model
"$prefix/downstream/downstream_static" $model
pc_dir=$(dirname "$(find "$prefix" -name kestrel.pc | head -1)")
flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs kestrel)
cc "$source/tests/downstream/main.c" $flags -o "$prefix/pc_consumer"
LD_LIBRARY_PATH=$(dirname "$lib") "$prefix/pc_consumer" $model
echo "install check passed"
