#!/usr/bin/env python3
"""Puts files into the page cache the way a reader finds them after a fresh sequential read.

  bench/settle_page_cache.py FILE...

Each file is flushed (fsync), dropped from the page cache (posix_fadvise DONTNEED) and read once
from start to end. Why: a file just written (by the converter, or a GGUF generator) sits in the
page cache in the pieces its writes made, and on the CI-class VM one-thread decode from such a
mapping ran 2.6-11 t/s where the same file re-read sequentially (the kernel then caches it in
large folios, mapped with 2 MiB entries) ran 24-25 (bench/README.md). Benchmarks that map a file,
Kestrel's --weights mapped and llama.cpp's default mmap alike, settle it first so that neither
engine runs on a page cache the other does not get. Linux (elsewhere the advice is a no-op).
"""
import os
import sys


def settle(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # DONTNEED drops only clean pages
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        total = 0
        while True:
            chunk = os.read(fd, 8 << 20)
            if not chunk:
                break
            total += len(chunk)
    finally:
        os.close(fd)
    return total


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        print(f"settled {path}: {settle(path) / 1e9:.2f} GB re-read", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
