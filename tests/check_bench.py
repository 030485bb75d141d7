#!/usr/bin/env python3
"""Runs kestrel-bench on a small model and checks what it prints (stdlib only).

  check_bench.py --model VQF [--backend NAME] [--depth N] [--kv TYPE] -- CMD...
      CMD is kestrel-bench (with an emulator in front in a cross build). Runs it with
      -p 8 -n 4 -t 1,2 -r 2 (and -d N, --kv TYPE) on VQF, once with -o json and once with -o md, and requires one result per
      test and thread count: positive, finite tokens/s, a measured read bandwidth, and for decode a
      fraction of the bandwidth limit consistent with the tokens/s. With --backend, that backend is
      asked for and must be the one reported; with --kv, that KV cache type (else f16, the default).
      A third run, with --roles and --weights small-pages, must print one time-by-role line per
      result whose parts add up to its sum and whose sum fits in the run's wall time, and name the
      weights' residence in the table, and one line of token times per decode result. JSON decode
      results must give ordered token times and a median token's fraction near the run's. With
      --split-products (a model whose products are large enough for the pool, e.g. the tiny
      synthetic Qwen3's LM head), every two-thread result must also give the products' idle share
      and its start-wait part, and no one-thread result may.

A missing model (converted from ../shared) fails, unless KESTREL_ALLOW_MISSING_SHARED=1, when the
check exits with 77, which ctest reports as skipped.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

SKIPPED = 77
THREADS = [1, 2]
TESTS = ["pp8", "tg4"]


def bench(cmd, model, backend, depth, kv, output, extra=(), want_stderr=False):
    argv = cmd + ["-m", model, "-p", "8", "-n", "4", "-t", "1,2", "-r", "2", "--probe-mib", "8", "-o", output]
    argv += list(extra)
    if kv:
        argv += ["--kv", kv]
    if backend:
        argv += ["--backend", backend]
    if depth:
        argv += ["-d", str(depth)]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{argv} exited {result.returncode}: {result.stderr.decode(errors='replace')}")
    if want_stderr:
        return result.stdout.decode(), result.stderr.decode()
    return result.stdout.decode()


def positive(entry, key):
    value = entry.get(key)
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise AssertionError(f"{key} is {value!r} in {entry}")
    return value


def check_json(text, backend, kv):
    entries = json.loads(text)
    seen = sorted((e["test"], e["threads"]) for e in entries)
    want = sorted((t, n) for t in TESTS for n in THREADS)
    if seen != want:
        raise AssertionError(f"results for {seen}, expected {want}")
    for e in entries:
        for key in ("model", "backend"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise AssertionError(f"{key} missing in {e}")
        if backend and e["backend"] != backend:
            raise AssertionError(f"backend {e['backend']!r}, asked for {backend!r}")
        if e.get("kv_type") != kv:
            raise AssertionError(f"kv_type {e.get('kv_type')!r}, expected {kv!r}")
        positive(e, "tokens_per_second")
        if not isinstance(e.get("stddev"), (int, float)) or e["stddev"] < 0:
            raise AssertionError(f"stddev is {e.get('stddev')!r} in {e}")
        positive(e, "read_bandwidth_gbps")
        if e["test"].startswith("tg"):
            fraction = positive(e, "bandwidth_fraction")
            limit = positive(e, "bandwidth_limit_tokens_per_second")
            # The fraction is averaged run by run, the limit from the mean bandwidth: close, not equal,
            # and further apart when a loaded machine slows a run and its bandwidth probe together
            # (then the runs' own spread says how far).
            expected = e["tokens_per_second"] / limit
            spread = e.get("bandwidth_fraction_stddev", 0.0)
            if not (0.5 < fraction / expected < 2.0 or abs(fraction - expected) <= 3 * spread):
                raise AssertionError(f"bandwidth_fraction {fraction} does not match tokens/s / limit in {e}")
            # The fastest probe loop's median pass cannot exceed the best pass, run by run, so decode's
            # fraction of it is at least its fraction of the limit.
            median = positive(e, "read_bandwidth_median_gbps")
            of_median = positive(e, "bandwidth_fraction_of_median")
            if median > e["read_bandwidth_gbps"] * (1 + 1e-6) or of_median < fraction * (1 - 1e-6):
                raise AssertionError(f"median bandwidth {median} or fraction of it {of_median} inconsistent in {e}")
            check_token_times(e, fraction)
        elif "bandwidth_fraction" in e:
            raise AssertionError(f"prefill result has a bandwidth fraction: {e}")
    print(f"ok   json: {len(entries)} results, backend {entries[0]['backend']}")


def check_token_times(e, fraction):
    """A decode result's token times: ordered percentiles, a slowest token at least as slow as the
    fastest run's mean token (with the 2 runs asked for, that run's rate is at most mean + stddev),
    and the median token's fraction of the limit near the run's (the same bytes and limit, over a
    median token rather than the mean one)."""
    median, p90, slowest = (positive(e, k) for k in ("token_ms_median", "token_ms_p90", "token_ms_max"))
    if not median <= p90 <= slowest:
        raise AssertionError(f"token times not ordered (median {median}, p90 {p90}, slowest {slowest}) in {e}")
    if slowest < 1e3 / (e["tokens_per_second"] + e["stddev"]) * (1 - 1e-3):
        raise AssertionError(f"slowest token {slowest} ms faster than every run's mean token in {e}")
    of_median_token = positive(e, "median_token_bandwidth_fraction")
    if not 0.5 < of_median_token / fraction < 3.0:
        raise AssertionError(f"median token's fraction {of_median_token} far from the run's {fraction} in {e}")


def check_markdown(text, kv):
    lines = text.strip().splitlines()
    if not lines or not lines[0].startswith("| model | size | params | backend | threads | test | t/s |"):
        raise AssertionError(f"no table header in:\n{text}")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    if sorted((r[5], int(r[4])) for r in rows) != sorted((t, n) for t in TESTS for n in THREADS):
        raise AssertionError(f"unexpected rows:\n{text}")
    for r in rows:
        if not r[7].endswith("GB/s") or (r[5].startswith("tg") != r[8].endswith(tuple("0123456789"))):
            raise AssertionError(f"bandwidth or fraction column wrong in row {r}")
        if r[9] != kv:
            raise AssertionError(f"kv column {r[9]!r}, expected {kv!r} in row {r}")
    print(f"ok   markdown: {len(rows)} rows")


ROLES = ["qkv", "attn_output", "gate_up", "down", "lm_head", "attention", "other"]
TOKEN_LINE = re.compile(r"^tokens (.+), (\d+) threads, ms per token: median ([0-9.]+), p90 ([0-9.]+), "
                        r"slowest ([0-9.]+); the median token at (\d+)% of the bandwidth limit$")
ROLE_LINE = re.compile(r"^roles (.+), (\d+) threads, ms per run: (.*) \(sum ([0-9.]+)\)"
                       r"(?:; threads idle for ([0-9.]+)% of the products' thread time"
                       r" \(([0-9.]+)% waiting to start\))?$")


def check_idle_present(threads, present, what, split_products):
    """With --split-products the idle share is required on two threads and absent on one."""
    if split_products and present != (threads >= 2):
        raise AssertionError(f"idle share {'present' if present else 'missing'} on {threads} thread(s): {what}")


def check_roles(text, stderr, split_products=False):
    """--roles: a line per result, parts adding up to the sum, the sum within the run's wall time."""
    rates = {}
    for line in text.strip().splitlines()[2:]:
        r = [c.strip() for c in line.strip("|").split("|")]
        rate = r[6].split()  # "mean ± stddev"
        rates[(r[5], int(r[4]))] = (float(rate[0]), float(rate[2]))
        if not r[10].startswith("small-pages (0% huge)"):
            raise AssertionError(f"weights column {r[10]!r}, expected small-pages with no huge pages")
    seen = {}
    for line in stderr.splitlines():
        m = ROLE_LINE.match(line)
        if not m:
            continue
        parts = m.group(3).split()
        names, values = parts[0::2], [float(v) for v in parts[1::2]]
        if names != ROLES or any(not math.isfinite(v) or v < 0 for v in values):
            raise AssertionError(f"roles line malformed: {line}")
        total = float(m.group(4))
        # The idle share is printed only where some product ran on more than one thread.
        if m.group(5) is not None and (int(m.group(2)) < 2 or not 0 <= float(m.group(6)) <= float(m.group(5)) <= 100):
            raise AssertionError(f"idle share on a line for one thread, outside 0-100%, or less than its start wait: {line}")
        check_idle_present(int(m.group(2)), m.group(5) is not None, line, split_products)
        if abs(sum(values) - total) > 0.01 * len(values) + 1e-6:
            raise AssertionError(f"roles do not add up to their sum: {line}")
        seen[(m.group(1), int(m.group(2)))] = total
    if sorted(seen) != sorted(rates):
        raise AssertionError(f"roles lines for {sorted(seen)}, results for {sorted(rates)}:\n{stderr}")
    # And a line of token times for each decode result.
    tokens = {}
    for line in stderr.splitlines():
        m = TOKEN_LINE.match(line)
        if m:
            median, p90, slowest = (float(m.group(i)) for i in (3, 4, 5))
            if not 0 < median <= p90 <= slowest or int(m.group(6)) <= 0:
                raise AssertionError(f"token line malformed: {line}")
            tokens[(m.group(1), int(m.group(2)))] = median
        elif line.startswith("tokens "):
            raise AssertionError(f"token line malformed: {line}")
    decode = sorted(k for k in rates if k[0].startswith("tg"))
    if sorted(tokens) != decode:
        raise AssertionError(f"token lines for {sorted(tokens)}, decode results {decode}:\n{stderr}")
    for key, total in seen.items():
        check_roles_sum(total, key[0], *rates[key], key)
    print(f"ok   roles: {len(seen)} lines")


