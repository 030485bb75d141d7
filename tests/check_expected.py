#!/usr/bin/env python3
"""Runs a text-generating command and checks its output against a model's expected.json (stdlib only).

  check_expected.py run    [--require FILE]... -- CMD...
      Runs CMD (e.g. a conversion) and exits with its status.
  check_expected.py expect --expected JSON [--case I]... [--require FILE]... -- CMD...
      For each case (all by default), runs CMD with {prompt} and {n} replaced by the case's prompt and
      its number of new tokens (steps - len(prompt_tokens) + 1), and requires stdout to be exactly the
      case's text plus the one newline run.c adds.
  check_expected.py fail   [--stderr-regex RE]... [--one-line] [--require FILE]... -- CMD...
      Requires CMD to exit nonzero, with stderr matching every RE (and, with --one-line, being one line).

A missing --require file (the ../shared models) fails, unless KESTREL_ALLOW_MISSING_SHARED=1, when the
check exits with 77, which ctest reports as skipped (SKIP_RETURN_CODE).
"""
import argparse
import json
import os
import re
import subprocess
import sys

SKIPPED = 77


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)


def show_difference(got, want):
    at = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    print(f"  first difference at byte {at} (got {len(got)} bytes, expected {len(want)})", file=sys.stderr)
    print(f"  got:      {got[max(0, at - 40):at + 40]!r}", file=sys.stderr)
    print(f"  expected: {want[max(0, at - 40):at + 40]!r}", file=sys.stderr)


def check_expect(args, cmd):
    with open(args.expected, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    chosen = args.case if args.case else range(len(cases))
    failures = 0
    for i in chosen:
        case = cases[i]
        n_new = case["steps"] - len(case["prompt_tokens"]) + 1
        argv = [a.replace("{prompt}", case["prompt"]).replace("{n}", str(n_new)) for a in cmd]
        result = run(argv)
        want = (case["text"] + "\n").encode("utf-8")
        label = f"case {i} (prompt {case['prompt']!r}, {n_new} new tokens)"
        if result.returncode != 0:
            print(f"FAIL {label}: exit status {result.returncode}\n{result.stderr.decode(errors='replace')}",
                  file=sys.stderr)
            failures += 1
        elif result.stdout != want:
            print(f"FAIL {label}: stdout differs", file=sys.stderr)
            show_difference(result.stdout, want)
            failures += 1
        else:
            print(f"ok   {label}")
    return 1 if failures else 0


def check_fail(args, cmd):
    result = run(cmd)
    stderr = result.stderr.decode(errors="replace")
    problems = []
    if result.returncode == 0:
        problems.append("exit status 0, expected a failure")
    if result.returncode < 0:
        problems.append(f"killed by signal {-result.returncode}")
    for pattern in args.stderr_regex or []:
        if not re.search(pattern, stderr):
            problems.append(f"stderr does not match {pattern!r}")
    if args.one_line and (stderr.count("\n") != 1 or not stderr.endswith("\n")):
        problems.append(f"stderr is {stderr.count(chr(10))} lines, expected one")
    if problems:
        print(f"FAIL {cmd}: " + "; ".join(problems) + f"\nstderr:\n{stderr}", file=sys.stderr)
        return 1
    print(f"ok   exit {result.returncode}: {stderr.strip()}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["run", "expect", "fail"])
    parser.add_argument("--expected")
    parser.add_argument("--case", type=int, action="append")
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--stderr-regex", action="append")
    parser.add_argument("--one-line", action="store_true")
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("no command given after --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if not cmd:
        parser.error("no command given after --")

    required = args.require + ([args.expected] if args.expected else [])
    missing = [p for p in required if not os.path.exists(p)]
    if missing:
        if os.environ.get("KESTREL_ALLOW_MISSING_SHARED") == "1":
            print(f"SKIPPED: ../shared absent ({', '.join(missing)})")
            return SKIPPED
        print(f"FAIL: missing {', '.join(missing)} (set KESTREL_ALLOW_MISSING_SHARED=1 to skip instead)",
              file=sys.stderr)
        return 1

    if args.mode == "run":
        result = subprocess.run(cmd, timeout=600)
        return result.returncode
    if args.mode == "expect":
        if not args.expected:
            parser.error("expect needs --expected")
        return check_expect(args, cmd)
    return check_fail(args, cmd)


if __name__ == "__main__":
    sys.exit(main())
