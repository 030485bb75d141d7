#!/usr/bin/env bash
# How the weights' memory changes speed: kestrel-bench on one model with the weights mapped from the
# page cache (4 KiB file pages), copied onto anonymous 4 KiB pages, and copied onto 2 MiB pages, in
# rounds that alternate the three so that a slow or busy moment of the machine falls on all of them.
# Mapped vs small-pages is the cost of file pages as such; small-pages vs huge-pages that of 4 KiB
# pages (TLB misses) over the whole model.
#
#   bench/compare_weights_memory.sh MODEL.vqf [BUILD_DIR (default build)]
#
# Environment: ROUNDS (default 4), THREADS (1,2), P (64), N (32), REPS (3), MODES ("mapped
# small-pages huge-pages"). Prints a markdown table: per mode and test, the median tokens/s over the
# rounds with their range, and the median of each round's ratio to the first mode.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/compare_weights_memory.sh MODEL.vqf [BUILD_DIR]}
build=${2:-build}
rounds=${ROUNDS:-4}
threads=${THREADS:-1,2}
read -r -a modes <<< "${MODES:-mapped small-pages huge-pages}"
bench="$build/examples/kestrel-bench"
[ -x "$bench" ] || { echo "compare_weights_memory.sh: $bench not built" >&2; exit 1; }
# The mapped runs read the page cache: settle the file as a fresh sequential read leaves it (a file
# just written reads far slower through a mapping on some machines; bench/settle_page_cache.py).
python3 bench/settle_page_cache.py "$model"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq "$rounds"); do
  for mode in "${modes[@]}"; do
    echo "# round $round: $mode" >&2
    "$bench" -m "$model" -p "${P:-64}" -n "${N:-32}" -t "$threads" -r "${REPS:-3}" --weights "$mode" -o json \
      > "$out/$mode-$round.json"
  done
done
python3 - "$out" "$rounds" "${modes[@]}" <<'EOF'
import json, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {m: [json.load(open(f"{out}/{m}-{r}.json")) for r in range(1, rounds + 1)] for m in modes}
def rate(m, r, key):
    return next(x["tokens_per_second"] for x in runs[m][r] if (x["test"], x["threads"]) == key)
keys = [(x["test"], x["threads"]) for x in runs[modes[0]][0]]
print(f"| test | threads | " + " | ".join(f"{m} t/s" for m in modes) + " | " +
      " | ".join(f"{m} / {modes[0]}" for m in modes[1:]) + " |")
print("| --- | ---: |" + " ---: |" * (2 * len(modes) - 1))
for key in keys:
    cells = []
    for m in modes:
        v = [rate(m, r, key) for r in range(rounds)]
        cells.append(f"{statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})")
    for m in modes[1:]:
        ratios = [rate(m, r, key) / rate(modes[0], r, key) for r in range(rounds)]
        cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
huge = {m: runs[m][0][0].get("weights_on_huge_pages", 0) for m in modes}
print("\nshare of the weights on huge pages (first round): " + ", ".join(f"{m} {100 * h:.0f}%" for m, h in huge.items()))
EOF
