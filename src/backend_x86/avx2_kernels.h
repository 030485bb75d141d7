// AVX2 + FMA + F16C kernels (defined in avx2_kernels.cc, the only file compiled with those flags).
// Semantics are the KernelTable's (backend/kernels.h); quantized products are bit-identical to
// the generic reference.
#pragma once

#include "backend/kernels.h"

namespace kestrel::avx2 {

void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n);
void QuantizeQ8_0Summarized(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n);
void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);
void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);
void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style);
void Softmax(float* x, int64_t n);
void SiluMul(float* gate, const float* up, int64_t n);
void Attention(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
               int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out, bool streamed);
void F32ToF16(const float* x, uint16_t* out, int64_t n);
// Whether Matmul reads this weight format natively.
bool Accepts(DType dtype, Layout layout);

}  // namespace kestrel::avx2

// avx_vnni_kernels.cc: this file's kernels compiled again with AVX-VNNI's byte products (the
// backend "avx_vnni" takes its Matmul; its other kernels have no byte products, so it uses avx2's).
namespace kestrel::avx_vnni {

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace kestrel::avx_vnni
