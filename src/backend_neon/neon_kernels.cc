// Kernels of the plain NEON backend ("neon"; registered in neon_backends.cc): ARMv8.0-A AdvSIMD only, so it runs on every 64-bit ARM CPU,
// Cortex-A53 included. Int8 block products use widening multiplies (SMULL/SMLAL) and pairwise
// widening adds; float math is f32 NEON. Compiled with -march=armv8-a (sources.cmake).
#include "backend_neon/neon_kernels.h"

#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "format/layout.h"
#include "backend_neon/neon_quant_matmul.h"

namespace kestrel::neon {
namespace {

// ---- Quantized block products (exact int32 for any int8 inputs, including -128) ----------------

// 16 products of int8 pairs folded into int16x8 lanes: each lane sums at most two products of
// |nibble - 8| <= 8 and |a| <= 128, far inside int16.
inline int16x8_t Q4Products(int8x16_t lo, int8x16_t hi, int8x16_t a_lo, int8x16_t a_hi) {
  int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(a_lo));
  p = vmlal_high_s8(p, lo, a_lo);
  p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(a_hi));
  return vmlal_high_s8(p, hi, a_hi);
}

// Nibbles of a Q4_0 quant vector as signed values in [-8, 7].
inline void UnpackQ4(uint8x16_t q, int8x16_t* lo, int8x16_t* hi) {
  const int8x16_t eight = vdupq_n_s8(8);
  *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
  *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
}

// Four int16x8 vectors, one per row, reduced to the four rows' int32 totals. Intermediate lanes
// hold at most 16 products of magnitude <= 1024 (Q4_0 x Q8_0), so int16 is exact.
inline int32x4_t ReduceRows4(int16x8_t r0, int16x8_t r1, int16x8_t r2, int16x8_t r3) {
  return vpaddlq_s16(vpaddq_s16(vpaddq_s16(r0, r1), vpaddq_s16(r2, r3)));
}

// 16 int8 products widened to int32 partial sums (a single product per int16 lane, so -128 * -128
// cannot overflow).
inline int32x4_t Q8Products(int32x4_t acc, int8x16_t w, int8x16_t a) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
  return vpadalq_s16(acc, vmull_high_s8(w, a));
}

// Q8_0 weights, plain layout, 4 rows per group.
struct MatmulQ8_0Plain : PlainQ8_0Loader {
  static constexpr int kMcaId = 1;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int32x4_t r[4];
    for (int i = 0; i < 4; ++i) r[i] = Q8Products(Q8Products(vdupq_n_s32(0), w.q[i][0], a0), w.q[i][1], a1);
    sums[0] = vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3]));
  }
};

// Q4_0 weights, plain layout, 4 rows per group.
struct MatmulQ4_0Plain : PlainQ4_0Loader<UnpackQ4> {
  static constexpr int kMcaId = 2;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int16x8_t r[4];
    for (int i = 0; i < 4; ++i) r[i] = Q4Products(w.lo[i], w.hi[i], a0, a1);
    sums[0] = ReduceRows4(r[0], r[1], r[2], r[3]);
  }
};

// Q4_0 weights in q4_0x4 tiles: per block column, 4 scales then 16-byte vectors k = 0..3 holding
// bytes 4k..4k+3 of rows 0..3. Two kernels read them (llvm-mca estimates in bench/arm-mca.md):
//
// MatmulQ4_0x4Lanes, for decode (1-3 tokens): low nibbles of vector k meet activation bytes
// 4k..4k+3 repeated in every 32-bit lane (one 4-byte load each), high nibbles bytes 16+4k..; no
// rearranging of the weights, which a single token could not repay.
struct MatmulQ4_0x4Lanes : TiledQ4_0x4Loader<UnpackQ4> {
  static constexpr int kMcaId = 5;
  // Activation bytes p[0..3] in all four 32-bit lanes. Loaded this way rather than as two full
  // vectors with lanes duplicated afterwards: llvm-mca's Cortex-A53 estimate for 4 tokens fell
  // from about 25 to 15 cycles per 32 weights (the duplicates waited on the vector loads).
  static int8x16_t Load4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
  }
  template <int k>
  static void Step(const Weights& w, const int8_t* a, int16x8_t* rows01, int16x8_t* rows23) {
    const int8x16_t lo_a = Load4(a + 4 * k), hi_a = Load4(a + 16 + 4 * k);
    *rows01 = vmlal_s8(*rows01, vget_low_s8(w.lo[k]), vget_low_s8(lo_a));
    *rows01 = vmlal_s8(*rows01, vget_low_s8(w.hi[k]), vget_low_s8(hi_a));
    *rows23 = vmlal_high_s8(*rows23, w.lo[k], lo_a);
    *rows23 = vmlal_high_s8(*rows23, w.hi[k], hi_a);
  }
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    // Lanes 0-3 of rows01 are row 0, 4-7 row 1; each lane sums 8 products (<= 8192).
    int16x8_t rows01 = vdupq_n_s16(0), rows23 = vdupq_n_s16(0);
    Step<0>(w, a, &rows01, &rows23);
    Step<1>(w, a, &rows01, &rows23);
    Step<2>(w, a, &rows01, &rows23);
    Step<3>(w, a, &rows01, &rows23);
    sums[0] = vpaddlq_s16(vpaddq_s16(rows01, rows23));
  }
};

