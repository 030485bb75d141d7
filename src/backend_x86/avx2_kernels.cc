// AVX2 + FMA + F16C kernels. This is the only file compiled with -mavx2 -mfma -mf16c; it includes
// nothing but the kernel types, intrinsics and a macro (llvm-mca markers), and keeps every helper
// in an anonymous namespace, so no AVX2 code can leak into shared inline functions.
//
// Quantized products vectorize across 8 weight rows: each lane owns one row and accumulates its
// blocks in ascending order with a separate multiply and add, exactly as the generic reference
// does, so results are bit-identical. Integer block sums use the maddubs sign trick.
//
// avx_vnni_kernels.cc compiles this file a second time with -mavxvnni and KESTREL_AVX2_WITH_VNNI,
// in its own namespace (the backend "avx_vnni": Intel's client CPUs from Alder Lake on have
// AVX-VNNI but no AVX-512). There the byte products go through VEX VPDPBUSD, which sums four
// unsigned-by-signed products into each 32-bit lane in one instruction where AVX2 needs vpmaddubsw
// and vpmaddwd (and, for Q4_0, int16 adds); the integer sums, and so the results, are the same.
#include "backend_x86/avx2_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/faster_path.h"
#include "backend/mca_mark.h"
#include "backend/q8_0_special_blocks.h"
#include "backend/tile_streams.h"
#include "backend_x86/exp_polynomial.h"

#ifndef KESTREL_AVX2_NAMESPACE
#define KESTREL_AVX2_NAMESPACE avx2
#endif
#ifndef KESTREL_AVX2_WITH_VNNI
#define KESTREL_AVX2_WITH_VNNI 0
#endif

namespace kestrel::KESTREL_AVX2_NAMESPACE {
namespace {

constexpr int kRowGroup = 8;    // rows per vector of accumulators
// llvm-mca region ids (scripts/llvm-mca-x86.sh): 21-24 in the AVX2 build, 41-44 in the AVX-VNNI one.
constexpr int kMcaIdBase = KESTREL_AVX2_WITH_VNNI ? 40 : 20;
constexpr int kTokenTile = 8;   // tokens sharing each loaded weight block in prefill
// How far ahead the tiled loaders prefetch weights: decode streams them from memory, and the
// hardware prefetcher alone leaves it well short of bandwidth. Chosen by kestrel-bench decode runs
// (Q4_0: 4, 8, 16, 32 KB gave about 14.5, 15.5, 17, 17.5 t/s here; Q8_0: 2 -> 8 KB about +8%).
constexpr int kQ8PrefetchBytes = 8192;
constexpr int kQ4PrefetchBytes = 32768;
// Plain rows: the loaders prefetch the rows this far below the ones they read (see PlainQ8_0).
constexpr int64_t kPlainPrefetchRows = 16;

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// The byte products every quantized kernel is built from. u holds unsigned bytes, a signed ones.
#if KESTREL_AVX2_WITH_VNNI
// s + the sums of the four products u[4i..4i+3] * a[4i..4i+3] in int32 lane i.
inline __m256i DotU8I8(__m256i s, __m256i u, __m256i a) { return _mm256_dpbusd_avx_epi32(s, u, a); }
// Q4_0 block sums: int32 lanes throughout (Q4Dot adds into them, Q4Widen has nothing to do).
inline __m256i Q4Dot(__m256i s, __m256i u, __m256i a) { return DotU8I8(s, u, a); }
inline __m256i Q4Widen(__m256i s) { return s; }
#else
inline __m256i DotU8I8(__m256i s, __m256i u, __m256i a) {
  return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
}
// Q4_0 block sums: pairs of products summed in int16 lanes (nibbles times activations, at most
// 8 * 2 * 15 * 128 over a block, so they never saturate), widened to int32 once per block.
inline __m256i Q4Dot(__m256i s16, __m256i u, __m256i a) { return _mm256_add_epi16(s16, _mm256_maddubs_epi16(u, a)); }
inline __m256i Q4Widen(__m256i s16) { return _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); }
#endif

// int32 lanes of the 32-element int8 dot product of w and a (a must not hold -128).
inline __m256i DotI8(__m256i w, __m256i a) {
  const __m256i abs_w = _mm256_sign_epi8(w, w);
  const __m256i signed_a = _mm256_sign_epi8(a, w);
  return DotU8I8(_mm256_setzero_si256(), abs_w, signed_a);
}

// Lane i of the result is the sum of the 8 lanes of v[i].
inline __m256i Reduce8(const __m256i* v) {
  const __m256i a01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i a23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i a45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i a67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i b0 = _mm256_hadd_epi32(a01, a23);
  const __m256i b1 = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

inline __m256i UnpackQ4(__m128i bytes) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

// Loaders: block b of rows r0 .. r0+n-1 (n <= 8) as 8 int8x32 vectors and their 8 scales; rows
// past n read as zero.
struct PlainQ8_0 {
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n, int64_t b, __m256i* w, uint16_t* d) {
    // Rows are row-major, so the 8 rows are one contiguous stretch, 8 blocks of it per block
    // column: this column's share of the rows kPlainPrefetchRows ahead is fetched now, which turns
    // decode's walk over many rows into one sequential stream (the hardware prefetcher does not
    // follow 8 interleaved rows).
    constexpr int64_t kShare = kRowGroup * 34;
    const char* ahead = reinterpret_cast<const char*>(data + (r0 + kPlainPrefetchRows) * blocks * 34 + b * kShare);
    for (int64_t at = 0; at < kShare; at += 64) _mm_prefetch(ahead + at, _MM_HINT_T0);
    for (int i = 0; i < kRowGroup; ++i) {
      if (i < n) {
        const uint8_t* block = data + ((r0 + i) * blocks + b) * 34;
        std::memcpy(&d[i], block, 2);
        w[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      } else {
        d[i] = 0;
        w[i] = _mm256_setzero_si256();
      }
    }
  }
};

struct PlainQ4_0 {
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n, int64_t b, __m256i* w, uint16_t* d) {
    for (int i = 0; i < kRowGroup; ++i) {
      if (i < n) {
        const uint8_t* block = data + ((r0 + i) * blocks + b) * 18;
        std::memcpy(&d[i], block, 2);
        w[i] = UnpackQ4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
      } else {
        d[i] = 0;
        w[i] = _mm256_setzero_si256();
      }
    }
  }
};

// q4_0x4: an 8-row group is two tiles; row i's 4-byte chunk k is at 8 + (k * 4 + i) * 4. The 16
// bytes at 8 + k * 16 hold chunk k of the tile's 4 rows: a 4x4 transpose of 32-bit elements.
struct TiledQ4_0x4 {
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n, int64_t b, __m256i* w, uint16_t* d) {
    for (int tile = 0; tile < 2; ++tile) {
      if (tile * 4 >= n) {
        for (int i = 0; i < 4; ++i) {
          d[tile * 4 + i] = 0;
          w[tile * 4 + i] = _mm256_setzero_si256();
        }
        continue;
      }
      const uint8_t* group = data + ((r0 / 4 + tile) * blocks + b) * 18 * 4;
      std::memcpy(d + tile * 4, group, 8);
      const uint8_t* q = group + 8;
      __m128i c[4];
      for (int k = 0; k < 4; ++k) c[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k * 16));
      const __m128i a = _mm_unpacklo_epi32(c[0], c[1]);
      const __m128i bb = _mm_unpackhi_epi32(c[0], c[1]);
      const __m128i cc = _mm_unpacklo_epi32(c[2], c[3]);
      const __m128i dd = _mm_unpackhi_epi32(c[2], c[3]);
      w[tile * 4 + 0] = UnpackQ4(_mm_unpacklo_epi64(a, cc));
      w[tile * 4 + 1] = UnpackQ4(_mm_unpackhi_epi64(a, cc));
      w[tile * 4 + 2] = UnpackQ4(_mm_unpacklo_epi64(bb, dd));
      w[tile * 4 + 3] = UnpackQ4(_mm_unpackhi_epi64(bb, dd));
    }
  }
};

template <typename Loader>
void MatmulQuantized(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t blocks = w.columns / 32;
  __m256i wv[kRowGroup];
  __m256i dots[kRowGroup];
  alignas(16) uint16_t wd[kRowGroup];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowGroup) {
    const int n_rows = static_cast<int>(row_end - r0 < kRowGroup ? row_end - r0 : kRowGroup);
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += kTokenTile) {
      const int n_tok = static_cast<int>(x.n_tokens - t0 < kTokenTile ? x.n_tokens - t0 : kTokenTile);
      __m256 acc[kTokenTile];
      for (int t = 0; t < kTokenTile; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < blocks; ++b) {
        Loader::Load(data, blocks, r0, n_rows, b, wv, wd);
        const __m256 w_scale = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(wd)));
        for (int t = 0; t < n_tok; ++t) {
          const BlockQ8_0& a = x.q8_0[(t0 + t) * blocks + b];
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
          for (int i = 0; i < kRowGroup; ++i) dots[i] = DotI8(wv[i], av);
          const __m256 sums = _mm256_cvtepi32_ps(Reduce8(dots));
          const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(x.q8_0_scales[(t0 + t) * blocks + b]));
          acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(sums, scale));
        }
      }
      alignas(32) float out[kRowGroup];
      for (int t = 0; t < n_tok; ++t) {
        _mm256_store_ps(out, acc[t]);
        for (int i = 0; i < n_rows; ++i) y[(t0 + t) * y_stride + r0 + i] = out[i];
      }
    }
  }
}

inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

inline float HorizontalMax(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// exp(x) for 8 floats within 2 ulp of expf: x = n * ln2 + r with |r| <= ln2 / 2, a degree-6
// polynomial for e^r, then 2^n through the exponent bits. Beyond the float range it gives inf or 0
// as expf does, and NaN stays NaN.
inline __m256 Exp(__m256 x) {
  using namespace exp_polynomial;
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2High)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Low)));
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n, with n clamped so the exponent arithmetic cannot wrap; the range checks below decide.
  const __m256 n_clamped = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-126.0f)), _mm256_set1_ps(127.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n_clamped), _mm256_set1_epi32(127)), 23);
  __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_inff()),
                            _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
  return _mm256_blendv_ps(result, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654022216797f), _CMP_LT_OQ));
}

