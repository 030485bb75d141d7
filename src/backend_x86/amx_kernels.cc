// AMX kernels: the quantized prefill products (Q4_0 and Q8_0 weights, plain and tiled) on the tile
// unit, with TDPBSSD. The only file compiled with -mamx-tile -mamx-int8; like the AVX-512 units it
// includes nothing but the kernel types, intrinsics and the shared AVX-512 weight loaders, and keeps
// every helper in an anonymous namespace.
//
// Why per block: a block's integer sum must be scaled by its own d_w * d_a before it joins the
// row's float sum (the reference's order, so results stay bit-identical to the generic backend),
// so each TDPBSSD covers one block (K = 32): C (16 tokens x 16 rows, int32) = A (16 tokens x 32
// activation bytes) . B (32 bytes x 16 rows, in the VNNI order the AVX-512 loaders already
// produce). The tile unit does the 8192 byte products; AVX-512 then converts, scales and adds the
// 256 sums (4 instructions per 16). The tile store of the sums and that scaling bound this loop:
// the store holds up the scaling's loads (its per-token d_a broadcasts most), so the two take about
// as long as they would one after the other, whether the scaling has 64 instructions or 48 fused
// ones; the products and tile loads hide under the scaling (measured part by part with
// kestrel-x86-amx-issue-rates, bench/README.md). Blocks alternate between two sets of tile
// registers, so one block's product runs while the previous one's sums are scaled.
//
// For each chunk of blocks, the activations of up to 64 tokens are copied into tile order, then
// each 16-row strip's blocks are unpacked once into signed bytes (a stack buffer in L1) that every
// 16-token tile reads, as the AVX-512 prefill does. Sums cross chunks through y. Decode (and prompts shorter than
// kMinTokens) go to the avx512_vnni kernels: one token fills 1/16 of a tile.
#define KESTREL_AVX512_NAMESPACE amx_int8
#include "backend_x86/amx_kernels.h"

#include <cstring>
#include <initializer_list>

#include "backend_x86/amx_tiles.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_kernels.h"
#include "backend_x86/avx512_weight_blocks.h"

namespace kestrel::amx_int8 {
namespace {

constexpr int kTileTokens = 16;      // tokens per tile (A and C rows)
constexpr int64_t kChunkBlocks = 32;  // blocks unpacked per strip chunk: 16 KB of B tiles + 2 KB of scales
constexpr int64_t kTokenChunk = 64;   // tokens staged per chunk of blocks: 64 KB of activations
constexpr int kBlockBytes = 32;       // K per TDPBSSD: one block
// Fewer tokens than this go to the avx512_vnni kernels (kernels bench: bench/README.md).
constexpr int64_t kMinTokens = 8;

// Tile registers: two sets, for blocks of even and odd index: C (sums) 0 and 1, A (activations) 2
// and 3, B (weights) 4 and 5. The tile instructions take the register number as a compile-time
// constant, so each set's is chosen in the functions below.
constexpr int kC0 = 0, kC1 = 1, kA0 = 2, kA1 = 3, kB0 = 4, kB1 = 5;

void ConfigureTiles() {
  TileConfig config = Palette1();
  for (int c : {kC0, kC1}) config.colsb[c] = 64, config.rows[c] = kTileTokens;  // 16 x 16 int32
  for (int a : {kA0, kA1}) config.colsb[a] = kBlockBytes, config.rows[a] = kTileTokens;
  for (int b : {kB0, kB1}) config.colsb[b] = 64, config.rows[b] = kBlockBytes / 4;  // 8 rows of 16 x 4 bytes
  LoadTileConfig(config);
}

// One block of 16 rows as TDPBSSD's B operand: row k holds, for each weight row n, its signed
// bytes 4k..4k+3.
struct alignas(64) BTile {
  int8_t bytes[kBlockBytes / 4][64];
};

// The loaders give unsigned bytes (Q4_0 nibbles, Q8_0 quants + 128); subtracting the zero point
// (8, or 128 modulo 256) makes them the signed weights.
template <typename Weights>
void UnpackBlock(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, BTile* out, float* scale) {
  WeightBlock w;
  Weights::Load(data, blocks, r0, n_rows, b, &w);
  const __m512i zero_point = _mm512_set1_epi8(static_cast<char>(Weights::kZeroPoint));
  for (int k = 0; k < kBlockBytes / 4; ++k) _mm512_store_si512(out->bytes[k], _mm512_sub_epi8(w.u[k], zero_point));
  _mm512_store_ps(scale, w.scale);
}

// A token tile's staged activations: tile[i] is block i of its 16 tokens, 32 bytes a token.
using TokenTileBytes = const int8_t (*)[kTileTokens][kBlockBytes];

// The tile instructions in inline assembly of our own rather than GCC's intrinsics: its
// _tile_stored clobbers all of memory, so every object whose address was taken had to live there,
// and the 16 accumulators of TokenTile went to the stack and back on every block (16 more loads
// and stores per block beside the tile store's 16). Here each instruction names the memory it
// reads or writes; volatile keeps the tile instructions in program order among themselves.
using TileSums = int32_t[kTileTokens][16];

template <int kTile, int kRows, int kRowBytes>
inline void TileLoad(const void* base) {
  __asm__ volatile("tileloadd (%1,%2,1), %%tmm%c0" ::"i"(kTile), "r"(base), "r"(static_cast<long>(kRowBytes)),
                   "m"(*static_cast<const int8_t(*)[kRows * kRowBytes]>(base)));
}

template <int kC, int kA, int kB>
inline void TileMultiply() {
  __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB));
}