// MatmulQ4_0x4Rows, for prefill (4 tokens and more): a 4x4 transpose of 32-bit chunks gives each
// row's 16 quant bytes back, once per block for every token, and the plain kernel's products
// follow (Cortex-A53 estimate for 4 tokens: about 11 cycles per 32 weights, against 15 above; for
// one token the transpose costs more than it saves).
struct MatmulQ4_0x4Rows : TiledQ4_0x4Loader<UnpackQ4> {
  static constexpr int kMcaId = 3;
  // Hides the loader's Load: the same tile, transposed back to rows.
  static void Load(const Source& s, int64_t b, Weights* w, float32x4_t* d_w) {
    const uint8_t* group = s.tile + b * kGroupBytes;
    d_w[0] = LoadFp16x4(group);
    int32x4_t c[4];
    for (int k = 0; k < 4; ++k) c[k] = vreinterpretq_s32_u8(vld1q_u8(group + 8 + 16 * k));
    // t0: rows 0 and 2, chunks 0-1; t1: rows 1 and 3, chunks 0-1; t2, t3: the same for chunks 2-3.
    const int64x2_t t0 = vreinterpretq_s64_s32(vtrn1q_s32(c[0], c[1]));
    const int64x2_t t1 = vreinterpretq_s64_s32(vtrn2q_s32(c[0], c[1]));
    const int64x2_t t2 = vreinterpretq_s64_s32(vtrn1q_s32(c[2], c[3]));
    const int64x2_t t3 = vreinterpretq_s64_s32(vtrn2q_s32(c[2], c[3]));
    const int64x2_t rows[4] = {vtrn1q_s64(t0, t2), vtrn1q_s64(t1, t3), vtrn2q_s64(t0, t2), vtrn2q_s64(t1, t3)};
    for (int i = 0; i < 4; ++i) UnpackQ4(vreinterpretq_u8_s64(rows[i]), &w->lo[i], &w->hi[i]);
  }
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) { MatmulQ4_0Plain::Dot(w, a, sums); }
};

// Q8_0 weights in q8_0x8 tiles (see TiledQ8_0x8Loader): the products of row 2j's and row 2j+1's
// 8-byte chunks go to separate int32 accumulators, widened as in Q8Products.
struct MatmulQ8_0x8 : TiledQ8_0x8Loader {
  static constexpr int kMcaId = 4;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    int32x4_t r[8];
    for (int i = 0; i < 8; ++i) r[i] = vdupq_n_s32(0);
    for (int k = 0; k < 4; ++k) {
      const int8x8_t a8 = vld1_s8(a + 8 * k);
      const int8x16_t a16 = vcombine_s8(a8, a8);
      for (int j = 0; j < 4; ++j) {
        const int8x16_t q = vld1q_s8(w.quants + 64 * k + 16 * j);
        r[2 * j] = vpadalq_s16(r[2 * j], vmull_s8(vget_low_s8(q), a8));
        r[2 * j + 1] = vpadalq_s16(r[2 * j + 1], vmull_high_s8(q, a16));
      }
    }
    sums[0] = vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3]));
    sums[1] = vpaddq_s32(vpaddq_s32(r[4], r[5]), vpaddq_s32(r[6], r[7]));
  }
};

// ---- Float weights -------------------------------------------------------------------------