struct F32Row {
  static __m256 Load8(const uint8_t* row, int64_t c) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c); }
  static float Load1(const uint8_t* row, int64_t c) {
    float v;
    std::memcpy(&v, row + c * 4, 4);
    return v;
  }
  static constexpr int kBytes = 4;
};
struct F16Row {
  static __m256 Load8(const uint8_t* row, int64_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c * 2)));
  }
  static float Load1(const uint8_t* row, int64_t c) {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    return HalfToFloat(h);
  }
  static constexpr int kBytes = 2;
};
struct BF16Row {
  static __m256 Load8(const uint8_t* row, int64_t c) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c * 2)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float Load1(const uint8_t* row, int64_t c) {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static constexpr int kBytes = 2;
};

// Float products. Every (row, token) is summed the same way whatever tile it falls in: two 8-lane
// accumulators taking alternate 8-column chunks (a last odd chunk goes to the first), then their
// lanes, then the columns past the last multiple of 8 one by one. So results do not depend on how
// rows are split over threads or tokens into batches, and decode and prefill agree bit for bit.
//
// R rows x T tokens at once: each weight vector loaded (and widened) serves T tokens and each
// activation vector R rows. The row-by-token loop this replaced loaded two vectors per FMA and ran
// ~24-33 GOPS in prefill (bench/README.md).
template <typename Row, int R, int T>
inline void FloatTile(const uint8_t* rows, int64_t row_bytes, const float* a, int64_t a_stride, int64_t n, float* y,
                      int64_t y_stride) {
  __m256 acc[R][T][2];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
  }
  auto step = [&](int64_t c, int h) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Row::Load8(rows + r * row_bytes, c);
    for (int t = 0; t < T; ++t) {
      const __m256 av = _mm256_loadu_ps(a + t * a_stride + c);
      for (int r = 0; r < R; ++r) acc[r][t][h] = _mm256_fmadd_ps(wv[r], av, acc[r][t][h]);
    }
  };
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    step(c, 0);
    step(c + 8, 1);
  }
  if (c + 8 <= n) {
    step(c, 0);
    c += 8;
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float sum = HorizontalSum(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
      for (int64_t cc = c; cc < n; ++cc) sum += Row::Load1(rows + r * row_bytes, cc) * a[t * a_stride + cc];
      y[t * y_stride + r] = sum;
    }
  }
}

// R rows against every token: tiles of 2 tokens, then the last one of an odd count.
constexpr int kFloatTokenTile = 2;  // FloatRows leaves at most one token to a 1-token tile
template <typename Row, int R>
void FloatRows(const uint8_t* rows, int64_t row_bytes, const Activations& x, int64_t n, float* y, int64_t y_stride) {
  int64_t t = 0;
  for (; t + kFloatTokenTile <= x.n_tokens; t += kFloatTokenTile) {
    FloatTile<Row, R, kFloatTokenTile>(rows, row_bytes, x.f32 + t * x.columns, x.columns, n, y + t * y_stride,
                                       y_stride);
  }
  if (t < x.n_tokens) {
    FloatTile<Row, R, 1>(rows, row_bytes, x.f32 + t * x.columns, x.columns, n, y + t * y_stride, y_stride);
  }
}

// Decode reads one row after another: rows are contiguous, so that is one sequential stream. Tiles
// of several rows read as several short streams, and with 2 KB rows (Qwen3-0.6B) decode from
// memory ran 1.3-1.6x slower that way. Prefill: 3 rows x 2 tokens (12 accumulators, 3 weight
// vectors and an activation: the 16 ymm registers; 2 x 3 ran 0.6-0.9x as fast); the rows stay
// in L1 while the tokens pass.
template <typename Row>
void MatmulFloat(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.columns * Row::kBytes;
  int64_t r = row_begin;
  if (x.n_tokens > 1) {
    for (; r + 3 <= row_end; r += 3) FloatRows<Row, 3>(data + r * row_bytes, row_bytes, x, w.columns, y + r, y_stride);
  }
  for (; r < row_end; ++r) FloatRows<Row, 1>(data + r * row_bytes, row_bytes, x, w.columns, y + r, y_stride);
}

// Round half away from zero, as lround does, for magnitudes up to 200: add 0.5 - 2^-25 with the
// value's sign, then truncate (the sum's rounding carries exact halves up and nothing below them;
// checked for every float in [0, 200], and a quant's x * id is at most 127 and a little).
inline __m256i RoundHalfAway(__m256 v) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  return _mm256_cvttps_epi32(_mm256_add_ps(v, _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f))));
}

// Q4_0 products, 8 rows (two 4-row tiles) by a few tokens at a time. Register vector k of a block
// holds the 4-byte chunk k of each of the 8 rows (one row per 32-bit lane), which is exactly how a
// q4_0x4 tile stores it; its low nibbles are elements 4k..4k+3 of each row and its high nibbles
// elements 16+4k..16+4k+3, so each token's matching activation bytes are one broadcast load. The
// unsigned nibbles go straight into maddubs (each int16 lane at most 2 * 15 * 128, so a block's
// eight products fit in int16), and the -8 offset is applied once per block as 8 * sum(a).
// Integer sums are exact and each row's float accumulation is the reference's, so results are
// bit-identical.
constexpr int64_t kOffsetBudget = 8192;   // per-block activation offsets (8 * sum) kept on the stack
constexpr int kQ4TokenTile = 4;           // tokens per register tile: 4 int16 + 4 f32 accumulators

struct Q4Chunks {
  __m256i chunk[4];  // chunk k of rows 0-3 (low half) and rows 4-7 (high half)
  __m128i scales;    // the 8 rows' scales as halves
};

// The tiled layout is read as it lies; the second tile's address may repeat the first's (a
// 4-row remainder), whose lanes are then never stored.
struct Q4Tiles {
  static constexpr int kMcaId = kMcaIdBase + 1;
  // Block b of the tile holding `row`.
  static const uint8_t* At(const uint8_t* data, int64_t blocks, int64_t row, int64_t b) {
    return data + ((row / 4) * blocks + b) * 72;
  }
  // The same, prefetched kQ4PrefetchBytes ahead (the prefill's strips stream them).
  static const uint8_t* Group(const uint8_t* data, int64_t blocks, int64_t row, int64_t b) {
    const uint8_t* group = At(data, blocks, row, b);
    _mm_prefetch(reinterpret_cast<const char*>(group) + kQ4PrefetchBytes, _MM_HINT_T0);
    return group;
  }
  // The 4 + 4 fp16 scales of two groups (ga's rows in the low half).
  static __m128i Scales(const uint8_t* ga, const uint8_t* gb) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ga)),
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb)));
  }
  // Chunk k of two groups' 8 rows (ga's rows in the low half).
  static __m256i Chunk(const uint8_t* ga, const uint8_t* gb, int k) {
    return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(gb + 8 + k * 16),
                               reinterpret_cast<const __m128i*>(ga + 8 + k * 16));
  }
  // Two groups' 8 rows as Q4Chunks (ga's rows in the low half).
  static void LoadAt(const uint8_t* ga, const uint8_t* gb, Q4Chunks* out) {
    out->scales = Scales(ga, gb);
    for (int k = 0; k < 4; ++k) out->chunk[k] = Chunk(ga, gb, k);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t row_a, int64_t row_b, int64_t b, Q4Chunks* out) {
    LoadAt(Group(data, blocks, row_a, b), Group(data, blocks, row_b, b), out);
  }
};

// Plain rows are brought into the same arrangement with a 4x4 transpose of 32-bit chunks.
struct Q4Rows {
  static constexpr int kMcaId = kMcaIdBase + 3;
  static void LoadTile(const uint8_t* data, int64_t blocks, int64_t row, int64_t b, __m128i* c, uint64_t* scales) {
    __m128i r[4];
    uint16_t d[4];
    // This block column's share of the 4 rows kPlainPrefetchRows ahead (see PlainQ8_0).
    constexpr int64_t kShare = 4 * 18;
    const char* ahead = reinterpret_cast<const char*>(data + (row + kPlainPrefetchRows) * blocks * 18 + b * kShare);
    for (int64_t at = 0; at < kShare; at += 64) _mm_prefetch(ahead + at, _MM_HINT_T0);
    for (int i = 0; i < 4; ++i) {
      const uint8_t* block = data + ((row + i) * blocks + b) * 18;
      std::memcpy(&d[i], block, 2);
      r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    }
    std::memcpy(scales, d, 8);
    const __m128i a = _mm_unpacklo_epi32(r[0], r[1]), bb = _mm_unpackhi_epi32(r[0], r[1]);
    const __m128i cc = _mm_unpacklo_epi32(r[2], r[3]), dd = _mm_unpackhi_epi32(r[2], r[3]);
    c[0] = _mm_unpacklo_epi64(a, cc);
    c[1] = _mm_unpackhi_epi64(a, cc);
    c[2] = _mm_unpacklo_epi64(bb, dd);
    c[3] = _mm_unpackhi_epi64(bb, dd);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t row_a, int64_t row_b, int64_t b, Q4Chunks* out) {
    __m128i ca[4], cb[4];
    uint64_t sa, sb;
    LoadTile(data, blocks, row_a, b, ca, &sa);
    LoadTile(data, blocks, row_b, b, cb, &sb);
    out->scales = _mm_set_epi64x(static_cast<int64_t>(sb), static_cast<int64_t>(sa));
    for (int k = 0; k < 4; ++k) out->chunk[k] = _mm256_set_m128i(cb[k], ca[k]);
  }
};

inline __m256i Broadcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// A chunk register's low nibbles (elements 4k..4k+3 of each row) and high ones (16+4k..).
inline void SplitNibbles(__m256i chunk, __m256i nibble, __m256i* lo, __m256i* hi) {
  *lo = _mm256_and_si256(chunk, nibble);
  *hi = _mm256_and_si256(_mm256_srli_epi16(chunk, 4), nibble);
}

