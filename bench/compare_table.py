#!/usr/bin/env python3
"""Prints the markdown table of bench/compare_llama_cpp.sh from its JSON results.

Arguments are TYPE=FILE.json, one per engine run (kestrel-bench -o json, or llama_cpp_bench.mjs).
Each engine's figure is the mean over its runs of each run's mean tokens/s; "spread" is the
largest difference between runs (both engines drift with the machine's bandwidth). With several
rounds, the last column also gives the median (and range) of the per-round ratios: the i-th Kestrel
run against the i-th llama.cpp run, which ran right beside it (bench/compare_llama_cpp.sh lets the
engines take turns going first), so that a slow stretch of the machine weighs on both sides of a
ratio rather than on one engine's mean. From three rounds on it also gives their geometric mean
with a 95% confidence interval (Student's t over the log ratios): a target such as "2.5x
llama.cpp" is met beyond the noise only when the interval's low end clears it.
"""
import collections
import json
import math
import statistics
import sys

# Two-sided 95% quantiles of Student's t by degrees of freedom (1-30); past 30 the normal's 1.96 is
# within 4%.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
       2.045, 2.042]


def ratio_interval(ratios):
    """Geometric mean of paired ratios and its 95% confidence interval, or None under 3 rounds."""
    if len(ratios) < 3:
        return None
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = (T95[len(logs) - 2] if len(logs) - 1 <= len(T95) else 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


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
                if weights and row.get("q4_0x4_lines_tensors"):
                    weights += ", q4_0x4_lines"  # Q4_0 regrouped on load for the backend
                backends[qtype] = row["backend"] + (f", {weights}" if weights else "")
            runs[(qtype, row["test"], row["threads"], engine)].append(row["tokens_per_second"])

    print("| type | test | threads | kestrel t/s | llama.cpp t/s | kestrel / llama.cpp (of means; per-round median; their geometric mean and 95% CI) |")
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
            interval = ratio_interval(ratios)
            if interval is not None:
                ratio += f"; geometric mean {interval[0]:.2f}x, 95% CI {interval[1]:.2f}-{interval[2]:.2f}"
        label = f"{qtype} ({backends.get(qtype, '?')})"
        print(f"| {label} | {test} | {threads} | {cells[0]} | {cells[1]} | {ratio} |")


if __name__ == "__main__":
    main()