def check_roles_sum(total, test, mean_rate, stddev, what):
    """The session's clocks run inside each timed run, so their mean per run lies within the runs'
    wall times: at most the slowest run's, and most of the fastest's. The bench reports the mean and
    sample deviation of per-run rates; with the 2 runs asked for, the slowest rate is at least
    mean - stddev (on a loaded machine one run can take twice another)."""
    tokens = int(re.match(r"[a-z]+(\d+)", test).group(1))
    fastest_wall_ms = 1e3 * tokens / (mean_rate + stddev)
    slowest_rate = mean_rate - stddev
    slowest_wall_ms = 1e3 * tokens / slowest_rate if slowest_rate > 0 else math.inf
    if not (0.3 * fastest_wall_ms <= total <= 1.25 * slowest_wall_ms + 0.05):
        raise AssertionError(f"roles sum {total} ms for {what} against wall times of "
                             f"{fastest_wall_ms:.3f}-{slowest_wall_ms:.3f} ms per run")


def check_roles_json(text, split_products=False):
    """--roles -o json: every result has each role's milliseconds per run, within its wall time."""
    entries = json.loads(text)
    for e in entries:
        roles = e.get("ms_per_run_by_role")
        if not isinstance(roles, dict) or sorted(roles) != sorted(ROLES):
            raise AssertionError(f"ms_per_run_by_role is {roles!r} in {e}")
        if any(not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in roles.values()):
            raise AssertionError(f"a role's time is not a finite non-negative number in {e}")
        check_roles_sum(sum(roles.values()), e["test"], e["tokens_per_second"], e["stddev"], e)
        idle, start_wait = e.get("product_idle_share"), e.get("product_start_wait_share")
        if (idle is None) != (start_wait is None):
            raise AssertionError(f"product_idle_share and product_start_wait_share not both present in {e}")
        if idle is not None and (e["threads"] < 2 or not all(isinstance(v, (int, float)) for v in (idle, start_wait))
                                 or not 0 <= start_wait <= idle <= 1):
            raise AssertionError(f"product_idle_share {idle!r} / product_start_wait_share {start_wait!r} in {e}")
        check_idle_present(e["threads"], idle is not None, e, split_products)
    print(f"ok   roles json: {len(entries)} results")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--backend")
    parser.add_argument("--depth", type=int, default=0)
    parser.add_argument("--kv", choices=["f32", "f16"])
    parser.add_argument("--split-products", action="store_true")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command given after --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if not os.path.exists(args.model):
        if os.environ.get("KESTREL_ALLOW_MISSING_SHARED") == "1":
            print(f"SKIPPED: ../shared absent ({args.model} was not converted)")
            return SKIPPED
        print(f"FAIL: missing {args.model} (set KESTREL_ALLOW_MISSING_SHARED=1 to skip instead)", file=sys.stderr)
        return 1
    if args.depth:
        TESTS[1] = f"tg4 @ d{args.depth}"
    try:
        kv = args.kv or "f16"
        check_json(bench(cmd, args.model, args.backend, args.depth, args.kv, "json"), args.backend, kv)
        check_markdown(bench(cmd, args.model, args.backend, args.depth, args.kv, "md"), kv)
        check_roles(*bench(cmd, args.model, args.backend, args.depth, args.kv, "md",
                           ["--roles", "--weights", "small-pages"], want_stderr=True), args.split_products)
        check_roles_json(bench(cmd, args.model, args.backend, args.depth, args.kv, "json", ["--roles"]),
                         args.split_products)
    except (AssertionError, ValueError, KeyError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