// One block's end for 8 rows and one token: widen the sums (Q4Widen), subtract 8 * sum(a), and add
// float(sum) * (d_w * d_a) to acc with the reference's two roundings.
inline __m256 AccumulateQ4Block(__m256 acc, __m256i s, int32_t offset, __m256 w_scale, float a_scale) {
  const __m256i sums = _mm256_sub_epi32(Q4Widen(s), _mm256_set1_epi32(offset));
  const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(a_scale));
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale));
}

// acc[t] (8 rows) += the products of rows row_a..+3, row_b..+3 with tokens a[0..T-1].
// offset[t][b] is 8 * sum(a block b), a_scale[t][b] its scale as float.
template <int T, typename Tiles>
inline void Q4Tile(const uint8_t* data, int64_t blocks, int64_t row_a, int64_t row_b, const BlockQ8_0* const* a,
                   const int32_t* const* offset, const float* const* a_scale, __m256* acc) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < blocks; ++b) {
    KESTREL_MCA_MARK("BEGIN", Tiles::kMcaId, T);
    Q4Chunks w;
    Tiles::Load(data, blocks, row_a, row_b, b, &w);
    __m256i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) SplitNibbles(w.chunk[k], nibble, &lo[k], &hi[k]);
    const __m256 w_scale = _mm256_cvtph_ps(w.scales);
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a[t][b].qs;
      __m256i s = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        s = Q4Dot(s, lo[k], Broadcast32(q + 4 * k));
        s = Q4Dot(s, hi[k], Broadcast32(q + 16 + 4 * k));
      }
      acc[t] = AccumulateQ4Block(acc[t], s, offset[t][b], w_scale, a_scale[t][b]);
    }
    KESTREL_MCA_MARK("END", Tiles::kMcaId, T);
  }
}

// Where tokens t0 .. t0 + T - 1 find their activation blocks, 8 * sum(a) per block and scales
// (offsets and scales are kept for the chunk of tokens starting at chunk0).
template <int T>
struct TokenTile {
  const BlockQ8_0* a[T];
  const int32_t* offset[T];
  const float* scale[T];
  TokenTile(const Activations& x, int64_t blocks, int64_t t0, int64_t chunk0, const int32_t* offsets,
            const float* scales) {
    for (int t = 0; t < T; ++t) {
      a[t] = x.q8_0 + (t0 + t) * blocks;
      offset[t] = offsets + (t0 + t - chunk0) * blocks;
      scale[t] = scales + (t0 + t - chunk0) * blocks;
    }
  }
};

template <int T, typename Tiles>
inline void Q4TileStore(const MatrixView& w, const Activations& x, int64_t t0, int64_t chunk0, int64_t r0, bool two,
                        const int32_t* offsets, const float* scales, float* y, int64_t y_stride) {
  const int64_t blocks = w.columns / 32;
  const TokenTile<T> tile(x, blocks, t0, chunk0, offsets, scales);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  Q4Tile<T, Tiles>(static_cast<const uint8_t*>(w.data), blocks, r0, two ? r0 + 4 : r0, tile.a, tile.offset, tile.scale,
                   acc);
  for (int t = 0; t < T; ++t) {
    float* out = y + (t0 + t) * y_stride + r0;
    if (two) {
      _mm256_storeu_ps(out, acc[t]);
    } else {
      _mm_storeu_ps(out, _mm256_castps256_ps128(acc[t]));
    }
  }
}

// The last n (< kQ4TokenTile) tokens of a strip, with a tile of exactly n.
template <int T, typename Tiles>
inline void Q4TileTail(int n, const MatrixView& w, const Activations& x, int64_t t0, int64_t chunk0, int64_t r0,
                       bool two, const int32_t* offsets, const float* scales, float* y, int64_t y_stride) {
  if constexpr (T > 0) {
    if (n == T) return Q4TileStore<T, Tiles>(w, x, t0, chunk0, r0, two, offsets, scales, y, y_stride);
    Q4TileTail<T - 1, Tiles>(n, w, x, t0, chunk0, r0, two, offsets, scales, y, y_stride);
  }
}

// Prefill over 16 rows (four q4_0x4 tiles, or 16 plain rows) and 4 tokens. Each broadcast
// activation word feeds two vpmaddubsw (rows 0-7 and rows 8-15), and the block is walked one
// 4-byte chunk at a time with the 8 int16 sums (4 tokens x 2 row groups) in registers. Against the
// 8-row tile: a quarter fewer vector operations per product and half the broadcast loads
// (bench/README.md). The 8-row tile still takes token tails, decode and row remainders. Same sums
// and epilogue as Q4Tile: bit-identical.
constexpr int kQ4WideTokens = 4;
constexpr int kQ4WideRows = 16;
constexpr int kQ4WideMcaId = kMcaIdBase + 4;

// Memory from p on, as an asm operand that says "this asm reads at and after p" (only a
// constraint, never accessed as an object). 1 GiB spans the farthest block an asm below reads from
// its first one (7 token strides of 34 bytes per block) for rows of up to 4 million blocks (128
// million columns).
constexpr int64_t kReadFromBytes = int64_t{1} << 30;
static_assert(7 * 34 * (int64_t{4} << 20) + 256 <= kReadFromBytes, "ReadFrom must span the blocks an asm reads");
inline const char (&ReadFrom(const void* p))[kReadFromBytes] {
  return *static_cast<const char(*)[kReadFromBytes]>(p);
}

// Each 16-row strip's weights are unpacked once (UnpackStrip: nibbles to bytes, scales to f32)
// into a stack buffer that every 4-token tile then reads: 64 tokens unpack each block once
// instead of 16 times, and the tile's loop loses its vector work for unpacking (llvm-mca Zen 3
// 72.2 -> 63.7 cycles per block; bench/README.md). Blocks go in chunks of kUnpackBlocks, so the
// buffer and a tile's activations stay in L1; accumulators cross chunks through y (an f32 store
// and load are exact, so the sums stay the reference's).
constexpr int64_t kUnpackBlocks = 32;
struct alignas(32) UnpackedBlock {
  __m256 scale[2];      // d of rows 0-7 and 8-15 as f32
  __m256i chunk[4][4];  // 4-byte chunk k: low nibbles of rows 0-7, their high nibbles, then rows 8-15's
};
static_assert(sizeof(UnpackedBlock) == 576, "the assembly addresses chunks at 64 + k * 128 + g * 32");

// The chunk walk of one block is written in assembly because its speed hangs on register
// allocation: the 8 int16 sums, 4 weight registers, 2 broadcasts and 2 products need all 16 ymm
// registers, and GCC's choice of what to spill depends on the surrounding code: the intrinsics,
// unrolled, ran 36-38 cycles per 1024 multiply-adds in a standalone probe but 46-52 inside the
// library; rolled, with 6 of the 8 sums kept on the stack, 5-10% slower than this
// (bench/README.md). Here the sums never leave registers; ymm8-ymm15 are scratch. It reads weights
// and activations through its pointer operands, so it also takes ReadFrom operands (stores to them
// stay before it): one "m" operand per block read leaves clang 14 without enough address registers,
// and a "memory" clobber cost ~6% (median of alternated runs). Per chunk k, with the intrinsics it
// replaces:
//   lo[g], hi[g] = u->chunk[k][2g], u->chunk[k][2g + 1]        (g = rows 0-7, 8-15; UnpackStrip)
//   a_lo = broadcast(q + 4k), a_hi = broadcast(q + 16 + 4k)    (Broadcast32, per token)
//   s[t][g] (+)= maddubs(lo[g], a_lo) + maddubs(hi[g], a_hi)   (k = 0 assigns)
#define KQ4_CHUNK_LOAD(k)                                         \
  "vmovdqa 64+" #k "*128(%[u]), %%ymm8\n\t"                      \
  "vmovdqa 96+" #k "*128(%[u]), %%ymm9\n\t"                      \
  "vmovdqa 128+" #k "*128(%[u]), %%ymm10\n\t"                    \
  "vmovdqa 160+" #k "*128(%[u]), %%ymm11\n\t"
#define KQ4_BROADCAST(k, q)                                       \
  "vpbroadcastd " #k "*4(%[" #q "]), %%ymm12\n\t"                 \
  "vpbroadcastd " #k "*4+16(%[" #q "]), %%ymm13\n\t"
#define KQ4_FIRST(k, q, s0, s1)                                   \
  KQ4_BROADCAST(k, q)                                             \
  "vpmaddubsw %%ymm12, %%ymm8, %[" #s0 "]\n\t"                    \
  "vpmaddubsw %%ymm13, %%ymm9, %%ymm14\n\t"                       \
  "vpaddw %%ymm14, %[" #s0 "], %[" #s0 "]\n\t"                    \
  "vpmaddubsw %%ymm12, %%ymm10, %[" #s1 "]\n\t"                   \
  "vpmaddubsw %%ymm13, %%ymm11, %%ymm15\n\t"                      \
  "vpaddw %%ymm15, %[" #s1 "], %[" #s1 "]\n\t"
#define KQ4_NEXT(k, q, s0, s1)                                    \
  KQ4_BROADCAST(k, q)                                             \
  "vpmaddubsw %%ymm12, %%ymm8, %%ymm14\n\t"                       \
  "vpmaddubsw %%ymm13, %%ymm9, %%ymm15\n\t"                       \
  "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                          \
  "vpaddw %%ymm14, %[" #s0 "], %[" #s0 "]\n\t"                    \
  "vpmaddubsw %%ymm12, %%ymm10, %%ymm14\n\t"                      \
  "vpmaddubsw %%ymm13, %%ymm11, %%ymm15\n\t"                      \
  "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                          \
  "vpaddw %%ymm14, %[" #s1 "], %[" #s1 "]\n\t"
// With AVX-VNNI: s[t][g] (+)= dpbusd(lo[g], a_lo) then dpbusd(hi[g], a_hi), int32 sums zeroed
// first (KVNNI_ZERO, also used by Q8Sums<8>; {vex}: the AVX-VNNI encoding, not AVX-512's).
// clang-format off
#define KVNNI_ZERO(s) "vpxor %[" #s "], %[" #s "], %[" #s "]\n\t"
#define KQ4_VNNI_STEP(k, q, s0, s1)                               \
  KQ4_BROADCAST(k, q)                                             \
  "%{vex%} vpdpbusd %%ymm12, %%ymm8, %[" #s0 "]\n\t"               \
  "%{vex%} vpdpbusd %%ymm13, %%ymm9, %[" #s0 "]\n\t"               \
  "%{vex%} vpdpbusd %%ymm12, %%ymm10, %[" #s1 "]\n\t"              \
  "%{vex%} vpdpbusd %%ymm13, %%ymm11, %[" #s1 "]\n\t"