// Widens 4 weights of a row to f32.
struct LoadF32 {
  static float32x4_t Vector(const uint8_t* p) {
    float v[4];
    std::memcpy(v, p, sizeof(v));
    return vld1q_f32(v);
  }
  static float Scalar(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static constexpr int kBytes = 4;
};
struct LoadF16 {
  static float32x4_t Vector(const uint8_t* p) {
    uint16_t h[4];
    std::memcpy(h, p, sizeof(h));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  }
  static float Scalar(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return Fp16ToFp32(h);
  }
  static constexpr int kBytes = 2;
};
struct LoadBF16 {
  static float32x4_t Vector(const uint8_t* p) {
    uint16_t h[4];
    std::memcpy(h, p, sizeof(h));
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16));
  }
  static float Scalar(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return Bf16ToFp32(h);
  }
  static constexpr int kBytes = 2;
};

// One weight row against kTokens activation rows: each weight vector is loaded once and used for
// every token; two accumulators per token hide the FMA latency.
template <typename L, int kTokens>
void RowDot(const uint8_t* row, const float* x, int64_t x_stride, int64_t columns, float* y, int64_t y_stride) {
  float32x4_t acc0[kTokens], acc1[kTokens];
  for (int t = 0; t < kTokens; ++t) acc0[t] = acc1[t] = vdupq_n_f32(0.0f);
  int64_t c = 0;
  for (; c + 8 <= columns; c += 8) {
    const float32x4_t w0 = L::Vector(row + c * L::kBytes), w1 = L::Vector(row + (c + 4) * L::kBytes);
    for (int t = 0; t < kTokens; ++t) {
      acc0[t] = vfmaq_f32(acc0[t], w0, vld1q_f32(x + t * x_stride + c));
      acc1[t] = vfmaq_f32(acc1[t], w1, vld1q_f32(x + t * x_stride + c + 4));
    }
  }
  for (; c + 4 <= columns; c += 4) {
    const float32x4_t w0 = L::Vector(row + c * L::kBytes);
    for (int t = 0; t < kTokens; ++t) acc0[t] = vfmaq_f32(acc0[t], w0, vld1q_f32(x + t * x_stride + c));
  }
  for (int t = 0; t < kTokens; ++t) {
    float sum = vaddvq_f32(vaddq_f32(acc0[t], acc1[t]));
    for (int64_t i = c; i < columns; ++i) sum += L::Scalar(row + i * L::kBytes) * x[t * x_stride + i];
    y[t * y_stride] = sum;
  }
}

template <typename L>
void MatmulFloatRows(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = bytes + r * w.columns * L::kBytes;
    int64_t t = 0;
    for (; t + 4 <= x.n_tokens; t += 4) {
      RowDot<L, 4>(row, x.f32 + t * x.columns, x.columns, w.columns, y + t * y_stride + r, y_stride);
    }
    for (; t < x.n_tokens; ++t) RowDot<L, 1>(row, x.f32 + t * x.columns, x.columns, w.columns, y + t * y_stride + r, y_stride);
  }
}

}  // namespace

void matmul__neon(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0:
      if (w.layout == Layout::kQ8_0x8) return MatmulQuantized<MatmulQ8_0x8>(w, x, y, y_stride, row_begin, row_end);
      return MatmulQuantized<MatmulQ8_0Plain>(w, x, y, y_stride, row_begin, row_end);
    case DType::kQ4_0:
      if (w.layout == Layout::kQ4_0x4) {
        if (x.n_tokens >= 4) return MatmulQuantized<MatmulQ4_0x4Rows>(w, x, y, y_stride, row_begin, row_end);
        return MatmulQuantized<MatmulQ4_0x4Lanes>(w, x, y, y_stride, row_begin, row_end);
      }
      return MatmulQuantized<MatmulQ4_0Plain>(w, x, y, y_stride, row_begin, row_end);
    default: return matmul_float__neon(w, x, y, y_stride, row_begin, row_end);
  }
}

namespace {

// ---- exp for softmax and SiLU ----------------------------------------------------------------

// e^x to about 2 ulp (Cephes' expf polynomial). NaN stays NaN (FMIN/FMAX propagate it), +Inf and
// overflow give +Inf, -Inf and underflow give 0; results that are subnormal are kept (2^n is
// applied in two steps so the scale itself stays normal).
inline float32x4_t Exp(float32x4_t x) {
  const float32x4_t hi = vdupq_n_f32(88.72283935546875f), lo = vdupq_n_f32(-103.972084045410f);
  const float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t n = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  const float32x4_t r2 = vmulq_f32(r, r);
  const float32x4_t e = vaddq_f32(vfmaq_f32(r, p, r2), vdupq_n_f32(1.0f));
  // 2^n = 2^n1 * 2^n2 with n1 = n >> 1, n2 = n - n1, both in the normal exponent range.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  float32x4_t y = vmulq_f32(vmulq_f32(e, s1), s2);
  y = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), y);
  return vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), y);
}

