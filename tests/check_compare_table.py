#!/usr/bin/env python3
"""Checks bench/compare_table.py on results made up here, whose figures are worked out by hand:
the ratio of means, the per-round median and range, and from three rounds on the geometric mean of
the per-round ratios with its 95% confidence interval (none for two rounds); then the targets
table: each two-thread figure against its target, met only when the interval's low end clears it,
not judged under three rounds (nor ever on the median token's fraction, reported where the rounds
give it), and one thread's decode fraction reported after them.

usage: check_compare_table.py PATH/TO/compare_table.py"""
import json
import math
import os
import subprocess
import sys
import tempfile


def write(directory, name, rows):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(rows, f)
    return path


def row(backend, test, tps, threads=2, fraction=None, of_median=None, median_token=None):
    r = {"backend": backend, "test": test, "threads": threads, "tokens_per_second": tps, "stddev": 0.0}
    if fraction is not None:
        r["bandwidth_fraction"] = fraction
        r["bandwidth_fraction_of_median"] = of_median
    if median_token is not None:
        r["median_token_bandwidth_fraction"] = median_token
    return r


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    script = sys.argv[1]
    # Three rounds of pp64: llama.cpp at 100 t/s, Kestrel at 2x, 2e^0.1x and 2e^-0.1x of it. Log
    # ratios: ln 2 + (0, 0.1, -0.1), standard deviation 0.1, so the interval is
    # 2 exp(+-4.303 * 0.1 / sqrt(3)) = 1.560 .. 2.564 and the geometric mean 2.00.
    # Two rounds of tg32 (no interval): 40 and 60 against 20 and 20.
    kestrel = [200.0, 200.0 * math.exp(0.1), 200.0 * math.exp(-0.1)]
    with tempfile.TemporaryDirectory() as d:
        args = []
        for i in range(3):
            rows = [row("avx512_vnni", "pp64", kestrel[i])]
            if i < 2:
                rows.append(row("avx512_vnni", "tg32", [40.0, 60.0][i], fraction=[0.8, 0.9][i], of_median=0.95))
            args.append("q4_0=" + write(d, f"k{i}.json", rows))
            rows = [row("llama.cpp", "pp64", 100.0)] + ([row("llama.cpp", "tg32", 20.0)] if i < 2 else [])
            args.append("q4_0=" + write(d, f"l{i}.json", rows))
            # Q8_0, three rounds: pp64 at 3x each (interval 3.00-3.00); tg32 at 1.6x each, reading
            # 85, 90 and 95% of the limit: mean 90%, standard deviation 5 points, so the interval
            # is 90 +- 4.303 * 5 / sqrt(3) = 77.6 .. 102.4%; their median tokens at 88, 92 and 99% of
            # the limit (mean 93%, reported, not judged); and one thread, which is not judged. Q4_0's
            # rounds give no median token, as results from before it was measured.
            rows = [row("avx512_vnni", "pp64", 300.0),
                    row("avx512_vnni", "tg32", 32.0, fraction=[0.85, 0.9, 0.95][i], of_median=[0.9, 0.95, 1.0][i],
                        median_token=[0.88, 0.92, 0.99][i]),
                    row("avx512_vnni", "tg32", 10.0, threads=1, fraction=0.5, of_median=0.5)]
            args.append("q8_0=" + write(d, f"k8{i}.json", rows))
            rows = [row("llama.cpp", "pp64", 100.0), row("llama.cpp", "tg32", 20.0),
                    row("llama.cpp", "tg32", 10.0, threads=1)]
            args.append("q8_0=" + write(d, f"l8{i}.json", rows))
        run = subprocess.run([sys.executable, script] + args, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        sys.exit(f"exit {run.returncode}: {run.stderr}")
    lines = {l.split("|")[2].strip(): l for l in run.stdout.splitlines() if l.startswith("| q4_0 (")}
    failures = []
    pp = lines.get("pp64", "")
    mean = sum(kestrel) / 3 / 100.0
    for want in (f"{mean:.2f}x", "per round 2.00x (1.81-2.21)", "geometric mean 2.00x, 95% CI 1.56-2.56"):
        if want not in pp:
            failures.append(f"pp64 row lacks '{want}': {pp!r}")
    tg = lines.get("tg32", "")
    if "2.50x; per round 2.50x (2.00-3.00) |" not in tg or "CI" in tg:
        failures.append(f"tg32 row: want 2.50x, per round 2.50x (2.00-3.00), no interval: {tg!r}")
    # The targets table: rows "| type | target | measured | met? |".
    target_rows = [[c.strip() for c in l.split("|")[1:-1]] for l in run.stdout.splitlines()]
    target_rows = [cells for cells in target_rows if len(cells) == 4 and cells[0] in ("q4_0", "q8_0")]
    targets = {(cells[0], cells[1]): (cells[2], cells[3]) for cells in target_rows}
    want = {
        ("q4_0", "pp64 at 2.5x llama.cpp"): ("2.00x (95% CI 1.56-2.56)", "no (the interval's low end is under 2.5x)"),
        ("q4_0", "tg32 at 90% of the bandwidth limit"):
            ("rounds 80.0-90.0%, 1 of 2 at 90% or more; of the probe's median 95.0-95.0%",
             "not judged (fewer than 3 rounds)"),
        ("q4_0", "tg32 at 1.5x llama.cpp (the issue's stand-in)"): ("-", "not judged (fewer than 3 rounds)"),
        ("q8_0", "pp64 at 2.5x llama.cpp"): ("3.00x (95% CI 3.00-3.00)", "yes"),
        ("q8_0", "tg32 at 90% of the bandwidth limit"):
            ("mean 90.0% (95% CI 77.6-102.4%); rounds 85.0-95.0%, 2 of 3 at 90% or more; "
             "of the probe's median 90.0-100.0%; at the median token mean 93.0% (rounds 88.0-99.0%)",
             "no (the interval's low end is under 90%)"),
        ("q8_0", "tg32 at 1.6x llama.cpp (the issue's stand-in)"): None,  # the target is 1.5x
        ("q8_0", "tg32 at 1.5x llama.cpp (the issue's stand-in)"): ("1.60x (95% CI 1.60-1.60)", "yes"),
        ("q8_0", "tg32 of the bandwidth limit (one thread)"):
            ("mean 50.0% (95% CI 50.0-50.0%); rounds 50.0-50.0%, 0 of 3 at 90% or more; "
             "of the probe's median 50.0-50.0%", "reported"),
    }
    for key, value in want.items():
        if targets.get(key) != value:
            failures.append(f"targets row {key}: want {value!r}, got {targets.get(key)!r}")
    if len(target_rows) != 7:
        failures.append(f"want 7 target rows (one thread's tg32 only reported), got {len(target_rows)}: {target_rows}")
    elif target_rows[-1][3] != "reported":
        failures.append(f"the one-thread row should come last: {target_rows}")
    if failures:
        sys.exit("\n".join(failures))
    print("compare_table.py: ratios, per-round figures, the interval and the targets as worked out by hand")


if __name__ == "__main__":
    main()
