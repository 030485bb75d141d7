// AMX-BF16 kernels: the quantized prefill products (Q4_0 and Q8_0 weights, plain and tiled) as
// bf16 products on the tile unit, with TDPBF16PS. The only file compiled with -mamx-bf16 and
// -mavx512bf16; like the other ISA units it includes nothing but the kernel types, intrinsics and
// the shared AVX-512 weight loaders, and keeps every helper in an anonymous namespace.
//
// Why bf16 and not amx_int8's exact integer blocks: there each block's int32 sums must leave the
// tile unit (a tile store per 16 x 16 x 32 product) and be scaled on the vector units, about 100 ns
// per block of 16 rows for 64 tokens. Here the weights are dequantized (w = q * d_w, rounded to
// bf16) once per 64 tokens and the activations are rounded to bf16 (by the session, once per
// product: KernelTable::f32_to_bf16), so the C tiles accumulate in f32 over a whole row of
// blocks and leave the tile unit once per strip: about 67 ns per block for Q4_0 and 82 for Q8_0
// (36 of tile loads and products, 31 or 46 of dequantizing; the two do not overlap on the one AMX
// CPU measured, each left out in turn: bench/README.md). The
// price: results are not bit-identical to the reference; each weight and activation carries a
// relative rounding error of at most 2^-9 (the conformance test's bound, tests/kernels_test.cc).
//
// Layout: C (16 tokens x 16 weight rows, f32) += A (16 tokens x 32 bf16 activations) . B (one block
// of 16 rows in VNNI pairs: row k holds, for each weight row n, its elements 2k and 2k+1). C's
// rows are y's rows, so full tiles store straight to y; A's rows are the bf16 activation rows
// (64 bytes longer than the row, so that 16 of them are not 4 KB apart). Each 16-row strip runs
// its blocks once: each block dequantized into B (a ring of three buffers, one block ahead), then
// four products, one per 16-token tile. Prompts shorter than kMinTokens go to amx_int8 (too few
// tokens to pay for the dequantizing).
#define KESTREL_AVX512_NAMESPACE amx_bf16
#include "backend_x86/amx_bf16_kernels.h"

#include <cstring>

#include "backend_x86/amx_kernels.h"
#include "backend_x86/amx_tiles.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_weight_blocks.h"

namespace kestrel::amx_bf16 {
namespace {

constexpr int kTileTokens = 16;    // tokens per A and C tile
constexpr int kMaxTokenTiles = 4;  // C tiles 0-3

// Tile registers: C 0-3 (one per 16-token tile), A 4 and 5 (alternating token tiles), B 6 and 7
// (alternating blocks).
constexpr int kA0 = 4, kB0 = 6;

void ConfigureTiles() {
  TileConfig config = Palette1();
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;  // every tile 16 x 64 bytes
  LoadTileConfig(config);
}

// Tile loads, stores and products in inline assembly (why: amx_kernels.cc); a load names the
// first 1 KB it reads (a block's B tile, whole; the A tiles' rows lie further apart, written
// before the loop, with a compiler barrier after them).
template <int kTile>
inline void TileLoad(const void* base, int64_t stride) {
  __asm__ volatile("tileloadd (%1,%2,1), %%tmm%c0" ::"i"(kTile), "r"(base), "r"(stride),
                   "m"(*static_cast<const uint8_t(*)[1024]>(base)));
}

template <int kTile>
inline void TileStore(void* base, int64_t stride) {
  __asm__ volatile("tilestored %%tmm%c0, (%1,%2,1)" ::"i"(kTile), "r"(base), "r"(stride) : "memory");
}

template <int kC, int kA, int kB>
inline void TileMultiply() {
  __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB));
}

// One block of 16 weight rows as TDPBF16PS's B operand: pair[k][n] = (w[n][2k], w[n][2k + 1]).
struct alignas(64) BTile {
  uint32_t pair[16][16];
};

// Two f32 vectors rounded to bf16 (nearest even) and interleaved: word 2n is a[n], word 2n + 1 b[n].
inline __m512i PairToBf16(__m512 a, __m512 b) {
  const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));  // a's 16 words, then b's
  alignas(64) static constexpr uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), halves);
}

