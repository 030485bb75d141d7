#!/usr/bin/env python3
"""Generates text with a Kestrel model through the ctypes binding (kestrel.py, next to this file).

    generate.py --lib build/capi/libkestrel.so -m MODEL.vqf -p "Once upon a time" -n 64 --temp 0

Prints the prompt and the generated text, then a newline, to stdout (as kestrel-run does); timings go
to stderr. A Kestrel failure prints "generate.py: NAME (CODE): message" and exits with status 1.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kestrel  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description="Generate text with a Kestrel .vqf model.")
    parser.add_argument("--lib", help="path of libkestrel.so (default: $KESTREL_LIBRARY, then the loader's search)")
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("-p", "--prompt", default="")
    parser.add_argument("-n", "--n-predict", type=int, default=256)
    parser.add_argument("--temp", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--min-p", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop", action="append", help="a stop string (repeatable)")
    parser.add_argument("--backend")
    parser.add_argument("-t", "--threads", type=int, default=0)
    args = parser.parse_args()

    try:
        lib = kestrel.Library(args.lib)
    except OSError as e:
        print(f"generate.py: cannot load the Kestrel library: {e}", file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    try:
        with lib.load(args.model, backend=args.backend) as model, model.session(n_threads=args.threads) as session:
            tokens = model.tokenize(args.prompt)
            out.write(model.detokenize_bytes(tokens))
            out.flush()

            def on_bytes(piece):
                out.write(piece)
                out.flush()

            session.eval(tokens)
            try:
                session.generate(None, max_tokens=args.n_predict, temperature=args.temp, top_k=args.top_k,
                                 top_p=args.top_p, min_p=args.min_p, seed=args.seed, stop=args.stop,
                                 on_bytes=on_bytes)
            finally:
                out.write(b"\n")
                out.flush()
            t = session.timings()
            print(f"generate.py: {len(session.last_tokens)} tokens ({session.last_stop_reason}); "
                  f"prefill {t['prefill_tokens']} tokens at {t['prefill_tokens_per_second']:.1f} tokens/s, "
                  f"decode {t['decode_tokens']} tokens at {t['decode_tokens_per_second']:.1f} tokens/s",
                  file=sys.stderr)
    except kestrel.KestrelError as e:
        print(f"generate.py: {e.name} ({e.code}): {e.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
