#!/usr/bin/env python3
"""Checks kestrel-run's built-in diagnostics on a model (stdlib only):
KESTREL_DUMP_LAYERS and KESTREL_DUMP_LOGITS print one line per layer stage / per step, never change
the generated text, and two identical runs give identical logit fingerprints.
usage: check_diagnostics.py MODEL N_LAYERS [RUNNER...] KESTREL_RUN
"""
import os
import re
import subprocess
import sys

model, n_layers, run = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if not os.path.exists(model):
    print(f"missing {model}", file=sys.stderr)
    sys.exit(77 if os.environ.get("KESTREL_ALLOW_MISSING_SHARED") == "1" else 1)
cmd = run + ["-m", model, "-p", "Once upon a time", "-n", "6", "--temp", "0"]
plain = subprocess.run(cmd, capture_output=True, text=True, check=True)
env = dict(os.environ, KESTREL_DUMP_LAYERS="1", KESTREL_DUMP_LOGITS="1")
dumped = [subprocess.run(cmd, capture_output=True, text=True, check=True, env=env) for _ in range(2)]
failures = []
if dumped[0].stdout != plain.stdout:
    failures.append("the dumps changed the generated text")
layer_re = re.compile(r"^\[kestrel\] layer=(-?\d+) stage=(attention|ffn|final_norm) pos=\d+ max_abs=\S+ rms=\S+ non_finite=(\d+)$")
logit_re = re.compile(r"^\[kestrel\] logits pos=\d+ fnv1a=[0-9a-f]{16} top1=\d+ \(\S+\) top2=\d+ \(\S+\) margin=\S+ backend=\w+$")
lines = dumped[0].stderr.splitlines()
layers = [m for m in map(layer_re.match, lines) if m]
logits = [l for l in lines if logit_re.match(l)]
evals = 1 + 5  # the prompt, then each generated token but the last
if len(layers) != evals * (2 * n_layers + 1):
    failures.append(f"expected {evals * (2 * n_layers + 1)} layer lines, found {len(layers)}")
if any(int(m.group(3)) != 0 for m in layers):
    failures.append("non-finite values reported on a healthy model")
if len(logits) != evals:
    failures.append(f"expected {evals} logits lines, found {len(logits)}")
fingerprints = [[l for l in d.stderr.splitlines() if "logits" in l] for d in dumped]
if fingerprints[0] != fingerprints[1]:
    failures.append("two identical runs gave different logit fingerprints")
for f in failures:
    print("FAIL:", f, file=sys.stderr)
print("diagnostics check", "failed" if failures else "passed")
sys.exit(1 if failures else 0)