// clang-format on
#define KQ4_CHUNK(k, STEP) \
  KQ4_CHUNK_LOAD(k) STEP(k, q0, s00, s01) STEP(k, q1, s10, s11) STEP(k, q2, s20, s21) STEP(k, q3, s30, s31)

// s[t][g]: the sums of unpacked block u (g = rows 0-7, 8-15) against token t's block q[t], before
// widening (Q4Widen).
inline void Q4WideSums(const UnpackedBlock* u, const int8_t* const* q, __m256i (*s)[2]) {
// clang-format off
  __asm__(
#if KESTREL_AVX2_WITH_VNNI
      KVNNI_ZERO(s00) KVNNI_ZERO(s01) KVNNI_ZERO(s10) KVNNI_ZERO(s11)
      KVNNI_ZERO(s20) KVNNI_ZERO(s21) KVNNI_ZERO(s30) KVNNI_ZERO(s31)
      KQ4_CHUNK(0, KQ4_VNNI_STEP) KQ4_CHUNK(1, KQ4_VNNI_STEP) KQ4_CHUNK(2, KQ4_VNNI_STEP) KQ4_CHUNK(3, KQ4_VNNI_STEP)
#else
      KQ4_CHUNK(0, KQ4_FIRST) KQ4_CHUNK(1, KQ4_NEXT) KQ4_CHUNK(2, KQ4_NEXT) KQ4_CHUNK(3, KQ4_NEXT)
#endif
          : [s00] "=&x"(s[0][0]), [s01] "=&x"(s[0][1]), [s10] "=&x"(s[1][0]), [s11] "=&x"(s[1][1]),
            [s20] "=&x"(s[2][0]), [s21] "=&x"(s[2][1]), [s30] "=&x"(s[3][0]), [s31] "=&x"(s[3][1])
          : [u] "r"(u), [q0] "r"(q[0]), [q1] "r"(q[1]), [q2] "r"(q[2]), [q3] "r"(q[3]),
            "m"(*u), "m"(ReadFrom(q[0]))  // what it reads: the block, and tokens ascend from q[0]
          : "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
// clang-format on
}
#undef KQ4_CHUNK
#undef KQ4_VNNI_STEP
#undef KQ4_NEXT
#undef KQ4_FIRST
#undef KQ4_BROADCAST
#undef KQ4_CHUNK_LOAD

// Blocks b0 .. b0 + n - 1 of 16 rows starting at r0, unpacked (tiles as they lie, plain rows
// transposed by their loader).
template <typename Tiles>
inline void UnpackStrip(const uint8_t* data, int64_t blocks, int64_t r0, int64_t b0, int64_t n, UnpackedBlock* out) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int g = 0; g < 2; ++g) {
      Q4Chunks w;
      Tiles::Load(data, blocks, r0 + 8 * g, r0 + 8 * g + 4, b0 + i, &w);
      out[i].scale[g] = _mm256_cvtph_ps(w.scales);
      for (int k = 0; k < 4; ++k) SplitNibbles(w.chunk[k], nibble, &out[i].chunk[k][2 * g], &out[i].chunk[k][2 * g + 1]);
    }
  }
}

// acc[2t + g] += unpacked blocks u[0 .. n-1] against tokens a[t] (offsets and scales aligned with a).
// Forced inline: once plain rows took this loop too, GCC called one shared copy out of line and
// tiled prefill ran ~8% slower (alternated pp64 runs); inlined into Q4WideTileStore, as before.
__attribute__((always_inline)) inline void Q4WideTile(const UnpackedBlock* u, int64_t n, const BlockQ8_0* const* a,
                                                      const int32_t* const* offset, const float* const* a_scale,
                                                      __m256* acc) {
  static_assert(kQ4WideRows == 16 && kQ4WideTokens == 4, "Q4WideSums is written for 16 rows and 4 tokens");
  for (int64_t b = 0; b < n; ++b) {
    KESTREL_MCA_MARK("BEGIN", kQ4WideMcaId, kQ4WideTokens);
    const int8_t* q[kQ4WideTokens];
    for (int t = 0; t < kQ4WideTokens; ++t) q[t] = a[t][b].qs;
    __m256i sums[kQ4WideTokens][2];
    Q4WideSums(u + b, q, sums);
    for (int t = 0; t < kQ4WideTokens; ++t) {
      for (int g = 0; g < 2; ++g) {
        acc[2 * t + g] = AccumulateQ4Block(acc[2 * t + g], sums[t][g], offset[t][b], u[b].scale[g], a_scale[t][b]);
      }
    }
    KESTREL_MCA_MARK("END", kQ4WideMcaId, kQ4WideTokens);
  }
}

// Tokens t0 .. t0 + 3 against the strip's unpacked blocks b0 .. b0 + n - 1; the accumulators start
// from zero at block 0 and from y after it.
inline void Q4WideTileStore(const UnpackedBlock* u, int64_t b0, int64_t n, const Activations& x, int64_t blocks,
                            int64_t t0, int64_t chunk0, int64_t r0, const int32_t* offsets, const float* scales,
                            float* y, int64_t y_stride) {
  TokenTile<kQ4WideTokens> tile(x, blocks, t0, chunk0, offsets, scales);
  for (int t = 0; t < kQ4WideTokens; ++t) {
    tile.a[t] += b0;
    tile.offset[t] += b0;
    tile.scale[t] += b0;
  }
  __m256 acc[2 * kQ4WideTokens];
  for (int t = 0; t < kQ4WideTokens; ++t) {
    for (int g = 0; g < 2; ++g) {
      acc[2 * t + g] = b0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + (t0 + t) * y_stride + r0 + 8 * g);
    }
  }
  Q4WideTile(u, n, tile.a, tile.offset, tile.scale, acc);
  for (int t = 0; t < kQ4WideTokens; ++t) {
    for (int g = 0; g < 2; ++g) _mm256_storeu_ps(y + (t0 + t) * y_stride + r0 + 8 * g, acc[2 * t + g]);
  }
}

// Decode over tiles: one token against G 8-row groups at once, so 2G weight streams (two tiles per
// group) are in flight (tile streams, tile_streams.h, on path 0; otherwise, and for what the
// streams leave, adjacent groups), each prefetching the tile it reads next, a step later;
// the token's broadcast words serve every group. As Q4Tile with one token: bit-identical. Adjacent
// groups rather than one from each G-th part of the range (which restarted G cold streams in every
// chunk the row scheduler hands out): 2-thread tg32 +15-20% on a Zen 5 (bench/README.md).
// The prefetch takes one of two orders, as avx512_vnni's decode once did and for the same reason (the
// faster one depends on how busy the machine's memory is; avx512_kernels.cc, PrefetchOrder): block b
// of the next group's two tiles (kSweep false), or the next group's region in address order (true).
// Measured with --backend avx2 on the Zen 5, paired in one process: the sweep 7% faster at two
// threads while the machine was busy, 7% slower while it was not; FasterPath picks as it runs.
constexpr int kQ4DecodeStreams = 2;
// Which path is faster lately: 0, the first order over tile streams (tile_streams.h); 1, the first
// order over adjacent groups; 2, the sweep. The streams took tg32 at two threads on the Intel Xeon
// CI host to 30.86-31.54 t/s from 28.85-29.63 over adjacent groups (ABBA with the binary before),
// but on the Zen 5 two-thread Q4_0 read 5-10% slower than over adjacent groups in five rounds of
// six (equal in the sixth) while one thread read 4-8% faster (bench/README.md, thirty-sixth and
// thirty-seventh sessions), so both run and the faster is kept.
FasterPath q4_decode_order = FasterPath::Among(3);

// A group's second tile lies gap_tiles after its first (1: adjacent, 8 rows; more on tile streams),
// and the prefetch reads ahead_tiles on (2G: the group G on; 1 on a tile stream: its next tile).
template <int G, bool kSweep>
inline void Q4DecodeGroups(const uint8_t* data, int64_t blocks, const int64_t* rows, const BlockQ8_0* a,
                           const int32_t* offset, const float* a_scale, __m256* acc_out, int64_t gap_tiles = 1,
                           int64_t ahead_tiles = 2 * G) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  // Addresses worked out once per call (a group's two tiles each hold blocks * 72 bytes; the group
  // G on, the one prefetched, starts 2G tiles further) and the sums kept in registers. Worked out
  // per block from the row numbers (a signed division, a multiply, spills to the stack) the loop
  // ran 1.4-2x slower from cache and decoded 1.4x slower at two threads (bench/README.md).
  const int64_t tile_bytes = blocks * 72;
  const int64_t ahead = ahead_tiles * tile_bytes, gap = gap_tiles * tile_bytes;
  const uint8_t* tile[G];
  __m256 acc[G];
  for (int g = 0; g < G; ++g) {
    tile[g] = Q4Tiles::At(data, blocks, rows[g], 0);
    acc[g] = acc_out[g];
  }
  for (int64_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      // Each group broadcasts the token's words itself (the empty asm hides that they are the
      // same): hoisted over the groups, the 8 broadcast registers crowded the 16 YMM registers;
      // per group, decode ran 2% (one thread) and 6% (two) faster (--backend avx2 on the Zen 5).
      const int8_t* q = a[b].qs;
      __asm__("" : "+r"(q));
      __m256i a_lo[4], a_hi[4];
      for (int k = 0; k < 4; ++k) {
        a_lo[k] = Broadcast32(q + 4 * k);
        a_hi[k] = Broadcast32(q + 16 + 4 * k);
      }
      const uint8_t* ga = tile[g] + b * 72;
      const uint8_t* gb = ga + gap;
      // The group G on, which this stream reads next (see kQ4DecodeStreams; past the range's end it
      // is the next rows or nothing: a prefetch never faults).
      if constexpr (kSweep) {
        // Its 8 rows are one region of blocks * 144 bytes; this block's share of it.
        const char* next = reinterpret_cast<const char*>(tile[g] + ahead);
        for (int64_t at = (b * 144) & ~int64_t{63}; at < (b + 1) * 144; at += 64) _mm_prefetch(next + at, _MM_HINT_T0);
      } else {
        const char* na = reinterpret_cast<const char*>(ga + ahead);
        const char* nb = reinterpret_cast<const char*>(gb + ahead);
        _mm_prefetch(na, _MM_HINT_T0);
        _mm_prefetch(na + 71, _MM_HINT_T0);
        _mm_prefetch(nb, _MM_HINT_T0);
        _mm_prefetch(nb + 71, _MM_HINT_T0);
      }
      Q4Chunks w;
      Q4Tiles::LoadAt(ga, gb, &w);
      __m256i s = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        __m256i lo, hi;
        SplitNibbles(w.chunk[k], nibble, &lo, &hi);
        s = Q4Dot(s, lo, a_lo[k]);
        s = Q4Dot(s, hi, a_hi[k]);
      }
      acc[g] = AccumulateQ4Block(acc[g], s, offset[b], _mm256_cvtph_ps(w.scales), a_scale[b]);
    }
  }
  for (int g = 0; g < G; ++g) acc_out[g] = acc[g];
}