// Block b of 16 rows (rows past n_rows zero) dequantized into B order: w = q * d_w.
// Q4_0: a nibble's value as a float is looked up (VPERMPS reads only an index's low 4 bits, so
// one shift finds each nibble): 3 instructions per 16 values where converting takes 4.
template <typename Weights>
inline void DequantizeBlock(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, BTile* out) {
  if constexpr (Weights::kZeroPoint == 8) {
    __m256i scales;
    __m512i chunk[4];  // lane n of chunk[k]: bytes 4k..4k+3 of row n (low nibbles 4k.., high 16+4k..)
    Weights::LoadChunks(data, blocks, r0, n_rows, b, &scales, chunk);
    const __m512 d = HalvesToFloat(scales);
    const __m512 value = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const auto element = [&](int k, int shift) {
      return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(chunk[k], shift), value), d);
    };
    for (int k = 0; k < 4; ++k) {
      // Pairs (4k, 4k+1) and (4k+2, 4k+3) from the low nibbles, the same from the high ones (+16).
      _mm512_store_si512(out->pair[2 * k], PairToBf16(element(k, 0), element(k, 8)));
      _mm512_store_si512(out->pair[2 * k + 1], PairToBf16(element(k, 16), element(k, 24)));
      _mm512_store_si512(out->pair[8 + 2 * k], PairToBf16(element(k, 4), element(k, 12)));
      _mm512_store_si512(out->pair[8 + 2 * k + 1], PairToBf16(element(k, 20), element(k, 28)));
    }
  } else {
    WeightBlock w;
    Weights::template Load<true>(data, blocks, r0, n_rows, b, &w);  // Q8_0: the signed quants
    for (int k = 0; k < 8; ++k) {
      // Lane n: row n's signed bytes 4k..4k+3; each byte sign-extended in place by two shifts.
      const __m512i s = w.u[k];
      const __m512 e0 = _mm512_mul_ps(IntToFloat(_mm512_srai_epi32(_mm512_slli_epi32(s, 24), 24)), w.scale);
      const __m512 e1 = _mm512_mul_ps(IntToFloat(_mm512_srai_epi32(_mm512_slli_epi32(s, 16), 24)), w.scale);
      const __m512 e2 = _mm512_mul_ps(IntToFloat(_mm512_srai_epi32(_mm512_slli_epi32(s, 8), 24)), w.scale);
      const __m512 e3 = _mm512_mul_ps(IntToFloat(_mm512_srai_epi32(s, 24)), w.scale);
      _mm512_store_si512(out->pair[2 * k], PairToBf16(e0, e1));
      _mm512_store_si512(out->pair[2 * k + 1], PairToBf16(e2, e3));
    }
  }
}

// C tile kTile -> y (16 tokens x 16 rows); a partial tile goes through `scratch`.
template <int kTile>
inline void StoreSums(float* y, int64_t y_stride, int n_tokens, int n_rows, float (*scratch)[16]) {
  if (n_tokens == kTileTokens && n_rows == 16) return TileStore<kTile>(y, y_stride * 4);
  TileStore<kTile>(scratch, 64);
  for (int t = 0; t < n_tokens; ++t)
    std::memcpy(y + t * y_stride, scratch[t], sizeof(float) * static_cast<size_t>(n_rows));
}

// How far ahead (in blocks) the weights are prefetched, into the next strip past the end of this one.
constexpr int64_t kPrefetchBlocks = 8;

// One strip (rows r0 .. r0 + n_rows - 1) over all its blocks for kTiles token tiles: the sums stay
// in the C tiles from the first block to the last. a: the chunk's first token's bf16 row, rows
// a_stride elements apart (a tile row is one block of one token: 64 bytes).
// y: the chunk's first token at the strip's first row; tokens: how many of the chunk's are real.
// next_rows: rows of the strip after this one (0: none), prefetched as this one ends.
template <int kTiles, typename Weights>
void Strip(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, const uint16_t* a, int64_t a_stride, float* y,
           int64_t y_stride, int64_t tokens, int next_rows) {
  const int64_t a_bytes = a_stride * 2, tile_step = kTileTokens * a_stride;
  alignas(64) BTile ring[3];
  const auto prefetch = [&](int64_t i) {
    const int64_t ahead = i + kPrefetchBlocks;
    if (ahead < blocks) {
      Weights::Prefetch(data, blocks, r0, n_rows, ahead);
    } else if (next_rows > 0) {
      Weights::Prefetch(data, blocks, r0 + kRows, next_rows, ahead - blocks);
    }
  };
  // Block i + 1 is dequantized before block i's products are issued (after them measured the
  // same; the core does not overlap the two either way).
  const auto dequantize = [&](int64_t i) {
    prefetch(i);
    DequantizeBlock<Weights>(data, blocks, r0, n_rows, i, &ring[i % 3]);
  };
  const auto block = [&](auto set, int64_t i) {
    constexpr int b_tile = kB0 + decltype(set)::value;
    TileLoad<b_tile>(&ring[i % 3], 64);
    if (i + 1 < blocks) dequantize(i + 1);
    TileLoad<kA0>(a + 32 * i, a_bytes);
    TileMultiply<0, kA0, b_tile>();
    if constexpr (kTiles > 1) {
      TileLoad<kA0 + 1>(a + tile_step + 32 * i, a_bytes);
      TileMultiply<1, kA0 + 1, b_tile>();
    }
    if constexpr (kTiles > 2) {
      TileLoad<kA0>(a + 2 * tile_step + 32 * i, a_bytes);
      TileMultiply<2, kA0, b_tile>();
    }
    if constexpr (kTiles > 3) {
      TileLoad<kA0 + 1>(a + 3 * tile_step + 32 * i, a_bytes);
      TileMultiply<3, kA0 + 1, b_tile>();
    }
  };
  TileZero<0>();
  if constexpr (kTiles > 1) TileZero<1>();
  if constexpr (kTiles > 2) TileZero<2>();
  if constexpr (kTiles > 3) TileZero<3>();
  dequantize(0);
  int64_t i = 0;
  for (; i + 1 < blocks; i += 2) {
    block(std::integral_constant<int, 0>{}, i);
    block(std::integral_constant<int, 1>{}, i + 1);
  }
  if (i < blocks) block(std::integral_constant<int, 0>{}, i);
  alignas(64) float scratch[16][16];
  const auto tile_tokens = [&](int k) {
    return static_cast<int>(tokens - k * kTileTokens < kTileTokens ? tokens - k * kTileTokens : kTileTokens);
  };
  StoreSums<0>(y, y_stride, tile_tokens(0), n_rows, scratch);
  if constexpr (kTiles > 1) StoreSums<1>(y + 16 * y_stride, y_stride, tile_tokens(1), n_rows, scratch);
  if constexpr (kTiles > 2) StoreSums<2>(y + 32 * y_stride, y_stride, tile_tokens(2), n_rows, scratch);
  if constexpr (kTiles > 3) StoreSums<3>(y + 48 * y_stride, y_stride, tile_tokens(3), n_rows, scratch);
}

}  // namespace

