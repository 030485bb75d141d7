// AVX-512 VNNI kernels (defined in avx512_kernels.cc, avx512_attention.cc and
// avx512_activations.cc, the only files compiled with the AVX-512 flags). Semantics are the
// KernelTable's (backend/kernels.h); quantized products are bit-identical to the generic
// reference. Float weights go to avx2::Matmul; the weight formats read natively are avx2's and
// q4_0x4_lines (in memory only: the loader regroups q4_0x4 for these backends, format/layout.h).
#pragma once

#include "backend/kernels.h"

namespace kestrel::avx512_vnni {

// The run of blocks in which Matmul reads Activations::q4_0_offsets (its packed Q4_0 prefill
// chunks), for KernelTable::q4_0_offset_run.
constexpr int64_t kQ4_0OffsetRun = 32;

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);
// Whether Matmul reads this weight format natively: avx2::Accepts' formats and q4_0x4_lines.
bool Accepts(DType dtype, Layout layout);
// avx512_attention.cc (head sizes that are not a multiple of 16 go to avx2::Attention).
void Attention(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
               int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out, bool streamed);
void AttentionTokens(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_heads, const void* k, const void* v,
                     DType kv_dtype, int64_t kv_stride, int64_t n_positions, int64_t head_dim, float score_divisor,
                     float* scores, float* out, int64_t out_stride);
// avx512_activations.cc.
void Softmax(float* x, int64_t n);
void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n);
void QuantizeQ8_0Summarized(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n);
void SiluMul(float* gate, const float* up, int64_t n);
void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);

}  // namespace kestrel::avx512_vnni

// The same sources compiled for AVX2, with SIMDe emulating the AVX-512 intrinsics
// (avx512_simde_kernels.cc, avx512_simde_attention.cc and avx512_simde_activations.cc, built only
// with the test-only option KESTREL_SIMDE_BACKENDS), so the AVX-512 algorithms are tested on CPUs
// without AVX-512.
namespace kestrel::avx512_vnni_simde {

constexpr int64_t kQ4_0OffsetRun = avx512_vnni::kQ4_0OffsetRun;  // the same kernel source

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);
// Whether Matmul reads this weight format natively: avx2::Accepts' formats and q4_0x4_lines.
bool Accepts(DType dtype, Layout layout);
// avx512_attention.cc (head sizes that are not a multiple of 16 go to avx2::Attention).
void Attention(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
               int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out, bool streamed);
void AttentionTokens(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_heads, const void* k, const void* v,
                     DType kv_dtype, int64_t kv_stride, int64_t n_positions, int64_t head_dim, float score_divisor,
                     float* scores, float* out, int64_t out_stride);
// avx512_activations.cc.
void Softmax(float* x, int64_t n);
void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n);
void QuantizeQ8_0Summarized(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n);
void SiluMul(float* gate, const float* up, int64_t n);
void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);

}  // namespace kestrel::avx512_vnni_simde
