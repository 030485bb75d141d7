// AVX-512 softmax and SiLU gating (the KernelTable's `softmax` and `silu_mul`). Compiled with the
// AVX-512 flags; avx512_simde_activations.cc compiles it again for AVX2 with SIMDe (tests).
//
// Why: in a long prompt's prefill the softmax over each token's scores was a fifth of the attention
// time with the AVX2 kernel's 8-float exp (perf, pp1024). The exp is the AVX2 kernel's (the same
// reduction and polynomial, exp_polynomial.h) on 16 floats, with 2^n applied by VSCALEFPS,
// which also gives expf's subnormal results where the AVX2 kernel flushes them to zero. Tails go
// through a 16-float buffer, so no libm function is called from this unit (an inline library
// function compiled with AVX-512 flags could become the copy the linker keeps for everyone).
#include <cstdint>

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

}  // namespace

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
