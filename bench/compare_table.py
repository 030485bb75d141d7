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

A second table then sets the two-thread figures against the x86 issue's targets: prefill at 2.5x
llama.cpp (that interval's low end), decode at 90% of the bandwidth limit kestrel-bench measured
beside each run (the mean of the rounds' fractions with its 95% interval, the rounds' range, how
many reached 90%, and the range against the probe's median pass), and the issue's stand-in for the
latter, decode at 1.5x llama.cpp. One thread's decode fractions are reported, not judged. Where the
rounds give it (kestrel-bench's median_token_bandwidth_fraction), the decode cell also reports the
median token's fraction of the limit, mean and range: a token the host held up lowers a round's
fraction but not its median token, so the two apart show how much of the shortfall is such stalls.
The target is judged on the rounds' fractions, never on the median token.
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


def t95(n):
    """Student's two-sided 95% quantile for the mean of n values."""
    return T95[n - 2] if n - 1 <= len(T95) else 1.96


def mean_interval(values):
    """Arithmetic mean of values and its 95% confidence interval, or None under 3 values."""
    if len(values) < 3:
        return None
    mean = statistics.fmean(values)
    half = t95(len(values)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def ratio_interval(ratios):
    """Geometric mean of paired ratios and its 95% confidence interval, or None under 3 rounds."""
    interval = mean_interval([math.log(r) for r in ratios])
    return None if interval is None else tuple(math.exp(v) for v in interval)


def round_ratios(runs, qtype, test, threads):
    """Kestrel / llama.cpp per round: the i-th run of each engine, which ran side by side."""
    kestrel, llama = (runs.get((qtype, test, threads, e), []) for e in ("kestrel", "llama.cpp"))
    return [k / l for k, l in zip(kestrel, llama)]


# The x86 issue's targets, at two threads.
PREFILL_RATIO, DECODE_FRACTION, DECODE_RATIO = 2.5, 0.90, 1.5


def verdict(interval, target, shown):
    """Met only when the interval's low end clears the target (shown as written)."""
    if interval is None:
        return "not judged (fewer than 3 rounds)"
    return "yes" if interval[1] >= target else f"no (the interval's low end is under {shown})"


def decode_fraction_text(measured):
    """The rounds' fractions of the bandwidth limit: their mean and interval, range, how many reached
    the target, the range against the probe's median pass, and the median token's (docstring above)."""
    limit = [f for f, _, _ in measured]
    of_median = [m for _, m, _ in measured if m is not None]
    median_token = [t for _, _, t in measured if t is not None]
    mean = mean_interval(limit)
    text = f"mean {100 * mean[0]:.1f}% (95% CI {100 * mean[1]:.1f}-{100 * mean[2]:.1f}%); " if mean else ""
    reached = sum(f >= DECODE_FRACTION for f in limit)
    text += (f"rounds {100 * min(limit):.1f}-{100 * max(limit):.1f}%, "
             f"{reached} of {len(limit)} at {100 * DECODE_FRACTION:.0f}% or more")
    if of_median:
        text += f"; of the probe's median {100 * min(of_median):.1f}-{100 * max(of_median):.1f}%"
    if median_token:
        text += (f"; at the median token mean {100 * statistics.mean(median_token):.1f}% "
                 f"(rounds {100 * min(median_token):.1f}-{100 * max(median_token):.1f}%)")
    return text, mean


def print_targets(runs, fractions):
    """The two-thread rows against the targets, then the one-thread rows reported (module docstring)."""
    rows = []
    for qtype, test, threads in sorted({k[:3] for k in runs if k[2] in (1, 2)}, key=lambda k: (-k[2], k[0], k[1])):
        if threads == 1:  # reported, not judged
            if test.startswith("tg") and fractions.get((qtype, test, threads)):
                text, _ = decode_fraction_text(fractions[(qtype, test, threads)])
                rows.append((qtype, f"{test} of the bandwidth limit (one thread)", text, "reported"))
            continue
        ratios = round_ratios(runs, qtype, test, threads)
        interval = ratio_interval(ratios)
        ratio = f"{interval[0]:.2f}x (95% CI {interval[1]:.2f}-{interval[2]:.2f})" if interval else "-"
        if test.startswith("pp") and ratios:
            rows.append((qtype, f"{test} at {PREFILL_RATIO:g}x llama.cpp", ratio,
                         verdict(interval, PREFILL_RATIO, f"{PREFILL_RATIO:g}x")))
        if not test.startswith("tg"):
            continue
        if fractions.get((qtype, test, threads)):
            text, mean = decode_fraction_text(fractions[(qtype, test, threads)])
            rows.append((qtype, f"{test} at {100 * DECODE_FRACTION:.0f}% of the bandwidth limit", text,
                         verdict(mean, DECODE_FRACTION, f"{100 * DECODE_FRACTION:.0f}%")))
        if ratios:
            rows.append((qtype, f"{test} at {DECODE_RATIO:g}x llama.cpp (the issue's stand-in)", ratio,
                         verdict(interval, DECODE_RATIO, f"{DECODE_RATIO:g}x")))
    if not rows:
        return
    print()
    print("| type | target (two threads unless said) | measured | met? |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main():
    runs = collections.defaultdict(list)  # (type, test, threads, engine) -> [t/s per run]
    # (type, test, threads) -> [(of the limit, of the probe's median, the median token's of the limit)]
    fractions = collections.defaultdict(list)
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
            if engine == "kestrel" and row.get("bandwidth_fraction") is not None:
                fractions[(qtype, row["test"], row["threads"])].append(
                    (row["bandwidth_fraction"], row.get("bandwidth_fraction_of_median"),
                     row.get("median_token_bandwidth_fraction")))

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
        ratios = round_ratios(runs, qtype, test, threads)
        if len(ratios) > 1:
            ratio += f"; per round {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            interval = ratio_interval(ratios)
            if interval is not None:
                ratio += f"; geometric mean {interval[0]:.2f}x, 95% CI {interval[1]:.2f}-{interval[2]:.2f}"
        label = f"{qtype} ({backends.get(qtype, '?')})"
        print(f"| {label} | {test} | {threads} | {cells[0]} | {cells[1]} | {ratio} |")
    print_targets(runs, fractions)


if __name__ == "__main__":
    main()
