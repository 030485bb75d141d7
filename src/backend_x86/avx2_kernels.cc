// AVX2 + FMA + F16C kernels. This is the only file compiled with -mavx2 -mfma -mf16c; it includes
// nothing but the kernel types and intrinsics, and keeps every helper in an anonymous namespace,
// so no AVX2 code can leak into shared inline functions.
//
// Quantized products vectorize across 8 weight rows: each lane owns one row and accumulates its
// blocks in ascending order with a separate multiply and add, exactly as the generic reference
// does, so results are bit-identical. Integer block sums use the maddubs sign trick.
#include "backend_x86/avx2_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace kestrel::avx2 {
namespace {

constexpr int kRowGroup = 8;    // rows per vector of accumulators
constexpr int kTokenTile = 8;   // tokens sharing each loaded weight block in prefill

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// int32 lanes of the 32-element int8 dot product of w and a (a must not hold -128).
inline __m256i DotI8(__m256i w, __m256i a) {
  const __m256i abs_w = _mm256_sign_epi8(w, w);
  const __m256i signed_a = _mm256_sign_epi8(a, w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_a), _mm256_set1_epi16(1));
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

// q8_0x8: one tile is exactly the 8-row group; row i's 8-byte chunk k is at 16 + (k * 8 + i) * 8.
// The 32 bytes at 16 + k * 64 hold chunk k of rows 0-3 (and the next 32 of rows 4-7), so a 4x4
// transpose of 64-bit elements gives each row's 32 quants.
struct TiledQ8_0x8 {
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n, int64_t b, __m256i* w, uint16_t* d) {
    (void)n;  // tiled rows always fill the tile
    const uint8_t* group = data + ((r0 / 8) * blocks + b) * 34 * 8;
    std::memcpy(d, group, 16);
    const uint8_t* q = group + 16;
    for (int half = 0; half < 2; ++half) {
      __m256i c[4];
      for (int k = 0; k < 4; ++k) c[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k * 64 + half * 32));
      const __m256i t0 = _mm256_unpacklo_epi64(c[0], c[1]);
      const __m256i t1 = _mm256_unpackhi_epi64(c[0], c[1]);
      const __m256i t2 = _mm256_unpacklo_epi64(c[2], c[3]);
      const __m256i t3 = _mm256_unpackhi_epi64(c[2], c[3]);
      w[half * 4 + 0] = _mm256_permute2x128_si256(t0, t2, 0x20);
      w[half * 4 + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
      w[half * 4 + 2] = _mm256_permute2x128_si256(t0, t2, 0x31);
      w[half * 4 + 3] = _mm256_permute2x128_si256(t1, t3, 0x31);
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
          const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(HalfToFloat(a.d)));
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

// Sum of a Q8_0 block's 32 quants.
inline int32_t BlockSum(const BlockQ8_0& a) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
  const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
}

// Q4_0 in q4_0x4 tiles, two tiles (8 rows) at a time. The tile's bytes are used as they lie: dword
// lane j of the first 32 quant bytes is chunk j/4 of row j%4, so one permuted copy of the activation
// block serves all four rows, and the unsigned nibbles go straight into maddubs; the -8 offset is
// applied once per block as 8 * sum(a). Integer sums are exact, so results equal the reference's.
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

template <typename Row>
void MatmulFloat(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t n = w.columns;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = data + r * n * Row::kBytes;
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const float* a = x.f32 + t * x.columns;
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      int64_t c = 0;
      for (; c + 16 <= n; c += 16) {
        acc0 = _mm256_fmadd_ps(Row::Load8(row, c), _mm256_loadu_ps(a + c), acc0);
        acc1 = _mm256_fmadd_ps(Row::Load8(row, c + 8), _mm256_loadu_ps(a + c + 8), acc1);
      }
      for (; c + 8 <= n; c += 8) acc0 = _mm256_fmadd_ps(Row::Load8(row, c), _mm256_loadu_ps(a + c), acc0);
      float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
      for (; c < n; ++c) sum += Row::Load1(row, c) * a[c];
      y[t * y_stride + r] = sum;
    }
  }
}

// Round half away from zero, as lround does: trunc, then step away when the exact fraction >= 0.5.
inline __m256i RoundHalfAway(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(v, t);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 abs_frac = _mm256_andnot_ps(sign_mask, frac);
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign_mask), _mm256_set1_ps(1.0f));
  const __m256 add = _mm256_and_ps(_mm256_cmp_ps(abs_frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step);
  return _mm256_cvttps_epi32(_mm256_add_ps(t, add));
}

