// What every AVX-512 kernel unit starts with: the intrinsics (native, or emulated by SIMDe for the
// test-only AVX2 build of the same sources), the namespace the unit's code goes in, and conversions
// that SIMDe 0.7.4 lacks in their 512-bit forms. Include it only from units compiled with the
// AVX-512 flags or from their SIMDe twins. The helpers sit in an anonymous namespace inside that
// unit's own namespace, so no AVX-512 code can become a shared inline function that another unit's
// callers might get.
#pragma once

#if defined(KESTREL_AVX512_VIA_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#else
// GCC 12's _mm512_undefined_ps() (inside _mm512_cvtph_ps and _mm512_cvtepi32_ps) trips
// -Wmaybe-uninitialized, and at -O1 (the sanitized build) -Wuninitialized (GCC bug 105593, fixed
// in 12.3); the warning is located in the header.
#if defined(__clang__)
#include <immintrin.h>
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#endif

#include <cstdint>

#if !defined(KESTREL_AVX512_NAMESPACE)
#define KESTREL_AVX512_NAMESPACE avx512_vnni
#endif

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

// In assembly, not _mm_prefetch: GCC 12 found a loader's prefetch function free of side effects
// once it was called from more than one place, and deleted the calls (every prefetch was gone from
// the unit; decode ran 13-15% slower).
// Into L1, or with kToL2 only into L2.
template <bool kToL2 = false>
inline void PrefetchLine(const uint8_t* p) {
  if constexpr (kToL2) {
    __asm__ volatile("prefetcht1 %0" ::"m"(*p));
  } else {
    __asm__ volatile("prefetcht0 %0" ::"m"(*p));
  }
}

// 16 fp16 values to f32 (exact), 16 bf16 values to f32 (exact), and 16 int32 to f32 (rounded as
// static_cast<float> does). SIMDe 0.7.4 lacks the 512-bit forms, so its build converts two 256-bit
// halves.
inline __m512 HalvesToFloat(__m256i h) {
#if defined(KESTREL_AVX512_VIA_SIMDE)
  const __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  const __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
#else
  return _mm512_cvtph_ps(h);
#endif
}

// 16 bf16 values to f32 (exact: the upper halves of f32 bit patterns).
inline __m512 Bf16ToFloat(__m256i h) {
#if defined(KESTREL_AVX512_VIA_SIMDE)
  const __m256i lo = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16);
  const __m256i hi = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16);
  return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
#else
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#endif
}

inline __m512 IntToFloat(__m512i v) {
#if defined(KESTREL_AVX512_VIA_SIMDE)
  const __m256 lo = _mm256_cvtepi32_ps(_mm512_castsi512_si256(v));
  const __m256 hi = _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(v, 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
#else
  return _mm512_cvtepi32_ps(v);
#endif
}

// _mm512_shuffle_f32x4 (128-bit lanes of a, then of b, chosen by kImm), which SIMDe 0.7.4 provides
// without its native alias.
template <int kImm>
inline __m512 ShuffleLanes(__m512 a, __m512 b) {
#if defined(KESTREL_AVX512_VIA_SIMDE)
  return simde_mm512_shuffle_f32x4(a, b, kImm);
#else
  return _mm512_shuffle_f32x4(a, b, kImm);
#endif
}

// 16 floats to int32, truncated (VCVTTPS2DQ; SIMDe 0.7.4 lacks the 512-bit form, so its build
// converts two 256-bit halves).
inline __m512i TruncateToInt(__m512 v) {
#if defined(KESTREL_AVX512_VIA_SIMDE)
  const __m512i bits = _mm512_castps_si512(v);
  const __m256i lo = _mm256_cvttps_epi32(_mm512_castps512_ps256(v));
  const __m256i hi = _mm256_cvttps_epi32(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(bits, 1)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
#else
  return _mm512_cvttps_epi32(v);
#endif
}

// Float rows (attention's KV cache, float weight matrices): elements c..c+15 of a row as f32.
struct F32Row {
  static __m512 Load16(const uint8_t* row, int64_t c) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static constexpr int kBytes = 4;
};
struct F16Row {
  static __m512 Load16(const uint8_t* row, int64_t c) {
    return HalvesToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * 2)));
  }
  static constexpr int kBytes = 2;
};
struct BF16Row {
  static __m512 Load16(const uint8_t* row, int64_t c) {
    return Bf16ToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * 2)));
  }
  static constexpr int kBytes = 2;
};

// The sum of a's 16 elements.
inline float Sum16(__m512 a) {
  const __m256 h =
      _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_castps512_ps256(ShuffleLanes<_MM_SHUFFLE(3, 2, 3, 2)>(a, a)));
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// Eight horizontal reductions at once: lane i of the result is op folded over a[i]'s 16 elements
// (op: add, max, ... of two __m512), by one transposing tree instead of eight separate ones.
template <typename Op>
inline __m256 Reduce8(const __m512* a, Op op) {
  __m512 x[4];
  for (int i = 0; i < 4; ++i) {  // lanes 0-1: a[2i]'s two halves combined, lanes 2-3: a[2i + 1]'s
    x[i] = op(ShuffleLanes<_MM_SHUFFLE(1, 0, 1, 0)>(a[2 * i], a[2 * i + 1]),
              ShuffleLanes<_MM_SHUFFLE(3, 2, 3, 2)>(a[2 * i], a[2 * i + 1]));
  }
  // Lane L of y[0] holds four partials of a[L], of y[1] those of a[4 + L].
  const __m512 y[2] = {
      op(ShuffleLanes<_MM_SHUFFLE(2, 0, 2, 0)>(x[0], x[1]), ShuffleLanes<_MM_SHUFFLE(3, 1, 3, 1)>(x[0], x[1])),
      op(ShuffleLanes<_MM_SHUFFLE(2, 0, 2, 0)>(x[2], x[3]), ShuffleLanes<_MM_SHUFFLE(3, 1, 3, 1)>(x[2], x[3])),
  };
  // Within lane L: two partials of a[L] and two of a[4 + L], then elements 0 and 1 the results.
  const __m512 z = op(_mm512_unpacklo_ps(y[0], y[1]), _mm512_unpackhi_ps(y[0], y[1]));
  const __m512 w = op(z, _mm512_shuffle_ps(z, z, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, w));
}

}  // namespace
}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