template <int kTile>
inline void TileStore(TileSums* out) {
  __asm__ volatile("tilestored %%tmm%c1, (%2,%3,1)" : "=m"(*out) : "i"(kTile), "r"(*out), "r"(64L));
}

// Set kSet's C tile = its A tile (block i of the tokens) . its B tile (block i of the rows).
template <int kSet>
inline void MultiplyBlock(const BTile* w, TokenTileBytes a, int64_t i) {
  constexpr int c = kSet == 0 ? kC0 : kC1, a_tile = kSet == 0 ? kA0 : kA1, b_tile = kSet == 0 ? kB0 : kB1;
  TileZero<c>();
  TileLoad<a_tile, kTileTokens, kBlockBytes>(a[i][0]);
  TileLoad<b_tile, kBlockBytes / 4, 64>(w[i].bytes);
  TileMultiply<c, a_tile, b_tile>();
}

template <int kSet>
inline void StoreSums(TileSums* sums) {
  TileStore<kSet == 0 ? kC0 : kC1>(sums);
}

// acc[t] += float(sums[t]) * (d_w * d_a[t]) for one block: the reference's rounding, a multiply
// and then an add.
// a_scale[t]: token t's d_a for this block, kChunkBlocks floats apart (a constant offset each).
template <int kTokens>
inline void ScaleBlock(__m512* acc, const float* w_scale, const float* a_scale, const TileSums& sums) {
  const __m512 ws = _mm512_load_ps(w_scale);
#pragma GCC unroll 16
  for (int t = 0; t < kTokens; ++t) {
    const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a_scale[t * kChunkBlocks]));
    const __m512 v = IntToFloat(_mm512_load_si512(sums[t]));
    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(v, scale));
  }
}

// Blocks [b_begin, b_end) of the next strip (rows r0 .. r0 + n_rows - 1), to be prefetched while a
// token tile computes.
struct StripPrefetch {
  const uint8_t* data;
  int64_t blocks, r0;
  int n_rows;
  int64_t b_begin, b_end;
};