// Software fp32 -> fp16 of the scale, identical to the format module's (round to nearest even).
inline uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0)); }

constexpr int64_t kMaxTiledBlocks = 1024;  // per-block activation sums live on the stack

// Plain Q4_0 rows are brought into the q4_0x4 arrangement in registers (a 4x4 transpose of 32-bit
// chunks), so both layouts share the kernel below.
struct Q4Tiles {
  // Scales (4 halves) and the 64 interleaved quant bytes of the 4-row tile starting at `row`.
  static void Load(const uint8_t* data, int64_t blocks, int64_t row, int64_t b, __m128i* scales, __m256i* y0,
                   __m256i* y1) {
    const uint8_t* g = data + ((row / 4) * blocks + b) * 72;
    *scales = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g));
    *y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 8));
    *y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 40));
  }
};
struct Q4Rows {
  static void Load(const uint8_t* data, int64_t blocks, int64_t row, int64_t b, __m128i* scales, __m256i* y0,
                   __m256i* y1) {
    __m128i r[4];
    uint16_t d[4];
    for (int i = 0; i < 4; ++i) {
      const uint8_t* block = data + ((row + i) * blocks + b) * 18;
      std::memcpy(&d[i], block, 2);
      r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    }
    *scales = _mm_setr_epi16(static_cast<int16_t>(d[0]), static_cast<int16_t>(d[1]), static_cast<int16_t>(d[2]),
                             static_cast<int16_t>(d[3]), 0, 0, 0, 0);
    const __m128i a = _mm_unpacklo_epi32(r[0], r[1]), bb = _mm_unpackhi_epi32(r[0], r[1]);
    const __m128i c = _mm_unpacklo_epi32(r[2], r[3]), dd = _mm_unpackhi_epi32(r[2], r[3]);
    *y0 = _mm256_set_m128i(_mm_unpackhi_epi64(a, c), _mm_unpacklo_epi64(a, c));    // chunks 0, 1
    *y1 = _mm256_set_m128i(_mm_unpackhi_epi64(bb, dd), _mm_unpacklo_epi64(bb, dd));  // chunks 2, 3
  }
};

template <typename Tiles>
void MatmulQ4_0x4(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t blocks = w.columns / 32;
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i pick0 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), pick1 = _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5);
  const __m256i pick2 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3), pick3 = _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7);
  alignas(32) int32_t offset[kTokenTile][kMaxTiledBlocks];
  for (int64_t t0 = 0; t0 < x.n_tokens; t0 += kTokenTile) {
    const int n_tok = static_cast<int>(x.n_tokens - t0 < kTokenTile ? x.n_tokens - t0 : kTokenTile);
    for (int t = 0; t < n_tok; ++t) {
      for (int64_t b = 0; b < blocks; ++b) offset[t][b] = 8 * BlockSum(x.q8_0[(t0 + t) * blocks + b]);
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 8) {
      const bool two = r0 + 4 < row_end;
      __m256 acc[kTokenTile];
      for (int t = 0; t < kTokenTile; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < blocks; ++b) {
        __m128i scales[2];
        __m256i q[2][4];
        for (int tile = 0; tile < 2; ++tile) {
          __m256i y0, y1;
          // A missing second tile repeats the first; its lanes are never stored.
          Tiles::Load(data, blocks, tile && two ? r0 + 4 : r0, b, &scales[tile], &y0, &y1);
          q[tile][0] = _mm256_and_si256(y0, nibble);
          q[tile][1] = _mm256_and_si256(_mm256_srli_epi16(y0, 4), nibble);
          q[tile][2] = _mm256_and_si256(y1, nibble);
          q[tile][3] = _mm256_and_si256(_mm256_srli_epi16(y1, 4), nibble);
        }
        const __m256 w_scale = _mm256_cvtph_ps(_mm_unpacklo_epi64(scales[0], scales[1]));
        for (int t = 0; t < n_tok; ++t) {
          const BlockQ8_0& a = x.q8_0[(t0 + t) * blocks + b];
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
          const __m256i p0 = _mm256_permutevar8x32_epi32(av, pick0), p1 = _mm256_permutevar8x32_epi32(av, pick1);
          const __m256i p2 = _mm256_permutevar8x32_epi32(av, pick2), p3 = _mm256_permutevar8x32_epi32(av, pick3);
          __m128i folded[2];
          for (int tile = 0; tile < 2; ++tile) {
            // Each maddubs lane is at most 2 * 15 * 128 in magnitude, so four fit in int16.
            const __m256i s16 = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_maddubs_epi16(q[tile][0], p0), _mm256_maddubs_epi16(q[tile][1], p1)),
                _mm256_add_epi16(_mm256_maddubs_epi16(q[tile][2], p2), _mm256_maddubs_epi16(q[tile][3], p3)));
            const __m256i s32 = _mm256_madd_epi16(s16, ones16);
            folded[tile] = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
          }
          const __m256i sums = _mm256_sub_epi32(_mm256_set_m128i(folded[1], folded[0]), _mm256_set1_epi32(offset[t][b]));
          const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(HalfToFloat(a.d)));
          acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale));
        }
      }
      alignas(32) float out[8];
      const int n_rows = two ? 8 : 4;
      for (int t = 0; t < n_tok; ++t) {
        _mm256_store_ps(out, acc[t]);
        for (int i = 0; i < n_rows; ++i) y[(t0 + t) * y_stride + r0 + i] = out[i];
      }
    }
  }
}

}  // namespace

