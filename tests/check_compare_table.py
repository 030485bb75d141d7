#!/usr/bin/env python3
"""Checks bench/compare_table.py on results made up here, whose figures are worked out by hand:
the ratio of means, the per-round median and range, and from three rounds on the geometric mean of
the per-round ratios with its 95% confidence interval (none for two rounds).

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


def row(backend, test, tps):
    return {"backend": backend, "test": test, "threads": 2, "tokens_per_second": tps, "stddev": 0.0}


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
                rows.append(row("avx512_vnni", "tg32", [40.0, 60.0][i]))
            args.append("q4_0=" + write(d, f"k{i}.json", rows))
            rows = [row("llama.cpp", "pp64", 100.0)] + ([row("llama.cpp", "tg32", 20.0)] if i < 2 else [])
            args.append("q4_0=" + write(d, f"l{i}.json", rows))
        run = subprocess.run([sys.executable, script] + args, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        sys.exit(f"exit {run.returncode}: {run.stderr}")
    lines = {l.split("|")[2].strip(): l for l in run.stdout.splitlines() if l.startswith("| q4_0")}
    failures = []
    pp = lines.get("pp64", "")
    mean = sum(kestrel) / 3 / 100.0
    for want in (f"{mean:.2f}x", "per round 2.00x (1.81-2.21)", "geometric mean 2.00x, 95% CI 1.56-2.56"):
        if want not in pp:
            failures.append(f"pp64 row lacks '{want}': {pp!r}")
    tg = lines.get("tg32", "")
    if "2.50x; per round 2.50x (2.00-3.00) |" not in tg or "CI" in tg:
        failures.append(f"tg32 row: want 2.50x, per round 2.50x (2.00-3.00), no interval: {tg!r}")
    if failures:
        sys.exit("\n".join(failures))
    print("compare_table.py: ratios, per-round figures and the interval as worked out by hand")


if __name__ == "__main__":
    main()