// kTokens tokens (rows of the A tile past them are read and ignored) against the n unpacked blocks
// of one strip chunk. a_scale[t][i]: token t's d_a for the chunk's block i. y: the first token's
// output at the strip's first row; sums start from zero when `first`, else continue from y (an f32
// store and load are exact). `next`: what to prefetch of the next strip meanwhile.
template <int kTokens, typename Weights>
void TokenTile(const BTile* w, const float (*w_scale)[16], int64_t n, TokenTileBytes a,
               const float (*a_scale)[kChunkBlocks], bool first, float* y, int64_t y_stride, int n_rows,
               StripPrefetch next) {
  // The next strip's blocks are prefetched a few lines at a time through the block loop: issued
  // together before it (a token tile's share, 64-80 lines), they held the core up until the line
  // fill buffers freed (kernels bench, alternated: up to 15% slower from memory; bench/README.md).
  const int64_t steps = n / 2 > 1 ? n / 2 - 1 : 1, count = next.b_end - next.b_begin;
  int64_t prefetched = 0;
  const auto prefetch_share = [&](int64_t step) {
    for (const int64_t due = (step + 1) * count / steps; prefetched < due; ++prefetched) {
      Weights::Prefetch(next.data, next.blocks, next.r0, next.n_rows, next.b_begin + prefetched);
    }
  };
  // Every loop over acc is unrolled, so it is indexed by constants only and can stay in registers.
  __m512 acc[kTokens];
#pragma GCC unroll 16
  for (int t = 0; t < kTokens; ++t) acc[t] = first ? _mm512_setzero_ps() : LoadRows(y + t * y_stride, n_rows);
  // Even blocks' sums go to sums[0], odd ones' to sums[1]; each block is scaled one block later,
  // while the tile unit works on the next product: scaling right after the store waited on it
  // (1.3-1.6x slower alone). Branch-free in the steady state, and acc is named by constants only.
  alignas(64) TileSums sums[2];
  MultiplyBlock<0>(w, a, 0);
  if (n == 1) {
    StoreSums<0>(&sums[0]);
    ScaleBlock<kTokens>(acc, w_scale[0], &a_scale[0][0], sums[0]);
  } else {
    MultiplyBlock<1>(w, a, 1);
    StoreSums<0>(&sums[0]);
    if (n > 2) MultiplyBlock<0>(w, a, 2);
    StoreSums<1>(&sums[1]);
    ScaleBlock<kTokens>(acc, w_scale[0], &a_scale[0][0], sums[0]);
    int64_t i = 2;  // block i is in the even set's tiles (when i < n), block i - 1's sums in sums[1]
    for (; i + 1 < n; i += 2) {
      prefetch_share(i / 2 - 1);
      MultiplyBlock<1>(w, a, i + 1);
      StoreSums<0>(&sums[0]);
      ScaleBlock<kTokens>(acc, w_scale[i - 1], &a_scale[0][i - 1], sums[1]);
      if (i + 2 < n) MultiplyBlock<0>(w, a, i + 2);
      StoreSums<1>(&sums[1]);
      ScaleBlock<kTokens>(acc, w_scale[i], &a_scale[0][i], sums[0]);
    }
    if (i < n) {
      StoreSums<0>(&sums[0]);
      ScaleBlock<kTokens>(acc, w_scale[i - 1], &a_scale[0][i - 1], sums[1]);
      ScaleBlock<kTokens>(acc, w_scale[i], &a_scale[0][i], sums[0]);
    } else {
      ScaleBlock<kTokens>(acc, w_scale[n - 1], &a_scale[0][n - 1], sums[1]);
    }
  }
  prefetch_share(steps - 1);  // what the loop had no steps for (short chunks)
#pragma GCC unroll 16
  for (int t = 0; t < kTokens; ++t) StoreRows(y + t * y_stride, acc[t], n_rows);
}

using TokenTileFn = void (*)(const BTile*, const float (*)[16], int64_t, TokenTileBytes, const float (*)[kChunkBlocks],
                             bool, float*, int64_t, int, StripPrefetch);

