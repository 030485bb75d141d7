#!/usr/bin/env python3
"""Checks kestrel-alternate's report: the test line, both files' medians inside their ranges, and
the per-round ratio's median, quartiles and range in order. The model is given as both A and B, so
the ratio must also be a plausible one for equal work (the check allows a wide band for timing
noise; a ratio far outside it means one side ran something else or was not timed).

With --env-b, B alone is made with KESTREL_DUMP_LOGITS=1 (kestrel-alternate --env-b): its session,
and not A's, prints a logits line for every evaluation, (R + 1) x (N + 1) of them for decode and
R + 1 for prefill (one untimed round first), and the variable is unset again afterwards.

usage: check_alternate.py --model M.vqf --rounds R (-n N | -p P) [--env-b] -- CMD..."""
import argparse
import os
import re
import subprocess
import sys


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("-n", type=int)
    parser.add_argument("-p", type=int)
    parser.add_argument("--env-b", action="store_true")
    args = parser.parse_args(sys.argv[1:split])
    cmd = sys.argv[split + 1:] + ["-a", args.model, "-b", args.model, "-r", str(args.rounds)]
    if args.env_b:
        cmd += ["--env-b", "KESTREL_DUMP_LOGITS=1"]
    test = f"tg{args.n}" if args.n else f"pp{args.p}"
    cmd += ["-n", str(args.n)] if args.n else ["-p", str(args.p)]
    env = {k: v for k, v in os.environ.items() if k != "KESTREL_DUMP_LOGITS"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if run.returncode != 0:
        sys.exit(f"exit {run.returncode}: {run.stderr}")
    dumps = sum(1 for line in run.stderr.splitlines() if line.startswith("[kestrel] logits pos="))
    expected = 0 if not args.env_b else (args.rounds + 1) * ((args.n + 1) if args.n else 1)
    if dumps != expected:
        sys.exit(f"{dumps} logits lines on stderr, expected {expected} (B's evaluations only):\n{run.stderr}")
    lines = run.stdout.splitlines()
    if len(lines) != 4:
        sys.exit(f"expected 4 lines, got {len(lines)}:\n{run.stdout}")
    if lines[0] != f"test {test}, 1 threads, {args.rounds} rounds":
        sys.exit(f"test line: {lines[0]!r}")
    number = r"(\d+(?:\.\d+)?)"
    for side, line in zip("AB", lines[1:3]):
        m = re.fullmatch(rf"{side}: (.+): median {number} t/s \({number} \.\. {number}\)", line)
        if not m or m.group(1) != args.model:
            sys.exit(f"side line: {line!r}")
        median, low, high = (float(m.group(i)) for i in (2, 3, 4))
        if not 0 < low <= median <= high:
            sys.exit(f"{side}: median {median} outside {low} .. {high}, or not positive")
    m = re.fullmatch(rf"B/A per round: median {number}, quartiles {number} \.\. {number}, range {number} \.\. {number}",
                     lines[3])
    if not m:
        sys.exit(f"ratio line: {lines[3]!r}")
    median, q1, q3, low, high = (float(m.group(i)) for i in range(1, 6))
    if not 0 < low <= q1 <= median <= q3 <= high:
        sys.exit(f"ratio figures out of order: {lines[3]!r}")
    if not 0.2 < median < 5:
        sys.exit(f"the same file timed twice gave a median ratio of {median}")
    print("ok:", " | ".join(lines), f"({dumps} logits lines)")


if __name__ == "__main__":
    main()
