// Decode's walk over a range of weight tiles as tile streams, shared by the x86 kernels' decode
// loops (avx512_kernels.cc has the measurements). A step reads `streams` tiles at once; rather than
// adjacent tiles, which end their streams after one tile each, it takes tiles n apart, so that each
// heads a stream of n consecutive tiles of the layout, and the walk moves on to the next region of
// streams * n tiles when the streams are done. Memory streams whose reads run on were read up to
// 11% faster than ones that restart every step.
#pragma once

#include <cstdint>

namespace kestrel {
// Internal linkage: each ISA unit compiles its own copy with its own flags.
namespace {

// Tiles a stream, for every x86 decode loop: the length measured best for avx512_vnni's Q4_0 on the
// Intel Xeon CI host (avx512_kernels.cc, DecodeStreams, has the other lengths' figures).
constexpr int64_t kTileStreamLength = 5;

// Walks tiles [0, tiles) of a range in regions of at most max_length tiles a stream, then one
// shorter region of at least two, calling step(i, n, hop) for each step: stream s reads tile
// i + s * n, and after it tile i + s * n + hop (the next tile of its stream, or past the region's
// last step the first of its stream in the next region, taken to be as long). Returns how many
// tiles it walked: the rest (fewer than 2 * streams) is left to the caller.
template <typename Step>
int64_t WalkTileStreams(int64_t tiles, int64_t streams, int64_t max_length, Step&& step) {
  int64_t done = 0;
  while (tiles - done >= 2 * streams) {
    const int64_t n = (tiles - done) / streams < max_length ? (tiles - done) / streams : max_length;
    for (int64_t i = 0; i < n; ++i) step(done + i, n, i + 1 < n ? int64_t{1} : streams * n - (n - 1));
    done += n * streams;
  }
  return done;
}

}  // namespace
}  // namespace kestrel
