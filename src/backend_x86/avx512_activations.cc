// AVX-512 softmax, SiLU gating, RMSNorm and activation quantization (the KernelTable's `softmax`,
// `silu_mul`, `rmsnorm`, `quantize_q8_0` and `quantize_q8_0_summarized`). Compiled with the AVX-512
// flags; avx512_simde_activations.cc compiles it again for AVX2 with SIMDe (tests).
//
// Why: in a long prompt's prefill the softmax over each token's scores was a fifth of the attention
// time with the AVX2 kernel's 8-float exp (perf, pp1024). The exp is the AVX2 kernel's (the same
// reduction and polynomial, exp_polynomial.h) on 16 floats, with 2^n applied by VSCALEFPS,
// which also gives expf's subnormal results where the AVX2 kernel flushes them to zero. Tails go
// through a 16-float buffer, so no libm function is called from this unit (an inline library
// function compiled with AVX-512 flags could become the copy the linker keeps for everyone).
#include <cstdint>
#include <cstring>

#include "backend/q8_0_special_blocks.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_kernels.h"
#include "backend_x86/exp_polynomial.h"

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

// exp(x) for 16 floats: x = n * ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for e^r, then
// e^r * 2^n. x is first clamped to [-110, 89], beyond which expf is 0 or inf anyway and where the
// reduction would turn an infinite x into NaN; the constant goes first in min and max so that a NaN
// x stays NaN.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-110.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  using namespace exp_polynomial;
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(kLn2High)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Low)));
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

inline float Max16(__m512 a) {
  const __m512 halves = _mm512_max_ps(a, ShuffleLanes<_MM_SHUFFLE(3, 2, 3, 2)>(a, a));
  const __m256 h = _mm512_castps512_ps256(halves);
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// The last n % 16 values of x (from `from`) in a full vector, the rest `fill`.
struct Tail {
  float v[16];
  Tail(const float* x, int64_t from, int64_t n, float fill) {
    for (int64_t j = 0; j < 16; ++j) v[j] = from + j < n ? x[from + j] : fill;
  }
  __m512 Load() const { return _mm512_loadu_ps(v); }
  void StoreTo(float* x, int64_t from, int64_t n, __m512 value) {
    _mm512_storeu_ps(v, value);
    for (int64_t j = 0; from + j < n; ++j) x[from + j] = v[j];
  }
};

// lround of 16 floats of magnitude at most 200 (half away from zero), exactly: add 0.5 - 2^-25
// with the value's sign, then truncate. The sum's own rounding carries exact halves up (x.5 +
// 0.49999997 rounds to x + 1) and nothing below them (0.49999997 + 0.49999997 stays under 1);
// checked for every float in [0, 200] (a quant's x * id is at most 127 and a little). Half the
// instructions of truncating and then correcting by the dropped fraction (quantization 1.6x as
// fast, kernels bench). Blocks whose products could be NaN or infinite (a non-finite input, or an
// amax under 1e-30, where 1 / d may overflow) are redone by the reference (Quantize).
inline __m512i RoundHalfAway(__m512 v) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 half = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_castps_si512(_mm512_set1_ps(0.49999997f))));
  return TruncateToInt(_mm512_add_ps(v, half));
}

}  // namespace

