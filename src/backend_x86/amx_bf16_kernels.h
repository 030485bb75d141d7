// AMX-BF16 kernels (amx_bf16_kernels.cc, the only file compiled with the AMX-BF16 flags).
// Semantics are the KernelTable's (backend/kernels.h) with one stated exception: quantized
// products of MinTokens(dtype) tokens or more multiply bf16-rounded weights
// (q * d_w) by bf16-rounded f32 activations (x.f32) with f32 sums, so they agree with the
// reference within that rounding (at most 2^-9 of each factor), not bit for bit. Everything
// else, decode included, is amx_int8's.
#pragma once

#include <cstddef>

#include "backend/kernels.h"

namespace kestrel::amx_bf16 {

// Quantized products of fewer tokens go to amx_int8's kernels: with the weights as the A operand
// bf16 wins from 24 tokens for Q4_0 (1.08-1.32x at 24, 0.93x at 16) and from 8 for Q8_0 (1.07x
// at 8, 1.14x at 16), whose tile path in amx_int8 unpacks more per block (kestrel-bench pp at two
// threads against --backend amx_int8: bench/README.md).
inline constexpr int64_t MinTokens(DType dtype) {
  return dtype == DType::kQ4_0 ? 24 : dtype == DType::kQ8_0 ? 8 : 0;  // 0: not on this path
}

// A buffer of at least `bytes`, 64-byte aligned, owned by the calling thread and reused by its
// next call: where a caller passes no Activations::bf16 (tests, benchmarks), Matmul rounds the
// activations into it, laid out as the session lays them. In amx_bf16_backend.cc: a thread_local
// with a destructor has no place in an ISA unit.
void* StagingBuffer(size_t bytes);

// KernelTable::f32_to_bf16_tile: up to 16 rows rounded to bf16, nearest even (VCVTNE2PS2BF16),
// into one token tile of Activations::bf16.
void F32ToBf16Tile(const float* x, int64_t columns, int64_t n_tokens, uint16_t* out, int64_t block_stride);

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace kestrel::amx_bf16