void F32ToBf16(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i v =
        reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    _mm512_storeu_si512(out + i, v);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i < 16 ? n - i : 16)) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 hi = n - i > 16 ? _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - i - 16)) - 1), x + i + 16)
                                 : _mm512_setzero_ps();
    const __m512i v = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    _mm512_mask_storeu_epi16(out + i, static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1), v);
  }
}

namespace {

using StripFn = void (*)(const uint8_t*, int64_t, int64_t, int, const uint16_t*, int64_t, float*, int64_t, int64_t,
                         int);

template <typename Weights>
void PrefillRows(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end) {
  static constexpr StripFn kByTiles[kMaxTokenTiles] = {Strip<1, Weights>, Strip<2, Weights>, Strip<3, Weights>,
                                                       Strip<4, Weights>};
  constexpr int64_t kTokenChunk = kMaxTokenTiles * kTileTokens;
  const uint16_t* a = x.bf16;
  int64_t a_stride = x.bf16_stride;
  if (a == nullptr) {
    // Not rounded by the session (a direct caller): rounded here, as the session lays them out.
    a_stride = x.columns + kBf16RowPad;
    const auto rows = static_cast<size_t>(x.n_tokens + kTileTokens);
    auto* rounded = static_cast<uint16_t*>(StagingBuffer(rows * static_cast<size_t>(a_stride) * 2));
    for (int64_t t = 0; t < x.n_tokens; ++t) F32ToBf16(x.f32 + t * x.columns, rounded + t * a_stride, x.columns);
    a = rounded;
    __asm__ volatile("" ::: "memory");  // every row stored before the tile loads that read them
  }
  ConfigureTiles();
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += kTokenChunk) {
    const int64_t c_tokens = x.n_tokens - c0 < kTokenChunk ? x.n_tokens - c0 : kTokenChunk;
    const int n_tiles = static_cast<int>((c_tokens + kTileTokens - 1) / kTileTokens);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int n_rows = static_cast<int>(row_end - r0 < kRows ? row_end - r0 : kRows);
      const int64_t after = row_end - (r0 + kRows);
      const int next_rows = static_cast<int>(after <= 0 ? 0 : (after < kRows ? after : kRows));
      kByTiles[n_tiles - 1](data, blocks, r0, n_rows, a + c0 * a_stride, a_stride, y + c0 * y_stride + r0, y_stride,
                            c_tokens, next_rows);
    }
  }
  _tile_release();
}

}  // namespace

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const bool quantized = w.dtype == DType::kQ4_0 || w.dtype == DType::kQ8_0;
  const int64_t blocks = w.columns / 32;
  if (!quantized || x.n_tokens < kMinTokens || x.f32 == nullptr || blocks == 0 || row_begin >= row_end) {
    return amx_int8::Matmul(w, x, y, y_stride, row_begin, row_end);
  }
  const auto* data = static_cast<const uint8_t*>(w.data);
  WithQuantizedLoader(w, [&](auto loader) {
    PrefillRows<decltype(loader)>(data, blocks, x, y, y_stride, row_begin, row_end);
  });
}

}  // namespace kestrel::amx_bf16
