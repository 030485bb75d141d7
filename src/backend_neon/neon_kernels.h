// Kernels of the ARM backends. The plain NEON ones (ARMv8.0-A AdvSIMD, neon_kernels.cc, compiled with
// -march=armv8-a) also serve the dotprod backend, except its quantized matmul, the only code that
// needs ARMv8.2-A (neon_dotprod_kernels.cc). Declarations only: nothing inline crosses units.
#pragma once

#include <cstdint>

#include "backend/kernels.h"

namespace kestrel::neon {

void quantize_q8_0__neon(const float* x, BlockQ8_0* out, int64_t n);
// F32, F16 and BF16 weights (plain layout); accumulates in f32 with FMA (a stated tolerance).
void matmul_float__neon(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                        int64_t row_end);
void rmsnorm__neon(const float* x, const float* weight, float* out, int64_t n, float eps);
void rope__neon(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style);
void softmax__neon(float* x, int64_t n);
void silu_mul__neon(float* gate, const float* up, int64_t n);
void attention__neon(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
                     int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out,
                     bool streamed);
void embedding_row__neon(const MatrixView& w, int64_t row, float* out);
void f32_to_f16__neon(const float* x, uint16_t* out, int64_t n);
// What both ARM backends' matmuls read natively: F32/F16/BF16 plain, Q8_0 plain and q8_0x8,
// Q4_0 plain and q4_0x4. Anything else (a layout added later) is refused, never misread.
bool accepts__neon(DType dtype, Layout layout);

// Weights of any dtype and layout accepts__neon allows; quantized ones use x.q8_0.
void matmul__neon(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end);

}  // namespace kestrel::neon

namespace kestrel::neon_dotprod {

// As neon::matmul__neon, with SDOT block products. Only for CPUs with dotprod and fp16 arithmetic.
void matmul__neondot(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end);

}  // namespace kestrel::neon_dotprod