// Applies a vector function to n floats in place, the tail through a padded vector.
template <typename Fn>
inline void MapInPlace(float* x, int64_t n, Fn fn) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, fn(vld1q_f32(x + i), i));
  if (i < n) {
    float tmp[4] = {0, 0, 0, 0};
    std::memcpy(tmp, x + i, static_cast<size_t>(n - i) * sizeof(float));
    vst1q_f32(tmp, fn(vld1q_f32(tmp), i));
    std::memcpy(x + i, tmp, static_cast<size_t>(n - i) * sizeof(float));
  }
}

inline float32x4_t LoadTail(const float* p, int64_t count) {
  float tmp[4] = {0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(count) * sizeof(float));
  return vld1q_f32(tmp);
}

}  // namespace

// ---- Shared with the dotprod backend (see neon_kernels.h) ------------------------------------

// FCVTN rounds as FPCR says: to nearest even unless a program changed it (as x86's MXCSR would
// change F16C's, which is why that kernel names its rounding instead).
void f32_to_f16__neon(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  if (i == n) return;
  float rest[4] = {};
  uint16_t halves[4];
  for (int64_t j = i; j < n; ++j) rest[j - i] = x[j];
  vst1_u16(halves, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(rest))));
  for (int64_t j = i; j < n; ++j) out[j] = halves[j - i];
}

void quantize_q8_0__neon(const float* x, BlockQ8_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlockSize; ++b) {
    const float* v = x + b * kQuantBlockSize;
    float32x4_t q[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; ++i) {
      q[i] = vld1q_f32(v + 4 * i);
      amax = vmaxq_f32(amax, vabsq_f32(q[i]));  // FMAX: a NaN anywhere makes amax NaN
    }
    const float m = vmaxvq_f32(amax);
    // Bit-identity argument: for finite inputs with amax >= 1e-30 (or 0), d and id are the same IEEE
    // operations as the reference, |v * id| <= 127 + a few ulp, and FCVTAS rounds half away from zero
    // exactly as lround does. NaN, Inf and tiny non-zero blocks (whose id may overflow and whose
    // lround result is implementation-defined) take the reference itself.
    if (!(m < INFINITY) || (m != 0.0f && m < 1e-30f)) {
      QuantizeRowQ8_0(v, out + b, kQuantBlockSize);
      continue;
    }
    const float d = m / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int i = 0; i < 8; i += 2) {
      const int32x4_t r0 = vcvtaq_s32_f32(vmulq_n_f32(q[i], id));
      const int32x4_t r1 = vcvtaq_s32_f32(vmulq_n_f32(q[i + 1], id));
      const int16x8_t h = vcombine_s16(vmovn_s32(r0), vmovn_s32(r1));
      vst1_s8(out[b].qs + 4 * i, vmovn_s16(h));
    }
  }
}

void matmul_float__neon(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                        int64_t row_end) {
  switch (w.dtype) {
    case DType::kF32: return MatmulFloatRows<LoadF32>(w, x, y, y_stride, row_begin, row_end);
    case DType::kF16: return MatmulFloatRows<LoadF16>(w, x, y, y_stride, row_begin, row_end);
    case DType::kBF16: return MatmulFloatRows<LoadBF16>(w, x, y, y_stride, row_begin, row_end);
    default: return;  // quantized weights never reach here (accepts__neon and the callers' dispatch)
  }
}

void rmsnorm__neon(const float* x, const float* weight, float* out, int64_t n, float eps) {
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
    acc0 = vfmaq_f32(acc0, a, a);
    acc1 = vfmaq_f32(acc1, b, b);
  }
  float ss = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const float32x4_t vinv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(weight + i), vmulq_f32(vinv, vld1q_f32(x + i))));
  for (; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

void rope__neon(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    // v0 * c - v1 * s and v0 * s + v1 * c, rounded as the reference does (no FMA).
    for (; i + 4 <= half; i += 4) {
      const float32x4_t c = vld1q_f32(cos + i), s = vld1q_f32(sin + i);
      if (style == RopeStyle::kInterleaved) {
        float32x4x2_t p = vld2q_f32(v + 2 * i);
        const float32x4_t v0 = p.val[0], v1 = p.val[1];
        p.val[0] = vsubq_f32(vmulq_f32(v0, c), vmulq_f32(v1, s));
        p.val[1] = vaddq_f32(vmulq_f32(v0, s), vmulq_f32(v1, c));
        vst2q_f32(v + 2 * i, p);
      } else {
        float* a = v + i;
        float* b = a + half;
        const float32x4_t v0 = vld1q_f32(a), v1 = vld1q_f32(b);
        vst1q_f32(a, vsubq_f32(vmulq_f32(v0, c), vmulq_f32(v1, s)));
        vst1q_f32(b, vaddq_f32(vmulq_f32(v0, s), vmulq_f32(v1, c)));
      }
    }
    for (; i < half; ++i) {
      const int64_t a = style == RopeStyle::kInterleaved ? 2 * i : i;
      const int64_t b = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * cos[i] - v1 * sin[i];
      v[b] = v0 * sin[i] + v1 * cos[i];
    }
  }
}