// Eight blocks at a time, so that their eight maxima come out of one transposing reduction
// (Reduce8) and their scales and inverses out of one division each, instead of a horizontal
// maximum and two scalar divisions per block in a row (the AVX2 kernel's ~12 ns a block).
// The reference's arithmetic (format/dtype.cc): d = amax / 127, id = 1 / d (0 when d is 0), quants
// lround(x * id), d stored as fp16 rounded to nearest even; NaN elements are left out of the
// maximum as std::fmax leaves them out. Bit-identical to the reference for every input (the blocks
// where this arithmetic could not be go to the reference itself, below).
namespace {

// kSummarize: also each block's quant sum (the rounded values, within +-127 and so as stored, in
// one transposing reduction for the eight blocks) and its stored scale as f32. Blocks with a NaN,
// an infinity or an amax under 1e-30 (but not 0) are redone by the reference after the vector pass,
// sums and scales included, as in the NEON kernel: there lround's result for a NaN or infinite
// product is the C library's.
template <bool kSummarize>
void Quantize(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n) {
  const int64_t blocks = n / 32;
  const __m512 zero = _mm512_setzero_ps();
  const auto max = [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); };
  const auto add_int = [](__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  };
  bool any_special = false;
  for (int64_t b0 = 0; b0 < blocks; b0 += 8) {
    const int count = blocks - b0 < 8 ? static_cast<int>(blocks - b0) : 8;
    __m512 lo[8], hi[8], amax[8];
    const __m512 inf = _mm512_set1_ps(__builtin_inff());
    for (int j = 0; j < 8; ++j) {
      lo[j] = j < count ? _mm512_loadu_ps(x + (b0 + j) * 32) : zero;
      hi[j] = j < count ? _mm512_loadu_ps(x + (b0 + j) * 32 + 16) : zero;
      // MAXPS returns its second operand when either is NaN: the running maximum survives a NaN.
      amax[j] = _mm512_max_ps(_mm512_abs_ps(hi[j]), _mm512_max_ps(_mm512_abs_ps(lo[j]), zero));
      // A NaN or an infinity makes the sum of magnitudes NaN or infinite (so may two values near
      // FLT_MAX, which the reference then quantizes as well).
      const __m512 magnitudes = _mm512_add_ps(_mm512_abs_ps(lo[j]), _mm512_abs_ps(hi[j]));
      any_special |= _mm512_cmp_ps_mask(magnitudes, inf, _CMP_LT_OQ) != 0xFFFF;
    }
    const __m256 block_max = Reduce8(amax, max);
    // And blocks whose largest magnitude is under 1e-30 but not 0, where 1 / d may overflow.
    any_special |= _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(block_max, _mm256_set1_ps(1e-30f), _CMP_LT_OQ),
                                                    _mm256_cmp_ps(block_max, _mm256_setzero_ps(), _CMP_NEQ_UQ))) != 0;
    const __m256 d = _mm256_div_ps(block_max, _mm256_set1_ps(127.0f));
    const __m256 nonzero = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ);  // 1 / 0 masked to 0
    alignas(32) float inverse[8];
    _mm256_store_ps(inverse, _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(1.0f), d)));
    const __m128i d_half = _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT);
    alignas(16) uint16_t halves[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(halves), d_half);
    __m512 quant_sums[8];
    for (int j = 0; j < count; ++j) {
      BlockQ8_0& block = out[b0 + j];
      block.d = halves[j];
      const __m512 id = _mm512_set1_ps(inverse[j]);
      const __m512i r_lo = RoundHalfAway(_mm512_mul_ps(lo[j], id));
      const __m512i r_hi = RoundHalfAway(_mm512_mul_ps(hi[j], id));
      const __m128i q_lo = _mm512_cvtsepi32_epi8(r_lo);
      const __m128i q_hi = _mm512_cvtsepi32_epi8(r_hi);
      std::memcpy(block.qs, &q_lo, 16);
      std::memcpy(block.qs + 16, &q_hi, 16);
      if constexpr (kSummarize) quant_sums[j] = _mm512_castsi512_ps(_mm512_add_epi32(r_lo, r_hi));
    }
    if constexpr (kSummarize) {
      for (int j = count; j < 8; ++j) quant_sums[j] = zero;
      alignas(32) int32_t block_sums[8];
      alignas(32) float block_scales[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(block_sums), _mm256_castps_si256(Reduce8(quant_sums, add_int)));
      _mm256_store_ps(block_scales, _mm256_cvtph_ps(d_half));
      std::memcpy(sums + b0, block_sums, count * sizeof(int32_t));
      std::memcpy(scales + b0, block_scales, count * sizeof(float));
    }
  }
  // The special blocks again, by the reference itself: the C library's lround decides what a NaN
  // or infinite product becomes, so every backend is bit-identical to it for every input (the NEON
  // kernel does the same). Outside the loop above, whose constants a call would push out of
  // registers.
  if (any_special) RequantizeSpecialQ8_0Blocks(x, blocks, out, sums, scales);
}

}  // namespace

void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n) { Quantize<false>(x, out, nullptr, nullptr, n); }

void QuantizeQ8_0Summarized(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n) {
  Quantize<true>(x, out, sums, scales, n);
}

void Softmax(float* x, int64_t n) {
  const int64_t full = n / 16 * 16;
  const float kNegInf = -__builtin_inff();
  // The maximum; a NaN anywhere makes every output NaN below, whichever maximum this finds.
  __m512 vmax = _mm512_set1_ps(kNegInf);
  for (int64_t i = 0; i < full; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  float max = Max16(vmax);
  for (int64_t i = full; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m512 vmax_all = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < full; i += 16) {
    const __m512 e = Exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax_all));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (full < n) {
    Tail tail(x, full, n, kNegInf);  // the fill's exp is 0
    const __m512 e = Exp(_mm512_sub_ps(tail.Load(), vmax_all));
    tail.StoreTo(x, full, n, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const float sum = Sum16(vsum);
  const __m512 vdiv = _mm512_set1_ps(sum);
  for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), vdiv));
  for (int64_t i = full; i < n; ++i) x[i] /= sum;
}

// 16 lanes and four accumulators (64 values a step), the tail through a zero-filled buffer: 2048
// values 1.2x as fast as the AVX2 kernel (kernels bench, rmsnorm/2048); a 128-value head (Qwen3's
// query and key norms, 24 calls a token and layer) is mostly the reduction, square root and
// division either way.
void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  const int64_t full = n / 16 * 16;
  int64_t i = 0;
  for (; i + 64 <= full; i += 64) {
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      acc[j] = _mm512_fmadd_ps(v, v, acc[j]);
    }
  }
  for (int j = 0; i < full; i += 16, ++j) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc[j] = _mm512_fmadd_ps(v, v, acc[j]);
  }
  if (full < n) {
    const __m512 v = Tail(x, full, n, 0.0f).Load();
    acc[3] = _mm512_fmadd_ps(v, v, acc[3]);
  }
  const float ss = Sum16(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  const float mean = ss / static_cast<float>(n) + eps;
  const float inv = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean)));
  const __m512 vinv = _mm512_set1_ps(inv);
  for (i = 0; i < full; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(weight + i), _mm512_mul_ps(vinv, _mm512_loadu_ps(x + i))));
  }
  if (full < n) {
    Tail tail(x, full, n, 0.0f);
    tail.StoreTo(out, full, n, _mm512_mul_ps(Tail(weight, full, n, 0.0f).Load(), _mm512_mul_ps(vinv, tail.Load())));
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  auto silu_mul = [&](__m512 g, __m512 u) {
    const __m512 sigmoid = _mm512_div_ps(
        one, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));  // -g: XORPS needs AVX-512 DQ
    return _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), u);
  };
  const int64_t full = n / 16 * 16;
  for (int64_t i = 0; i < full; i += 16) {
    _mm512_storeu_ps(gate + i, silu_mul(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (full < n) {
    Tail g(gate, full, n, 0.0f);
    const Tail u(up, full, n, 0.0f);
    g.StoreTo(gate, full, n, silu_mul(g.Load(), u.Load()));
  }
}

}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