// Rows [row_begin, row_end) in whole 4-row tiles; at most kOffsetBudget blocks per row.
template <typename Tiles>
void MatmulQ4_0x4(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end) {
  const int64_t blocks = w.columns / 32;
  alignas(32) int32_t offsets[kOffsetBudget];
  const int64_t chunk_tokens = kOffsetBudget / blocks;
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk_tokens) {
    const int64_t c1 = x.n_tokens - c0 < chunk_tokens ? x.n_tokens : c0 + chunk_tokens;
    const int32_t* sums = x.q8_0_sums + c0 * blocks;
    for (int64_t i = 0; i < (c1 - c0) * blocks; ++i) offsets[i] = 8 * sums[i];
    const float* scales = x.q8_0_scales + c0 * blocks;
    // Rows outer, tokens inner: a strip of weights stays in cache while every token passes.
    int64_t r0 = row_begin;
    alignas(32) UnpackedBlock strip[kUnpackBlocks];
    const int64_t wide_end = c0 + (c1 - c0) / kQ4WideTokens * kQ4WideTokens;
    for (; wide_end > c0 && r0 + kQ4WideRows <= row_end; r0 += kQ4WideRows) {
      for (int64_t b0 = 0; b0 < blocks; b0 += kUnpackBlocks) {
        const int64_t n = blocks - b0 < kUnpackBlocks ? blocks - b0 : kUnpackBlocks;
        UnpackStrip<Tiles>(static_cast<const uint8_t*>(w.data), blocks, r0, b0, n, strip);
        for (int64_t t = c0; t < wide_end; t += kQ4WideTokens) {
          Q4WideTileStore(strip, b0, n, x, blocks, t, c0, r0, offsets, scales, y, y_stride);
        }
      }
      if (wide_end == c1) continue;
      for (int64_t r = r0; r < r0 + kQ4WideRows; r += 8) {
        Q4TileTail<kQ4TokenTile - 1, Tiles>(static_cast<int>(c1 - wide_end), w, x, wide_end, c0, r, true, offsets,
                                            scales, y, y_stride);
      }
    }
    if constexpr (std::is_same_v<Tiles, Q4Tiles>) {
      if (c1 - c0 == 1) {
        constexpr int G = kQ4DecodeStreams;
        const FasterPath::Choice choice = q4_decode_order.Pick(NowNanoseconds());
        const auto* data = static_cast<const uint8_t*>(w.data);
        const int64_t walk_begin = r0;
        if (choice.path == 0) {
          // Tile streams (tile_streams.h): group g's tiles head streams 2g and 2g + 1.
          const int64_t walked =
              WalkTileStreams((row_end - r0) / 4, 2 * G, kTileStreamLength, [&](int64_t i, int64_t n, int64_t hop) {
                int64_t rows[G];
                __m256 acc[G];
                for (int g = 0; g < G; ++g) {
                  rows[g] = r0 + 4 * (i + 2 * g * n);
                  acc[g] = _mm256_setzero_ps();
                }
                Q4DecodeGroups<G, false>(data, blocks, rows, x.q8_0 + c0 * blocks, offsets, scales, acc, n, hop);
                for (int g = 0; g < G; ++g) {
                  _mm_storeu_ps(y + c0 * y_stride + rows[g], _mm256_castps256_ps128(acc[g]));
                  _mm_storeu_ps(y + c0 * y_stride + rows[g] + 4 * n, _mm256_extractf128_ps(acc[g], 1));
                }
              });
          r0 += 4 * walked;
        }
        const int64_t part = (row_end - r0) / 8 / G;  // steps of G whole 8-row groups
        for (int64_t i = 0; i < part; ++i) {
          int64_t rows[G];
          __m256 acc[G];
          for (int g = 0; g < G; ++g) {
            rows[g] = r0 + 8 * (G * i + g);
            acc[g] = _mm256_setzero_ps();
          }
          if (choice.path != 2) {
            Q4DecodeGroups<G, false>(data, blocks, rows, x.q8_0 + c0 * blocks, offsets, scales, acc);
          } else {
            Q4DecodeGroups<G, true>(data, blocks, rows, x.q8_0 + c0 * blocks, offsets, scales, acc);
          }
          for (int g = 0; g < G; ++g) _mm256_storeu_ps(y + c0 * y_stride + rows[g], acc[g]);
        }
        r0 += 8 * G * part;
        if (choice.timed) {
          q4_decode_order.Report(choice, NowNanoseconds(), static_cast<uint64_t>((r0 - walk_begin) * blocks * 18));
        }
      }
    }
    for (; r0 < row_end; r0 += 8) {
      const bool two = r0 + 4 < row_end;
      int64_t t = c0;
      for (; t + kQ4TokenTile <= c1; t += kQ4TokenTile) {
        Q4TileStore<kQ4TokenTile, Tiles>(w, x, t, c0, r0, two, offsets, scales, y, y_stride);
      }
      if (t < c1) Q4TileTail<kQ4TokenTile - 1, Tiles>(static_cast<int>(c1 - t), w, x, t, c0, r0, two, offsets, scales, y, y_stride);
    }
  }
}

// Q8_0 products over a q8_0x8 tile, a few tokens at a time. The tile stores row i's 8-byte chunk
// k at 16 + (k * 8 + i) * 8; two shuffles of its 64 bytes give register E (elements 8k..8k+3 of
// each row) and O (8k+4..8k+7), one row per 32-bit lane in the order 0 1 4 5 2 3 6 7, so each
// token's operand is again one broadcast load. Signed weights go through the sign trick
// (|w| x sign(a, w); activations never hold -128) and, as pairs of products can reach 2 x 127 x 127,
// every maddubs is widened by a madd before adding. Integer sums are exact and each row
// accumulates its blocks in order, so results are bit-identical to the reference.
constexpr int kQ8TokenTile = 8;
constexpr int kQ8McaId = kMcaIdBase + 2;

// The rows' lane order in those registers; it is its own inverse, so it also puts them back.
inline __m256i Q8RowOrder() { return _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7); }

// s[t]: the int32 sums of one block (q: its 4 x 64 bytes of chunks) against tokens qa[t].
template <int T>
inline void Q8Sums(const uint8_t* q, const int8_t* const* qa, __m256i* s) {
  [[maybe_unused]] const __m256i ones16 = _mm256_set1_epi16(1);
  for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256 rows03 = _mm256_loadu_ps(reinterpret_cast<const float*>(q + k * 64));
    const __m256 rows47 = _mm256_loadu_ps(reinterpret_cast<const float*>(q + k * 64 + 32));
    const __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(rows03, rows47, 0x88));
    const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(rows03, rows47, 0xdd));
    const __m256i abs_even = _mm256_sign_epi8(even, even);
    const __m256i abs_odd = _mm256_sign_epi8(odd, odd);
    for (int t = 0; t < T; ++t) {
#if KESTREL_AVX2_WITH_VNNI
      s[t] = DotU8I8(s[t], abs_even, _mm256_sign_epi8(Broadcast32(qa[t] + 8 * k), even));
      s[t] = DotU8I8(s[t], abs_odd, _mm256_sign_epi8(Broadcast32(qa[t] + 8 * k + 4), odd));
#else
      const __m256i pe = _mm256_maddubs_epi16(abs_even, _mm256_sign_epi8(Broadcast32(qa[t] + 8 * k), even));
      const __m256i po = _mm256_maddubs_epi16(abs_odd, _mm256_sign_epi8(Broadcast32(qa[t] + 8 * k + 4), odd));
      s[t] = _mm256_add_epi32(s[t], _mm256_add_epi32(_mm256_madd_epi16(pe, ones16), _mm256_madd_epi16(po, ones16)));
#endif
    }
  }
}

// The full 8-token tile in assembly, for the reasons given at Q4WideSums (registers; ReadFrom).
// With the intrinsics above,
// GCC hoisted all four chunks' shuffles out of the token loop and spilled (33 stack moves per block
// of a 4-token tile). Here the 8 sums stay in registers (ymm8-ymm13 are scratch), and 8 tokens
// share each chunk's loads, shuffles and absolute values (each step measured faster: see
// bench/README.md). Tails of 1-7 tokens take the intrinsics. Per chunk k, what the loop above
// does: E, O = the two shuffles; |E|, |O|; then per token
// s[t] += madd(maddubs(|E|, sign(broadcast(qa + 8k), E)), 1) + the same for O and qa + 8k + 4.
#define KQ8_CHUNK_LOAD(k)                                         \
  "vmovups " #k "*64(%[q]), %%ymm8\n\t"                           \
  "vmovups " #k "*64+32(%[q]), %%ymm9\n\t"                        \
  "vshufps $0x88, %%ymm9, %%ymm8, %%ymm10\n\t"                    \
  "vshufps $0xdd, %%ymm9, %%ymm8, %%ymm11\n\t"                    \
  "vpsignb %%ymm10, %%ymm10, %%ymm8\n\t"                          \
  "vpsignb %%ymm11, %%ymm11, %%ymm9\n\t"