void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t n) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    __m256 q[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_loadu_ps(v + i * 8);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, q[i]));
    }
    const float max = HorizontalMax(amax);
    const float d = max / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = FloatToHalf(d);
    const __m256 scale = _mm256_set1_ps(id);
    __m256i i32[4];
    for (int i = 0; i < 4; ++i) i32[i] = RoundHalfAway(_mm256_mul_ps(q[i], scale));
    const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]);
    const __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), packed);
  }
}

bool Accepts(DType dtype, Layout layout) {
  if (layout == Layout::kPlain) return true;
  return (layout == Layout::kQ4_0x4 && dtype == DType::kQ4_0) || (layout == Layout::kQ8_0x8 && dtype == DType::kQ8_0);
}

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0:
      if (w.layout == Layout::kQ8_0x8) return MatmulQuantized<TiledQ8_0x8>(w, x, y, y_stride, row_begin, row_end);
      return MatmulQuantized<PlainQ8_0>(w, x, y, y_stride, row_begin, row_end);
    case DType::kQ4_0:
      if (w.layout == Layout::kQ4_0x4) {
        if (w.columns / 32 <= kMaxTiledBlocks) return MatmulQ4_0x4<Q4Tiles>(w, x, y, y_stride, row_begin, row_end);
        return MatmulQuantized<TiledQ4_0x4>(w, x, y, y_stride, row_begin, row_end);
      }
      // Whole 4-row groups through the shared kernel; a remainder of 1-3 rows the general way.
      if (w.columns / 32 <= kMaxTiledBlocks) {
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

void Rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float ss = HorizontalSum(acc);
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(weight + i), _mm256_mul_ps(vinv, _mm256_loadu_ps(x + i))));
  }
  for (; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

void Softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const __m256 vsum = _mm256_set1_ps(sum);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vsum));
  for (; i < n; ++i) x[i] /= sum;
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

void Attention(const float* q, const void* k, const void* v, DType kv_dtype, int64_t kv_stride, int64_t n_positions,
               int64_t head_dim, float score_divisor, float* scores, float* out) {
  const bool half = kv_dtype == DType::kF16;
  const auto* k_bytes = static_cast<const uint8_t*>(k);
  const auto* v_bytes = static_cast<const uint8_t*>(v);
  const int64_t elem = half ? 2 : 4;
  auto load8 = [&](const uint8_t* base, int64_t index) {
    return half ? F16Row::Load8(base, index) : F32Row::Load8(base, index);
  };
  auto load1 = [&](const uint8_t* base, int64_t index) {
    return half ? F16Row::Load1(base, index) : F32Row::Load1(base, index);
  };
  for (int64_t t = 0; t < n_positions; ++t) {
    const uint8_t* kt = k_bytes + t * kv_stride * elem;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= head_dim; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(kt, i), acc);
    float dot = HorizontalSum(acc);
    for (; i < head_dim; ++i) dot += q[i] * load1(kt, i);
    scores[t] = dot / score_divisor;
  }
  Softmax(scores, n_positions);
  int64_t i = 0;
  for (; i + 8 <= head_dim; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t t = 0; t < n_positions; ++t) {
      acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[t]), load8(v_bytes + t * kv_stride * elem, i), acc);
    }
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < head_dim; ++i) {
    float acc = 0.0f;
    for (int64_t t = 0; t < n_positions; ++t) acc += scores[t] * load1(v_bytes + t * kv_stride * elem, i);
    out[i] = acc;
  }
}

}  // namespace kestrel::avx2
