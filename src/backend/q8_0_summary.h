// Per-block figures of quantized activations that several kernels need for every row tile: the
// sum of a block's quants (the x86 kernels multiply unsigned weights, so they subtract
// zero_point * sum) and its scale as f32. Computing them once per input, beside the quantization,
// spares each row chunk of each product from redoing it.
#pragma once

#include <cstdint>

#include "format/dtype.h"

namespace kestrel {

// sums[i] = the sum of blocks[i].qs, scales[i] = blocks[i].d as f32, for i in [0, count).
void SummarizeQ8_0Blocks(const BlockQ8_0* blocks, int64_t count, int32_t* sums, float* scales);

}  // namespace kestrel