#define KQ8_PRODUCTS(k, qa)                                       \
  "vpbroadcastd " #k "*8(%[" #qa "]), %%ymm12\n\t"                \
  "vpbroadcastd " #k "*8+4(%[" #qa "]), %%ymm13\n\t"              \
  "vpsignb %%ymm10, %%ymm12, %%ymm12\n\t"                         \
  "vpsignb %%ymm11, %%ymm13, %%ymm13\n\t"                         \
  "vpmaddubsw %%ymm12, %%ymm8, %%ymm12\n\t"                       \
  "vpmaddubsw %%ymm13, %%ymm9, %%ymm13\n\t"                       \
  "vpmaddwd %[ones], %%ymm12, %%ymm12\n\t"                        \
  "vpmaddwd %[ones], %%ymm13, %%ymm13\n\t"
#define KQ8_FIRST(k, qa, s) KQ8_PRODUCTS(k, qa) "vpaddd %%ymm13, %%ymm12, %[" #s "]\n\t"
#define KQ8_NEXT(k, qa, s)  \
  KQ8_PRODUCTS(k, qa)       \
  "vpaddd %%ymm12, %[" #s "], %[" #s "]\n\t" \
  "vpaddd %%ymm13, %[" #s "], %[" #s "]\n\t"
// With AVX-VNNI the two products go straight into the sum (zeroed first, KVNNI_ZERO): s[t] +=
// dpbusd(|E|, sign(broadcast(qa + 8k), E)) + dpbusd(|O|, ...).
// clang-format off
#define KQ8_VNNI_STEP(k, qa, s)                                   \
  "vpbroadcastd " #k "*8(%[" #qa "]), %%ymm12\n\t"                \
  "vpbroadcastd " #k "*8+4(%[" #qa "]), %%ymm13\n\t"              \
  "vpsignb %%ymm10, %%ymm12, %%ymm12\n\t"                         \
  "vpsignb %%ymm11, %%ymm13, %%ymm13\n\t"                         \
  "%{vex%} vpdpbusd %%ymm12, %%ymm8, %[" #s "]\n\t"                 \
  "%{vex%} vpdpbusd %%ymm13, %%ymm9, %[" #s "]\n\t"
// clang-format on
#define KQ8_CHUNK(k, STEP) KQ8_CHUNK_LOAD(k) STEP(k, a0, s0) STEP(k, a1, s1) STEP(k, a2, s2) STEP(k, a3, s3) \
  STEP(k, a4, s4) STEP(k, a5, s5) STEP(k, a6, s6) STEP(k, a7, s7)

template <>
inline void Q8Sums<8>(const uint8_t* q, const int8_t* const* qa, __m256i* s) {
  const __m256i ones16 = _mm256_set1_epi16(1);
// clang-format off
  __asm__(
#if KESTREL_AVX2_WITH_VNNI
      KVNNI_ZERO(s0) KVNNI_ZERO(s1) KVNNI_ZERO(s2) KVNNI_ZERO(s3)
      KVNNI_ZERO(s4) KVNNI_ZERO(s5) KVNNI_ZERO(s6) KVNNI_ZERO(s7)
      KQ8_CHUNK(0, KQ8_VNNI_STEP) KQ8_CHUNK(1, KQ8_VNNI_STEP) KQ8_CHUNK(2, KQ8_VNNI_STEP) KQ8_CHUNK(3, KQ8_VNNI_STEP)
#else
      KQ8_CHUNK(0, KQ8_FIRST) KQ8_CHUNK(1, KQ8_NEXT) KQ8_CHUNK(2, KQ8_NEXT) KQ8_CHUNK(3, KQ8_NEXT)
#endif
          : [s0] "=&x"(s[0]), [s1] "=&x"(s[1]), [s2] "=&x"(s[2]), [s3] "=&x"(s[3]), [s4] "=&x"(s[4]),
            [s5] "=&x"(s[5]), [s6] "=&x"(s[6]), [s7] "=&x"(s[7])
          : [q] "r"(q), [a0] "r"(qa[0]), [a1] "r"(qa[1]), [a2] "r"(qa[2]), [a3] "r"(qa[3]), [a4] "r"(qa[4]),
            [a5] "r"(qa[5]), [a6] "r"(qa[6]), [a7] "r"(qa[7]), [ones] "m"(ones16),
            "m"(ReadFrom(q)), "m"(ReadFrom(qa[0]))  // what it reads: tokens ascend
          : "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13");
// clang-format on
}
#undef KQ8_CHUNK
#undef KQ8_VNNI_STEP
#undef KVNNI_ZERO
#undef KQ8_NEXT
#undef KQ8_FIRST
#undef KQ8_PRODUCTS
#undef KQ8_CHUNK_LOAD

// One 8-row block of a q8_0x8 tile: its 272 bytes kQ8PrefetchBytes ahead are prefetched (the
// prefill tiles stream them), and its 8 scales come back as f32 in the registers' row order.
inline void Q8PrefetchAhead(const uint8_t* group) {
  for (int line = 0; line < 5; ++line) {
    _mm_prefetch(reinterpret_cast<const char*>(group) + kQ8PrefetchBytes + 64 * line, _MM_HINT_T0);
  }
}
inline __m256 Q8WeightScales(const uint8_t* group) {
  return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group))),
                                  Q8RowOrder());
}

template <int T>
inline void Q8Tile(const uint8_t* group0, int64_t blocks, const BlockQ8_0* const* a, const float* const* a_scale,
                   __m256* acc) {
  for (int64_t b = 0; b < blocks; ++b) {
    KESTREL_MCA_MARK("BEGIN", kQ8McaId, T);
    const uint8_t* group = group0 + b * 34 * 8;
    Q8PrefetchAhead(group);
    const __m256 w_scale = Q8WeightScales(group);
    const int8_t* qa[T];
    for (int t = 0; t < T; ++t) qa[t] = a[t][b].qs;
    __m256i s32[T];
    Q8Sums<T>(group + 16, qa, s32);
    for (int t = 0; t < T; ++t) {
      const __m256 scale = _mm256_mul_ps(w_scale, _mm256_broadcast_ss(a_scale[t] + b));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s32[t]), scale));
    }
    KESTREL_MCA_MARK("END", kQ8McaId, T);
  }
}

template <int T>
inline void Q8TileStore(const MatrixView& w, const Activations& x, int64_t t0, int64_t r0, float* y, int64_t y_stride) {
  const int64_t blocks = w.columns / 32;
  const BlockQ8_0* a[T];
  const float* a_scale[T];
  for (int t = 0; t < T; ++t) {
    a[t] = x.q8_0 + (t0 + t) * blocks;
    a_scale[t] = x.q8_0_scales + (t0 + t) * blocks;
  }
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  Q8Tile<T>(static_cast<const uint8_t*>(w.data) + (r0 / 8) * blocks * 34 * 8, blocks, a, a_scale, acc);
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * y_stride + r0, _mm256_permutevar8x32_ps(acc[t], Q8RowOrder()));
}

template <int T>
inline void Q8TileTail(int n, const MatrixView& w, const Activations& x, int64_t t0, int64_t r0, float* y,
                       int64_t y_stride) {
  if constexpr (T > 0) {
    if (n == T) return Q8TileStore<T>(w, x, t0, r0, y, y_stride);
    Q8TileTail<T - 1>(n, w, x, t0, r0, y, y_stride);
  }
}

// Decode: one token against G 8-row groups at once (tile streams, tile_streams.h, then adjacent
// groups for what they leave), each prefetching ahead in what it reads next, so G weight streams
// are in flight: one stream left a thread 20% short
// of the bandwidth that 2-4 reach (2, 4 and 8 measured; 8 was slower than 1. bench/README.md).
// Long rows put that block far ahead (G * 272 bytes per block of a row: 209 KB at 6144 columns),
// and there each stream prefetches 2 KB ahead in its own group instead. One thread on a Zen 5, the
// orders alternated in one process (bench/README.md): at 2048 columns (70 KB ahead) the group G on
// read 26.2-28.0 GB/s against 25.8-26.1 for 2 KB ahead; at 6144 columns 28.3-31.0 against 33.2-33.6.
constexpr int kQ8DecodeStreams = 4;
constexpr int64_t kQ8DecodeGroupAheadMax = 72 * 1024;  // farthest lead of the group-ahead order
constexpr int64_t kQ8DecodeStreamAhead = 2048;         // the lead within a group beyond it
// Decode walks tile streams (tile_streams.h). A stream's reads run on from tile to tile, and so
// does its prefetch, 2 KB ahead: on the Intel Xeon CI host (--backend avx2,
// tg32 at two threads, ABBA with the binary before) 16.43-16.83 t/s against 15.50-15.70 for
// adjacent groups; with the lead one tile ahead (17 KB at 2048 columns) 15.34-15.85 against
// 15.71-16.14, 8 KB 14.55-14.87 (bench/README.md, thirty-sixth session).

// The prefetch reads `lead` bytes on from each block (past the range's end it is the next rows or
// nothing: a prefetch never faults). For adjacent groups, the same block of the group G on, which
// this stream reads next, or 2 KB on in this group for long rows (see kQ8DecodeStreams).
inline int64_t Q8AdjacentGroupsLead(int64_t blocks) {
  const int64_t group_ahead = kQ8DecodeStreams * blocks * 34 * 8;
  return group_ahead <= kQ8DecodeGroupAheadMax ? group_ahead : kQ8DecodeStreamAhead;
}

template <int G>
inline void Q8DecodeGroups(const uint8_t* const* first, int64_t blocks, const BlockQ8_0* a, const float* a_scale,
                           __m256* acc, int64_t lead) {
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* qa[1] = {a[b].qs};
    for (int g = 0; g < G; ++g) {
      const uint8_t* group = first[g] + b * 34 * 8;
      const char* next = reinterpret_cast<const char*>(group + lead);
      for (int line = 0; line < 5; ++line) _mm_prefetch(next + 64 * line, _MM_HINT_T0);
      const __m256 w_scale = Q8WeightScales(group);
      __m256i s32[1];
      Q8Sums<1>(group + 16, qa, s32);
      const __m256 scale = _mm256_mul_ps(w_scale, _mm256_broadcast_ss(a_scale + b));
      acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_cvtepi32_ps(s32[0]), scale));
    }
  }
}

