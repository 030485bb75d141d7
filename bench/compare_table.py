#!/usr/bin/env python3
"""Prints the markdown table of bench/compare_llama_cpp.sh from its JSON results.

Arguments are TYPE=FILE.json, one per engine run (kestrel-bench -o json, or llama_cpp_bench.mjs).
Each engine's figure is the mean over its runs of each run's mean tokens/s; "spread" is the
largest difference between runs (both engines drift with the machine's bandwidth). With several
rounds, the last column also gives the median (and range) of the per-round ratios: the i-th Kestrel
run against the i-th llama.cpp run, which ran right after it, so that a slow stretch of the machine
weighs on both sides of a ratio rather than on one engine's mean.
"""
import collections
import json
import statistics
import sys


def main():
    runs = collections.defaultdict(list)  # (type, test, threads, engine) -> [t/s per run]
    backends = {}
    for arg in sys.argv[1:]:
        qtype, path = arg.split("=", 1)
        with open(path) as f:
            rows = json.load(f)
        if not rows:
            sys.exit(f"{path}: no results")
        for row in rows:
            engine = "llama.cpp" if row["backend"] == "llama.cpp" else "kestrel"
            if engine == "kestrel":
                # With how Kestrel held its weights (huge-page copy or mapped), where the bench says.
                weights = row.get("weights")
                backends[qtype] = row["backend"] + (f", {weights}" if weights else "")
            runs[(qtype, row["test"], row["threads"], engine)].append(row["tokens_per_second"])

    print("| type | test | threads | kestrel t/s | llama.cpp t/s | kestrel / llama.cpp (of means; per-round median) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    keys = sorted({k[:3] for k in runs}, key=lambda k: (k[0], k[2], k[1]))
    for qtype, test, threads in keys:
        cells = []
        means = {}
        for engine in ("kestrel", "llama.cpp"):
            values = runs.get((qtype, test, threads, engine), [])
            if not values:
                cells.append("-")
                continue
            means[engine] = sum(values) / len(values)
            spread = max(values) - min(values)
            cells.append(f"{means[engine]:.2f}" + (f" (spread {spread:.2f})" if len(values) > 1 else ""))
        ratio = f"{means['kestrel'] / means['llama.cpp']:.2f}x" if len(means) == 2 else "-"
        pairs = list(zip(runs.get((qtype, test, threads, "kestrel"), []), runs.get((qtype, test, threads, "llama.cpp"), [])))
        if len(pairs) > 1:
            ratios = [k / l for k, l in pairs]
            ratio += f"; per round {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        label = f"{qtype} ({backends.get(qtype, '?')})"
        print(f"| {label} | {test} | {threads} | {cells[0]} | {cells[1]} | {ratio} |")


if __name__ == "__main__":
    main()