template <typename Weights>
void PrefillRows(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end) {
  static constexpr TokenTileFn kByTokens[kTileTokens] = {
      TokenTile<1, Weights>,  TokenTile<2, Weights>,  TokenTile<3, Weights>,  TokenTile<4, Weights>,
      TokenTile<5, Weights>,  TokenTile<6, Weights>,  TokenTile<7, Weights>,  TokenTile<8, Weights>,
      TokenTile<9, Weights>,  TokenTile<10, Weights>, TokenTile<11, Weights>, TokenTile<12, Weights>,
      TokenTile<13, Weights>, TokenTile<14, Weights>, TokenTile<15, Weights>, TokenTile<16, Weights>,
  };
  alignas(64) BTile strip[kChunkBlocks];
  alignas(64) float strip_scale[kChunkBlocks][16];
  // The activations of a chunk of blocks, copied once for every strip of the range into tile order:
  // each block of 16 tokens is 512 contiguous bytes (read with the activations' own 2-3 KB stride,
  // every tile row was another line from L2), zero rows past the last token. Their scales at a
  // fixed stride, so the scaling loop addresses them by constant offsets from one pointer.
  alignas(64) int8_t staged[kTokenChunk / kTileTokens][kChunkBlocks][kTileTokens][kBlockBytes];
  alignas(64) float a_scale[kTokenChunk / kTileTokens][kTileTokens][kChunkBlocks];
  ConfigureTiles();
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += kTokenChunk) {
    const int64_t c_tokens = x.n_tokens - c0 < kTokenChunk ? x.n_tokens - c0 : kTokenChunk;
    const int64_t n_tiles = (c_tokens + kTileTokens - 1) / kTileTokens;
    for (int64_t b0 = 0; b0 < blocks; b0 += kChunkBlocks) {
      const int64_t n = blocks - b0 < kChunkBlocks ? blocks - b0 : kChunkBlocks;
      for (int64_t t = 0; t < n_tiles * kTileTokens; ++t) {
        int8_t(*rows)[kTileTokens][kBlockBytes] = staged[t / kTileTokens];
        if (t >= c_tokens) {
          for (int64_t i = 0; i < n; ++i) std::memset(rows[i][t % kTileTokens], 0, kBlockBytes);
          continue;
        }
        const BlockQ8_0* a = x.q8_0 + (c0 + t) * blocks + b0;
        for (int64_t i = 0; i < n; ++i) std::memcpy(rows[i][t % kTileTokens], a[i].qs, kBlockBytes);
        std::memcpy(a_scale[t / kTileTokens][t % kTileTokens], x.q8_0_scales + (c0 + t) * blocks + b0,
                    static_cast<size_t>(n) * sizeof(float));
      }
      for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
        const int n_rows = static_cast<int>(row_end - r0 < kRows ? row_end - r0 : kRows);
        for (int64_t i = 0; i < n; ++i) {
          UnpackBlock<Weights>(data, blocks, r0, n_rows, b0 + i, &strip[i], strip_scale[i]);
        }
        // The next strip's blocks are prefetched a share per token tile, while this one computes.
        const int64_t next_r0 = r0 + kRows;
        const int next_rows = static_cast<int>(row_end - next_r0 < kRows ? row_end - next_r0 : kRows);
        int64_t prefetched = 0;
        for (int64_t k = 0; k < n_tiles; ++k) {
          const int64_t share = next_rows > 0 ? n * (k + 1) / n_tiles : 0;
          const StripPrefetch next{data, blocks, next_r0, next_rows, b0 + prefetched, b0 + share};
          prefetched = share;
          const int64_t t0 = c0 + k * kTileTokens;
          const int n_tok = static_cast<int>(x.n_tokens - t0 < kTileTokens ? x.n_tokens - t0 : kTileTokens);
          kByTokens[n_tok - 1](strip, strip_scale, n, staged[k], a_scale[k], b0 == 0, y + t0 * y_stride + r0, y_stride,
                               n_rows, next);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const bool quantized = w.dtype == DType::kQ4_0 || w.dtype == DType::kQ8_0;
  const int64_t blocks = w.columns / 32;
  if (!quantized || x.n_tokens < kMinTokens || blocks == 0 || row_begin >= row_end) {
    return avx512_vnni::Matmul(w, x, y, y_stride, row_begin, row_end);
  }
  const auto* data = static_cast<const uint8_t*>(w.data);
  WithQuantizedLoader(w, [&](auto loader) {
    PrefillRows<decltype(loader)>(data, blocks, x, y, y_stride, row_begin, row_end);
  });
}

}  // namespace kestrel::amx_int8