void softmax__neon(float* x, int64_t n) {
  if (n <= 0) return;
  // FMAX propagates NaN; the tail is padded with x[0], which never changes the maximum.
  float32x4_t vmax = vdupq_n_f32(x[0]);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(x + i));
  float max = vmaxvq_f32(vmax);
  for (; i < n; ++i) max = x[i] > max || std::isnan(x[i]) ? x[i] : max;
  const float32x4_t m = vdupq_n_f32(max);
  float32x4_t sum = vdupq_n_f32(0.0f);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t e = Exp(vsubq_f32(vld1q_f32(x + i), m));
    vst1q_f32(x + i, e);
    sum = vaddq_f32(sum, e);
  }
  float total = vaddvq_f32(sum);
  if (i < n) {
    float tmp[4];
    vst1q_f32(tmp, Exp(vsubq_f32(LoadTail(x + i, n - i), m)));
    for (int64_t j = 0; i + j < n; ++j) {
      x[i + j] = tmp[j];
      total += tmp[j];
    }
  }
  const float32x4_t vtotal = vdupq_n_f32(total);
  MapInPlace(x, n, [&](float32x4_t v, int64_t) { return vdivq_f32(v, vtotal); });
}

void silu_mul__neon(float* gate, const float* up, int64_t n) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t sig = vdivq_f32(one, vaddq_f32(one, Exp(vnegq_f32(g))));
    vst1q_f32(gate + i, vmulq_f32(vmulq_f32(g, sig), vld1q_f32(up + i)));
  }
  if (i < n) {
    const float32x4_t g = LoadTail(gate + i, n - i), u = LoadTail(up + i, n - i);
    const float32x4_t sig = vdivq_f32(one, vaddq_f32(one, Exp(vnegq_f32(g))));
    float tmp[4];
    vst1q_f32(tmp, vmulq_f32(vmulq_f32(g, sig), u));
    std::memcpy(gate + i, tmp, static_cast<size_t>(n - i) * sizeof(float));
  }
}

