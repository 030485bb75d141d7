// The activation blocks the vector Q8_0 quantizers cannot match the reference on, and their redo by
// the reference (QuantizeRowQ8_0).
#pragma once

#include <cstdint>

#include "format/dtype.h"

namespace kestrel {

// Requantizes with the reference every block of x (`blocks` blocks of 32 values) that holds a NaN
// or an infinity (or magnitudes whose sum overflows), or whose largest magnitude is under 1e-30 but
// not 0, where 1 / d may overflow: for those the reference's products can be NaN or infinite, and
// what its lround makes of them is the C library's. With `sums` and `scales`, also rewrites their
// entries for those blocks (SummarizeQ8_0Blocks). A kernel calls it after its vector pass when
// that pass saw such a block, so it is bit-identical to the reference for every input. Compiled
// with the baseline flags: the x86 kernels call it from units with their own.
void RequantizeSpecialQ8_0Blocks(const float* x, int64_t blocks, BlockQ8_0* out, int32_t* sums, float* scales);

}  // namespace kestrel
