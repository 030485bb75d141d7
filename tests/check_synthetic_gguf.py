#!/usr/bin/env python3
"""Checks bench/make_synthetic_gguf.py end to end (stdlib only): the file it writes imports with
kestrel-convert's default type, every matrix keeps the GGUF's type (quantized ones tiled, float ones
plain), and the model decodes.

  check_synthetic_gguf.py --tokenizer TOKENIZER_JSON --workdir DIR --type q4_0|q8_0|f16|bf16 [--runner EMULATOR]
                          -- CONVERT INSPECT RUN
      CONVERT, INSPECT and RUN are the kestrel-convert, kestrel-inspect and kestrel-run programs; in a
      cross build each runs under EMULATOR.

A missing tokenizer (from ../shared) fails, unless KESTREL_ALLOW_MISSING_SHARED=1, when the check exits
with 77, which ctest reports as skipped.
"""
import argparse
import os
import re
import subprocess
import sys

SKIPPED = 77
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "bench", "make_synthetic_gguf.py")


def run(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{argv} exited {result.returncode}: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--type", required=True, choices=["q4_0", "q8_0", "f16", "bf16"])
    ap.add_argument("--runner", default="")
    ap.add_argument("commands", nargs=3)
    args = ap.parse_args()
    if not os.path.exists(args.tokenizer):
        if os.environ.get("KESTREL_ALLOW_MISSING_SHARED") == "1":
            print(f"SKIPPED: ../shared is absent ({args.tokenizer})")
            return SKIPPED
        print(f"FAILED: {args.tokenizer} is missing (set KESTREL_ALLOW_MISSING_SHARED=1 to skip)")
        return 1
    prefix = [args.runner] if args.runner else []
    convert, inspect, run_cmd = (prefix + [c] for c in args.commands)
    os.makedirs(args.workdir, exist_ok=True)
    gguf = os.path.join(args.workdir, f"synthetic-tiny-{args.type}.gguf")
    vqf = os.path.join(args.workdir, f"synthetic-tiny-{args.type}.vqf")
    run([sys.executable, GENERATOR, "--shape", "tiny", "--type", args.type, "--tokenizer", args.tokenizer, "-o", gguf])
    run(convert + [gguf, "-o", vqf])

    listing = run(inspect + [vqf])
    matrices = re.findall(r"^\s+(\S+\.weight)\s+(\S+)\s+(\S+)\s+(\d+) x (\d+)", listing, re.M)
    if len(matrices) != 1 + 2 * 7:  # the embedding and 7 matrices in each of 2 layers
        raise AssertionError(f"expected 15 matrices in {vqf}, found {len(matrices)}:\n{listing}")
    for name, dtype, layout, _, _ in matrices:
        if dtype != args.type:
            raise AssertionError(f"{name} is {dtype}, the GGUF's {args.type} was not kept")
        quantized = args.type in ("q4_0", "q8_0")
        if quantized and layout == "plain":
            raise AssertionError(f"{name} was left plain (every matrix here fills whole tiles)")
        if not quantized and layout != "plain":
            raise AssertionError(f"{name} is {layout}; float matrices have no tiled layout")
    if '"source"' not in listing:
        raise AssertionError(f"general.requested_type is not 'source':\n{listing}")

    # Random weights: the text means nothing, but every layer's output and logit must be finite
    # (--check-finite fails the run at the first non-finite value).
    out = run(run_cmd + ["-m", vqf, "-p", "hello", "-n", "6", "--temp", "0", "--check-finite"])
    print(f"ok: {args.type}: 15 matrices kept as {args.type}; decoded {out.strip()[:60]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