namespace {

struct KvF32 {
  static float32x4_t Load4(const uint8_t* row, int64_t i) { return vld1q_f32(reinterpret_cast<const float*>(row) + i); }
  static float Load1(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
  static constexpr int64_t kBytes = 4;
};
struct KvF16 {
  static float32x4_t Load4(const uint8_t* row, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static float Load1(const uint8_t* row, int64_t i) { return Fp16ToFp32(reinterpret_cast<const uint16_t*>(row)[i]); }
  static constexpr int64_t kBytes = 2;
};

// Positions of V each head of a group sums while they sit in L1 (32 rows of 128 f32 = 16 KB: the
// Cortex-A53's L1 may be as small as 8 KB, so this leans on its L2).
constexpr int64_t kValueBlock = 32;

// Scores four positions at a time (four independent FMA chains sharing each load of q), every head
// of the group while the four key rows are in L1; the V sum takes positions in blocks that every
// head uses before the next is read, with eight accumulators (32 dimensions) per pass; between
// blocks the sums wait in `out`, so each output still adds its positions in order. A single chain
// per head, as before, waits the full FMA latency at every step, which an in-order core
// (Cortex-A53) cannot hide, and a pass per head read the group's keys and values once per head.
template <typename Kv>
void AttentionRows(const float* q, int64_t n_heads, const uint8_t* k, const uint8_t* v, int64_t row_bytes,
                   int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out) {
  const int64_t vec_dim = head_dim / 4 * 4;
  auto dot_tail = [&](const float* qh, const uint8_t* kt, float dot) {
    for (int64_t i = vec_dim; i < head_dim; ++i) dot += qh[i] * Kv::Load1(kt, i);
    return dot;
  };
  int64_t t = 0;
  for (; t + 4 <= n_positions; t += 4) {
    const uint8_t* k0 = k + t * row_bytes;
    const uint8_t *k1 = k0 + row_bytes, *k2 = k1 + row_bytes, *k3 = k2 + row_bytes;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q + h * head_dim;
      float* sh = scores + h * n_positions;
      float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t i = 0; i < vec_dim; i += 4) {
        const float32x4_t qi = vld1q_f32(qh + i);
        a0 = vfmaq_f32(a0, qi, Kv::Load4(k0, i));
        a1 = vfmaq_f32(a1, qi, Kv::Load4(k1, i));
        a2 = vfmaq_f32(a2, qi, Kv::Load4(k2, i));
        a3 = vfmaq_f32(a3, qi, Kv::Load4(k3, i));
      }
      sh[t] = dot_tail(qh, k0, vaddvq_f32(a0)) / score_divisor;
      sh[t + 1] = dot_tail(qh, k1, vaddvq_f32(a1)) / score_divisor;
      sh[t + 2] = dot_tail(qh, k2, vaddvq_f32(a2)) / score_divisor;
      sh[t + 3] = dot_tail(qh, k3, vaddvq_f32(a3)) / score_divisor;
    }
  }
  for (; t < n_positions; ++t) {
    const uint8_t* kt = k + t * row_bytes;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q + h * head_dim;
      float32x4_t acc = vdupq_n_f32(0.0f);
      for (int64_t i = 0; i < vec_dim; i += 4) acc = vfmaq_f32(acc, vld1q_f32(qh + i), Kv::Load4(kt, i));
      scores[h * n_positions + t] = dot_tail(qh, kt, vaddvq_f32(acc)) / score_divisor;
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) softmax__neon(scores + h * n_positions, n_positions);
  for (int64_t p0 = 0; p0 < n_positions; p0 += kValueBlock) {
    const int64_t p1 = n_positions - p0 < kValueBlock ? n_positions : p0 + kValueBlock;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* sh = scores + h * n_positions;
      float* oh = out + h * head_dim;
      int64_t i = 0;
      for (; i + 32 <= vec_dim; i += 32) {
        float32x4_t acc[8];
        for (int j = 0; j < 8; ++j) acc[j] = p0 == 0 ? vdupq_n_f32(0.0f) : vld1q_f32(oh + i + 4 * j);
        for (int64_t p = p0; p < p1; ++p) {
          const uint8_t* vt = v + p * row_bytes;
          const float s = sh[p];
          for (int j = 0; j < 8; ++j) acc[j] = vfmaq_n_f32(acc[j], Kv::Load4(vt, i + 4 * j), s);
        }
        for (int j = 0; j < 8; ++j) vst1q_f32(oh + i + 4 * j, acc[j]);
      }
      for (; i < vec_dim; i += 4) {
        float32x4_t acc = p0 == 0 ? vdupq_n_f32(0.0f) : vld1q_f32(oh + i);
        for (int64_t p = p0; p < p1; ++p) acc = vfmaq_n_f32(acc, Kv::Load4(v + p * row_bytes, i), sh[p]);
        vst1q_f32(oh + i, acc);
      }
      for (; i < head_dim; ++i) {
        float acc = p0 == 0 ? 0.0f : oh[i];
        for (int64_t p = p0; p < p1; ++p) acc += sh[p] * Kv::Load1(v + p * row_bytes, i);
        oh[i] = acc;
      }
    }
  }
}

}  // namespace

void attention__neon(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
                     int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out,
                     bool /*streamed*/) {
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  if (kv_dtype == DType::kF16) {
    AttentionRows<KvF16>(q, n_heads, kb, vb, kv_stride * KvF16::kBytes, n_positions, head_dim, score_divisor, scores,
                         out);
  } else {
    AttentionRows<KvF32>(q, n_heads, kb, vb, kv_stride * KvF32::kBytes, n_positions, head_dim, score_divisor, scores,
                         out);
  }
}

void embedding_row__neon(const MatrixView& w, int64_t row, float* out) {
  DequantizeMatrixRow(w.dtype, w.layout, w.data, w.columns, row, out);
}

bool accepts__neon(DType dtype, Layout layout) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return layout == Layout::kPlain;
    case DType::kQ8_0: return layout == Layout::kPlain || layout == Layout::kQ8_0x8;
    case DType::kQ4_0: return layout == Layout::kPlain || layout == Layout::kQ4_0x4;
  }
  return false;
}

}  // namespace kestrel::neon
