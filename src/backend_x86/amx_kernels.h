// AMX-INT8 kernels (amx_kernels.cc, the only file compiled with the AMX flags). Semantics are the
// KernelTable's (backend/kernels.h); quantized products are bit-identical to the generic
// reference. Only the matmul is AMX's: prompts of at least a few tokens with Q4_0 or Q8_0 weights
// run on the tile unit, everything else goes to avx512_vnni::Matmul.
#pragma once

#include "backend/kernels.h"

namespace kestrel::amx_int8 {

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace kestrel::amx_int8
