// Per-block figures of quantized activations that several kernels need for every row tile: the
// sum of a block's quants (the x86 kernels multiply unsigned weights, so they subtract
// zero_point * sum) and its scale as f32. Computing them once per input, beside the quantization,
// spares each row chunk of each product from redoing it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/kernels.h"
#include "format/dtype.h"

namespace kestrel {

// sums[i] = the sum of blocks[i].qs, scales[i] = blocks[i].d as f32, for i in [0, count).
void SummarizeQ8_0Blocks(const BlockQ8_0* blocks, int64_t count, int32_t* sums, float* scales);

// Q4_0's zero-point corrections for an input of n_tokens tokens x `blocks` blocks, in the layout of
// Activations::q4_0_offsets: -8 * sums, grouped into runs of `run` blocks, run-major (all tokens'
// entries for the first run of blocks, then the second...). Why: a prefill kernel that walks the
// columns in runs reads one run for a tile of tokens as one contiguous table, built here once per
// input instead of once per strip of rows and run in every product (bench/README.md).
//
// Entries for n_tokens tokens (the last run padded to `run` blocks).
int64_t Q4_0OffsetsCount(int64_t n_tokens, int64_t blocks, int64_t run);
// Writes the entries of tokens [t_begin, t_end) (sums: token t's `blocks` sums at t * blocks; the
// padding gets zeros), so threads can fill disjoint token ranges of one table.
void FillQ4_0Offsets(const int32_t* sums, int64_t blocks, int64_t n_tokens, int64_t run, int64_t t_begin,
                     int64_t t_end, int32_t* out);
// x with the table for all its tokens, built into *table from x.q8_0_sums: for a caller holding a
// single input (tests, benchmarks); the session fills its table on every thread with the above.
Activations WithQ4_0Offsets(const Activations& x, int64_t run, std::vector<int32_t>* table);

}  // namespace kestrel