// Rows [row_begin, row_end) in whole 8-row tiles (a q8_0x8 matrix has no other kind).
void MatmulQ8_0x8(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end) {
  if (x.n_tokens == 1) {
    constexpr int G = kQ8DecodeStreams;
    const int64_t blocks = w.columns / 32;
    const auto* data = static_cast<const uint8_t*>(w.data);
    // Tile streams (tile_streams.h): group g is the tile heading stream g; then adjacent groups.
    const auto groups = [&](int64_t first_row, int64_t spread, int64_t lead) {
      const uint8_t* first[G];
      int64_t rows[G];
      __m256 acc[G];
      for (int g = 0; g < G; ++g) {
        rows[g] = first_row + 8 * g * spread;
        first[g] = data + (rows[g] / 8) * blocks * 34 * 8;
        acc[g] = _mm256_setzero_ps();
      }
      Q8DecodeGroups<G>(first, blocks, x.q8_0, x.q8_0_scales, acc, lead);
      for (int g = 0; g < G; ++g) _mm256_storeu_ps(y + rows[g], _mm256_permutevar8x32_ps(acc[g], Q8RowOrder()));
    };
    const int64_t walked =
        WalkTileStreams((row_end - row_begin) / 8, G, kTileStreamLength, [&](int64_t i, int64_t n, int64_t /*hop*/) {
          groups(row_begin + 8 * i, n, kQ8DecodeStreamAhead);  // runs on along the stream
        });
    row_begin += 8 * walked;
    const int64_t part = (row_end - row_begin) / 8 / G;  // steps of G whole 8-row groups
    for (int64_t i = 0; i < part; ++i) groups(row_begin + 8 * G * i, 1, Q8AdjacentGroupsLead(blocks));
    // Groups left over (fewer than G).
    for (int64_t r0 = row_begin + 8 * G * part; r0 < row_end; r0 += 8) Q8TileStore<1>(w, x, 0, r0, y, y_stride);
    return;
  }
  for (int64_t r0 = row_begin; r0 < row_end; r0 += 8) {
    int64_t t = 0;
    for (; t + kQ8TokenTile <= x.n_tokens; t += kQ8TokenTile) Q8TileStore<kQ8TokenTile>(w, x, t, r0, y, y_stride);
    if (t < x.n_tokens) Q8TileTail<kQ8TokenTile - 1>(static_cast<int>(x.n_tokens - t), w, x, t, r0, y, y_stride);
  }
}

}  // namespace

// The avx_vnni build takes only Matmul from this file (avx2_kernels.h); the other kernels have no
// byte products, and the backend uses avx2's.
#if !KESTREL_AVX2_WITH_VNNI
namespace {

// kSummarize: also each block's quant sum (of the stored bytes: SAD of the bytes + 128 against
// zero, less 32 * 128) and its stored scale as f32.
template <bool kSummarize>
void Quantize(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  bool any_special = false;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    __m256 q[4];
    __m256 amax = _mm256_setzero_ps();
    __m256 magnitudes = _mm256_setzero_ps();  // NaN or infinite in a lane that saw a NaN or an infinity
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_loadu_ps(v + i * 8);
      const __m256 magnitude = _mm256_andnot_ps(sign_mask, q[i]);
      amax = _mm256_max_ps(amax, magnitude);
      magnitudes = _mm256_add_ps(magnitudes, magnitude);
    }
    const float max = HorizontalMax(amax);
    const int finite = _mm256_movemask_ps(_mm256_cmp_ps(magnitudes, _mm256_set1_ps(__builtin_inff()), _CMP_LT_OQ));
    // A NaN or an infinity (or values so near FLT_MAX that their sum overflows), or an amax under
    // 1e-30 (but not 0), where 1 / d may overflow: redone below by the reference itself, whose
    // lround decides what a NaN or infinite product becomes (as in the NEON and AVX-512 kernels),
    // so the kernel is bit-identical to it for every input.
    any_special |= finite != 0xFF || (max != 0.0f && max < 1e-30f);
    const float d = max / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m128i d_half = _mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT);
    out[b].d = static_cast<uint16_t>(_mm_extract_epi16(d_half, 0));
    const __m256 scale = _mm256_set1_ps(id);
    __m256i i32[4];
    for (int i = 0; i < 4; ++i) i32[i] = RoundHalfAway(_mm256_mul_ps(q[i], scale));
    const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]);
    const __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), packed);
    if constexpr (kSummarize) {
      const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(packed, _mm256_set1_epi8(static_cast<char>(0x80))),
                                          _mm256_setzero_si256());
      const __m128i halves = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
      sums[b] = static_cast<int32_t>(_mm_cvtsi128_si32(_mm_add_epi64(halves, _mm_unpackhi_epi64(halves, halves)))) -
                32 * 128;
      scales[b] = _mm_cvtss_f32(_mm_cvtph_ps(d_half));
    }
  }
  // Outside the loop above, whose constants a call would push out of registers.
  if (any_special) RequantizeSpecialQ8_0Blocks(x, n / 32, out, sums, scales);
}

}  // namespace

void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n) { Quantize<false>(x, out, nullptr, nullptr, n); }

void QuantizeQ8_0Summarized(const float* x, BlockQ8_0* out, int32_t* sums, float* scales, int64_t n) {
  Quantize<true>(x, out, sums, scales, n);
}

void F32ToF16(const float* x, uint16_t* out, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  }
  for (; i < n; ++i) out[i] = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), kRound), 0));
}

bool Accepts(DType dtype, Layout layout) {
  if (layout == Layout::kPlain) return true;
  return (layout == Layout::kQ4_0x4 && dtype == DType::kQ4_0) || (layout == Layout::kQ8_0x8 && dtype == DType::kQ8_0);
}
#endif  // !KESTREL_AVX2_WITH_VNNI

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0:
      if (w.layout == Layout::kQ8_0x8) return MatmulQ8_0x8(w, x, y, y_stride, row_begin, row_end);
      return MatmulQuantized<PlainQ8_0>(w, x, y, y_stride, row_begin, row_end);
    case DType::kQ4_0:
      if (w.layout == Layout::kQ4_0x4) {
        if (w.columns >= 32 && w.columns / 32 <= kOffsetBudget) return MatmulQ4_0x4<Q4Tiles>(w, x, y, y_stride, row_begin, row_end);
        return MatmulQuantized<TiledQ4_0x4>(w, x, y, y_stride, row_begin, row_end);
      }
      // Whole 4-row groups through the shared kernel; a remainder of 1-3 rows the general way.
      if (w.columns >= 32 && w.columns / 32 <= kOffsetBudget) {
        const int64_t split = row_begin + (row_end - row_begin) / 4 * 4;
        if (split > row_begin) MatmulQ4_0x4<Q4Rows>(w, x, y, y_stride, row_begin, split);
        if (split < row_end) MatmulQuantized<PlainQ4_0>(w, x, y, y_stride, split, row_end);
        return;
      }
      return MatmulQuantized<PlainQ4_0>(w, x, y, y_stride, row_begin, row_end);
    case DType::kF32: return MatmulFloat<F32Row>(w, x, y, y_stride, row_begin, row_end);
    case DType::kF16: return MatmulFloat<F16Row>(w, x, y, y_stride, row_begin, row_end);
    case DType::kBF16: return MatmulFloat<BF16Row>(w, x, y, y_stride, row_begin, row_end);
  }
}

#if !KESTREL_AVX2_WITH_VNNI
void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  // Four accumulators: one FMA chain waits on its own latency every 8 elements (2048 elements
  // took 431 ns on the Zen 5, bench/README.md).
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
      acc[j] = _mm256_fmadd_ps(v, v, acc[j]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  float ss = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(weight + i), _mm256_mul_ps(vinv, _mm256_loadu_ps(x + i))));
  }
  for (; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

void Softmax(float* x, int64_t n) {
  // The maximum 8 lanes at a time (the compiler keeps a scalar loop scalar: a NaN makes max()
  // order-dependent); a NaN anywhere makes every output NaN below, whichever maximum this finds.
  __m256 lanes_max = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) lanes_max = _mm256_max_ps(lanes_max, _mm256_loadu_ps(x + i));
  float max = HorizontalMax(lanes_max);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = HorizontalSum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const __m256 vdiv = _mm256_set1_ps(sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vdiv));
  for (; i < n; ++i) x[i] /= sum;
}

