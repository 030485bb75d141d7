// A plain read of memory at the rate one core can stream it: the reference the decode kernels'
// GB/s are set against (kestrel-bench's bandwidth probe, the kernels bench's memory_read cases).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kestrel {

// Reads `words` 64-bit words from `data` as `streams` equal parts side by side, one cache line of
// each part per step, with or without a software prefetch 32 KB ahead in each part (as the decode
// kernels prefetch). Returns the words' sum, so the reads cannot be optimized away; sets *read to
// the bytes read (the remainder under 8 * streams words is left).
uint64_t ReadStreams(const uint64_t* data, size_t words, int streams, bool prefetch, size_t* read);

}  // namespace kestrel