void SiluMul(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const auto silu_mul = [&](__m256 g, __m256 u) {
    const __m256 sigmoid = _mm256_div_ps(one, _mm256_add_ps(one, Exp(_mm256_xor_ps(g, sign))));
    return _mm256_mul_ps(_mm256_mul_ps(g, sigmoid), u);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(gate + i, silu_mul(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  // The tail through the same vector arithmetic (masked), so an element's result does not depend
  // on where a call ends: a scalar std::exp tail made it depend on how rows were split into calls.
  if (i < n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    const __m256 g = _mm256_maskload_ps(gate + i, mask), u = _mm256_maskload_ps(up + i, mask);
    _mm256_maskstore_ps(gate + i, mask, silu_mul(g, u));
  }
}

namespace {

// Positions of V each head of a group sums while they sit in L1 (64 rows of 128 f32 = 32 KB).
constexpr int64_t kValueBlock = 64;

// Scores four positions at a time, so four independent FMA chains share each load of q, and heads
// two at a time, so each key chunk is loaded (and, from f16, converted) once for both. The
// weighted sum of V takes positions in blocks that every head uses before the next block is read;
// two heads share each loaded value chunk over 32 dimensions (eight accumulators), a lone head
// takes 64 dimensions. Between blocks the sums wait in `out`, so each output still adds its
// positions in order, as the reference does. One chain per head left the FMA latency exposed (~3x
// slower); a pass per head converted every f16 key and value once per head (bench/README.md).
//
// At long contexts the keys and values come from memory (every layer's cache is far larger than
// the caches), each pass one sequential stream: keys are prefetched kAhead positions ahead and,
// during the key pass, the same positions' values into L2, so both streams are in flight at once,
// and the value pass prefetches kAhead positions ahead too. Without it the 32-dimension value
// passes walk 64 rows a line at a time, which the hardware prefetcher follows poorly. Only when the
// caller says the rows are streamed (decode): in cache (prefill) the prefetches cost 10-27%.
constexpr int64_t kAhead = 16;

template <typename Row>
struct KvRows {
  const uint8_t* base;
  int64_t row_bytes, head_dim, n_positions;
  const uint8_t* At(int64_t p) const { return base + p * row_bytes; }
  // Into L1, or with kToL2 only into L2. (A bool, not GCC's `_mm_hint` enum: clang's hints are
  // plain integer macros.)
  template <bool kToL2>
  void Prefetch(int64_t from, int64_t count) const {
    const int64_t end = std::min(n_positions, from + count);
    for (int64_t p = from; p < end; ++p) {
      const char* row = reinterpret_cast<const char*>(At(p));
      for (int64_t at = 0; at < head_dim * Row::kBytes; at += 64) {
        if constexpr (kToL2) {
          _mm_prefetch(row + at, _MM_HINT_T1);
        } else {
          _mm_prefetch(row + at, _MM_HINT_T0);
        }
      }
    }
  }
};

// Scores of H (1 or 2) heads from q[0..H-1] into s[0..H-1].
template <typename Row, int H>
void ScoreHeads(const float* const* q, const KvRows<Row>& k, const KvRows<Row>& v, bool prefetch, float score_divisor,
                float* const* s) {
  const int64_t head_dim = k.head_dim, vec_dim = head_dim / 8 * 8;
  auto dot_tail = [&](const float* qh, const uint8_t* kt, float dot) {
    for (int64_t i = vec_dim; i < head_dim; ++i) dot += qh[i] * Row::Load1(kt, i);
    return dot;
  };
  int64_t t = 0;
  for (; t + 4 <= k.n_positions; t += 4) {
    if (prefetch) {
      k.template Prefetch<false>(t + kAhead, 4);
      v.template Prefetch<true>(t, 4);
    }
    const uint8_t* kt[4] = {k.At(t), k.At(t + 1), k.At(t + 2), k.At(t + 3)};
    __m256 acc[H][4];
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < 4; ++j) acc[h][j] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < vec_dim; i += 8) {
      __m256 kv[4];
      for (int j = 0; j < 4; ++j) kv[j] = Row::Load8(kt[j], i);
      for (int h = 0; h < H; ++h) {
        const __m256 qi = _mm256_loadu_ps(q[h] + i);
        for (int j = 0; j < 4; ++j) acc[h][j] = _mm256_fmadd_ps(qi, kv[j], acc[h][j]);
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < 4; ++j) s[h][t + j] = dot_tail(q[h], kt[j], HorizontalSum(acc[h][j])) / score_divisor;
    }
  }
  for (; t < k.n_positions; ++t) {
    const uint8_t* kt = k.At(t);
    for (int h = 0; h < H; ++h) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t i = 0; i < vec_dim; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i), Row::Load8(kt, i), acc);
      s[h][t] = dot_tail(q[h], kt, HorizontalSum(acc)) / score_divisor;
    }
  }
}

// out[h] (+)= sum over positions p0..p1-1 of s[h][p] * v[p], for H (1 or 2) heads; the sums start
// from zero at p0 == 0 and continue from out after it.
template <typename Row, int H>
void WeighValues(const float* const* s, const KvRows<Row>& v, int64_t p0, int64_t p1, bool prefetch,
                 float* const* out) {
  const int64_t head_dim = v.head_dim, vec_dim = head_dim / 8 * 8;
  constexpr int kChunks = 8 / H;  // 8-float chunks per pass: eight accumulators in all
  int64_t i = 0;
  for (; i + 8 * kChunks <= vec_dim; i += 8 * kChunks) {
    __m256 acc[H][kChunks];
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < kChunks; ++j) acc[h][j] = p0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(out[h] + i + 8 * j);
    }
    for (int64_t p = p0; p < p1; ++p) {
      if (prefetch && i == 0) v.template Prefetch<false>(p + kAhead, 1);
      const uint8_t* vt = v.At(p);
      __m256 vv[kChunks];
      for (int j = 0; j < kChunks; ++j) vv[j] = Row::Load8(vt, i + 8 * j);
      for (int h = 0; h < H; ++h) {
        const __m256 weight = _mm256_set1_ps(s[h][p]);
        for (int j = 0; j < kChunks; ++j) acc[h][j] = _mm256_fmadd_ps(weight, vv[j], acc[h][j]);
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < kChunks; ++j) _mm256_storeu_ps(out[h] + i + 8 * j, acc[h][j]);
    }
  }
  for (; i < vec_dim; i += 8) {
    for (int h = 0; h < H; ++h) {
      __m256 acc = p0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(out[h] + i);
      for (int64_t p = p0; p < p1; ++p) acc = _mm256_fmadd_ps(_mm256_set1_ps(s[h][p]), Row::Load8(v.At(p), i), acc);
      _mm256_storeu_ps(out[h] + i, acc);
    }
  }
  for (; i < head_dim; ++i) {
    for (int h = 0; h < H; ++h) {
      float acc = p0 == 0 ? 0.0f : out[h][i];
      for (int64_t p = p0; p < p1; ++p) acc += s[h][p] * Row::Load1(v.At(p), i);
      out[h][i] = acc;
    }
  }
}

template <typename Row>
void AttentionRows(const float* q, int64_t n_heads, const uint8_t* k, const uint8_t* v, int64_t row_bytes,
                   int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out,
                   bool streamed) {
  const KvRows<Row> keys{k, row_bytes, head_dim, n_positions}, values{v, row_bytes, head_dim, n_positions};
  // Only the first head pair's passes prefetch (when streamed): later pairs find the rows in cache.
  for (int64_t h = 0; h < n_heads; h += 2) {
    const float* qh[2] = {q + h * head_dim, q + (h + 1) * head_dim};
    float* sh[2] = {scores + h * n_positions, scores + (h + 1) * n_positions};
    if (h + 1 < n_heads) {
      ScoreHeads<Row, 2>(qh, keys, values, streamed && h == 0, score_divisor, sh);
    } else {
      ScoreHeads<Row, 1>(qh, keys, values, streamed && h == 0, score_divisor, sh);
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) Softmax(scores + h * n_positions, n_positions);
  for (int64_t p0 = 0; p0 < n_positions; p0 += kValueBlock) {
    const int64_t p1 = std::min(n_positions, p0 + kValueBlock);
    for (int64_t h = 0; h < n_heads; h += 2) {
      const float* sh[2] = {scores + h * n_positions, scores + (h + 1) * n_positions};
      float* oh[2] = {out + h * head_dim, out + (h + 1) * head_dim};
      if (h + 1 < n_heads) {
        WeighValues<Row, 2>(sh, values, p0, p1, streamed && h == 0, oh);
      } else {
        WeighValues<Row, 1>(sh, values, p0, p1, streamed && h == 0, oh);
      }
    }
  }
}

}  // namespace

void Attention(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
               int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out, bool streamed) {
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  if (kv_dtype == DType::kF16) {
    AttentionRows<F16Row>(q, n_heads, kb, vb, kv_stride * F16Row::kBytes, n_positions, head_dim, score_divisor, scores,
                          out, streamed);
  } else {
    AttentionRows<F32Row>(q, n_heads, kb, vb, kv_stride * F32Row::kBytes, n_positions, head_dim, score_divisor, scores,
                          out, streamed);
  }
}

// 8 pairs per step. Products and sums rounded as the reference rounds them (no FMA), so the result
// is identical.
void Rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int64_t half = head_dim / 2;
  if (style == RopeStyle::kHalfSplit) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* a = x + h * head_dim;
      float* b = a + half;
      int64_t i = 0;
      for (; i + 8 <= half; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos + i), sn = _mm256_loadu_ps(sin + i);
        const __m256 v0 = _mm256_loadu_ps(a + i), v1 = _mm256_loadu_ps(b + i);
        _mm256_storeu_ps(a + i, _mm256_sub_ps(_mm256_mul_ps(v0, c), _mm256_mul_ps(v1, sn)));
        _mm256_storeu_ps(b + i, _mm256_add_ps(_mm256_mul_ps(v0, sn), _mm256_mul_ps(v1, c)));
      }
      for (; i < half; ++i) {
        const float v0 = a[i], v1 = b[i];
        a[i] = v0 * cos[i] - v1 * sin[i];
        b[i] = v0 * sin[i] + v1 * cos[i];
      }
    }
    return;
  }
  // Interleaved pairs sit side by side, so each cos/sin is stored twice (sin negated for the even
  // element), a chunk at a time: x' = x * cos + swap_pairs(x) * (-sin, sin).
  constexpr int64_t kChunk = 64;
  alignas(32) float cosines[2 * kChunk], sines[2 * kChunk];
  for (int64_t start = 0; start < half; start += kChunk) {
    const int64_t count = std::min(kChunk, half - start);
    for (int64_t i = 0; i < count; ++i) {
      cosines[2 * i] = cosines[2 * i + 1] = cos[start + i];
      sines[2 * i] = -sin[start + i];
      sines[2 * i + 1] = sin[start + i];
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim + 2 * start;
      int64_t i = 0;
      for (; i + 8 <= 2 * count; i += 8) {
        const __m256 xv = _mm256_loadu_ps(p + i);
        const __m256 swapped = _mm256_permute_ps(xv, 0xB1);  // (x1, x0, x3, x2, ...)
        _mm256_storeu_ps(p + i, _mm256_add_ps(_mm256_mul_ps(xv, _mm256_load_ps(cosines + i)),
                                              _mm256_mul_ps(swapped, _mm256_load_ps(sines + i))));
      }
      for (; i < 2 * count; i += 2) {
        const float v0 = p[i], v1 = p[i + 1];
        p[i] = v0 * cosines[i] - v1 * sines[i + 1];
        p[i + 1] = v0 * sines[i + 1] + v1 * cosines[i];
      }
    }
  }
}

#endif  // !KESTREL_AVX2_WITH_VNNI

}  // namespace kestrel::KESTREL_AVX2_NAMESPACE
