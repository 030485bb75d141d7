// AMX-BF16 kernels: the quantized prefill products (Q4_0 and Q8_0 weights, plain and tiled) as
// bf16 products on the tile unit, with TDPBF16PS. The only file compiled with -mamx-bf16 and
// -mavx512bf16; like the other ISA units it includes nothing but the kernel types, intrinsics and
// the shared AVX-512 weight loaders, and keeps every helper in an anonymous namespace.
//
// Why bf16 and not amx_int8's exact integer blocks: there each block's int32 sums must leave the
// tile unit (a tile store per 16 x 16 x 32 product) and be scaled on the vector units, about 100 ns
// per block of 16 rows for 64 tokens. Here the weights are dequantized (w = q * d_w, rounded to
// bf16) once per 64 tokens and the activations are rounded to bf16 (by the session, once per
// input: KernelTable::f32_to_bf16_tile), so the C tiles accumulate in f32 over a whole row of
// blocks and leave the tile unit once per strip. The price: results are not bit-identical to the
// reference; each weight and activation carries a relative rounding error of at most 2^-9 (the
// conformance test's bound, tests/kernels_test.cc).
//
// Layout: C (16 weight rows x 16 tokens, f32) += A (one block of 16 weight rows, 32 bf16 each, in
// order) . B (16 tokens' activations for that block in VNNI pairs: Activations::bf16's tiles). The
// weights are the A operand so that dequantizing writes whole rows, no transposes (a Q8_0 block
// of 16 rows in 32-36 ns in the kernel instead of ~46 as the B operand; 23.5 in L1); the price is
// one 16 x 16 transpose per C tile per strip, into y. Each 16-row strip runs its blocks once: each
// block dequantized into A (a ring of three buffers, one block ahead), then four products, one per
// 16-token tile. About 40 ns per block are the tile loads and products (of which ~10 the four
// activation tiles read from L2: 4 KB a block, reread by every strip) and 32-40 ns the
// dequantizing; the two overlap only in part on the one AMX CPU measured (bench/README.md).
// Prompts shorter than MinTokens(dtype) go to amx_int8 (too few tokens to pay for the
// dequantizing).
#define KESTREL_AVX512_NAMESPACE amx_bf16
#include "backend_x86/amx_bf16_kernels.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend_x86/amx_kernels.h"
#include "backend_x86/amx_tiles.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_weight_blocks.h"

namespace kestrel::amx_bf16 {
namespace {

constexpr int kTileTokens = 16;    // tokens per B and C tile
constexpr int kMaxTokenTiles = 4;  // C tiles 0-3

// Tile registers: C 0-3 (16 weight rows x 16 tokens each, one per token tile), A 4 and 5 (the
// weights, alternating blocks), B 6 and 7 (the activations, alternating token tiles).
constexpr int kA0 = 4, kB0 = 6;

void ConfigureTiles() {
  TileConfig config = Palette1();
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;  // every tile 16 x 64 bytes
  LoadTileConfig(config);
}

// Tile loads, stores and products in inline assembly (why: amx_kernels.cc); a load names the
// 1 KB it reads (a 64-byte stride: a dequantized weight block, or one activation tile).
template <int kTile>
inline void TileLoad(const void* base) {
  __asm__ volatile("tileloadd (%1,%2,1), %%tmm%c0" ::"i"(kTile), "r"(base), "r"(int64_t{64}),
                   "m"(*static_cast<const uint8_t(*)[1024]>(base)));
}

template <int kTile>
inline void TileStore(void* base) {
  __asm__ volatile("tilestored %%tmm%c0, (%1,%2,1)" ::"i"(kTile), "r"(base), "r"(int64_t{64}) : "memory");
}

template <int kC, int kA, int kB>
inline void TileMultiply() {
  __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB));
}

// 16 x 16 32-bit elements transposed in registers: afterwards lane i of v[j] is what lane j of
// v[i] was (four rounds of 16 shuffles).
inline void Transpose16(__m512i* v) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  // b[4i + c], 128-bit lane L: element 4L + c of rows 4i .. 4i + 3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  // Then a 4 x 4 transpose of 128-bit lanes for each c.
  for (int c = 0; c < 4; ++c) {
    const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
    v[c] = _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
    v[4 + c] = _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
    v[8 + c] = _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
    v[12 + c] = _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// One block of 16 weight rows as TDPBF16PS's A operand: row m holds w[m][0..31] (w = q * d_w in
// bf16), in the activations' order, so dequantizing needs no transposes.
struct alignas(64) ATile {
  uint16_t row[16][32];
};

// Byte-permutation indices (VPERMB, VPERMT2B), built at compile time from a formula.
struct ByteIndex {
  uint8_t byte[64];
};

template <typename F>
constexpr ByteIndex MakeByteIndex(F f) {
  ByteIndex index{};
  for (int i = 0; i < 64; ++i) index.byte[i] = static_cast<uint8_t>(f(i));
  return index;
}

inline __m512i LoadIndex(const ByteIndex& index) { return _mm512_loadu_si512(index.byte); }

// VPERMB under a mask: the selected bytes from `table` at `index`, the others zeroed or kept from
// `into`. In assembly because clang 14 rewrites the masked intrinsics into two instructions (the
// zeroing one into a VPERMB and a VPANDQ, the merging one into a VPERMB and a VPERMT2B: Q8_0 strips
// ~20% slower than GCC's). A VPERMT2B alone, the kept bytes from a second source, made GCC's Q8_0
// strips 9-18% slower.
inline __m512i PermuteBytesZeroed(__mmask64 mask, __m512i index, __m512i table) {
  __m512i v;
  __asm__("vpermb %2, %1, %0%{%3%}%{z%}" : "=v"(v) : "v"(index), "v"(table), "Yk"(mask));
  return v;
}
inline __m512i PermuteBytesMerged(__m512i into, __mmask64 mask, __m512i index, __m512i table) {
  __asm__("vpermb %2, %1, %0%{%3%}" : "+v"(into) : "v"(index), "v"(table), "Yk"(mask));
  return into;
}

// A float broadcast from memory (a load, no shuffle), in assembly so that GCC keeps it one: given
// the value, it broadcast each row's scale from a register (two shuffles per row, on the port the
// permutes need).
inline __m512 BroadcastLoad(const float* p) {
  __m512 v;
  __asm__("vbroadcastss %1, %0" : "=v"(v) : "m"(*p));
  return v;
}

// Q4_0: word j of a row's 32 (j < 16 element j, the low nibble of quant byte j; j >= 16 element
// j, the high nibble of byte j - 16) starts as the whole byte (even bytes of the index; odd ones
// masked to zero). kQ4Plain[h] reads 16 quant bytes in order from lane h; kQ4Tiled[r] reads row r of a
// q4_0x4 unit, whose 128-bit lane k holds bytes 4k..4k+3 of its 4 rows.
constexpr uint64_t kEvenBytes = 0x5555555555555555ull;
constexpr ByteIndex kQ4Plain[2] = {
    MakeByteIndex([](int i) { return i % 2 == 0 ? (i / 2) % 16 : 0; }),
    MakeByteIndex([](int i) { return i % 2 == 0 ? 16 + (i / 2) % 16 : 0; }),
};
constexpr ByteIndex MakeQ4Tiled(int r) {
  return MakeByteIndex([r](int i) {
    const int j = (i / 2) % 16;
    return i % 2 == 0 ? (j / 4) * 16 + 4 * r + j % 4 : 0;
  });
}
constexpr ByteIndex kQ4Tiled[4] = {MakeQ4Tiled(0), MakeQ4Tiled(1), MakeQ4Tiled(2), MakeQ4Tiled(3)};

// One row of Q4_0 as 32 bf16 values: its nibbles looked up in a table of (v - 8) * d rounded to
// bf16 (VPERMW reads an index's low 5 bits, so the table is its 16 entries twice, and the low
// nibbles need no mask). 6 instructions per row, against 4 per 16 values converting.
inline __m512i Q4Indices(__m512i bytes, const ByteIndex& index) {
  const __m512i v = PermuteBytesZeroed(kEvenBytes, LoadIndex(index), bytes);
  return _mm512_mask_srli_epi16(v, 0xffff0000u, v, 4);  // words 16..31: the high nibbles
}

// Two rows of Q4_0 as bf16 values from one table: words 0..15 rows r's (v - 8) * d, 16..31 row
// r + 1's (one conversion for both; it costs as much as the rest of a row). Row r's indices
// keep their nibble only, row r + 1's also get 16.
inline void Q4Rows(__m512i bytes, const ByteIndex& index0, const ByteIndex& index1, const float* d, uint16_t* row0,
                   uint16_t* row1) {
  const __m512 values = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512 t0 = _mm512_mul_ps(values, BroadcastLoad(d)), t1 = _mm512_mul_ps(values, BroadcastLoad(d + 1));
  const __m512i table = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(t1, t0));
  const __m512i nibble = _mm512_set1_epi16(0x0f), second = _mm512_set1_epi16(0x10);
  const __m512i i0 = _mm512_and_si512(Q4Indices(bytes, index0), nibble);
  const __m512i i1 = _mm512_ternarylogic_epi32(Q4Indices(bytes, index1), nibble, second, 0xea);  // (a & b) | c
  _mm512_store_si512(row0, _mm512_permutexvar_epi16(i0, table));
  _mm512_store_si512(row1, _mm512_permutexvar_epi16(i1, table));
}

// Q8_0: each quant q, its sign bit flipped first (q + 128 as an unsigned byte), goes to byte 1 of
// a 32-bit lane whose other bytes hold 0x4b000000 (the exponent of 2^23), which makes the float
// 2^23 + 256 (q + 128); fma(that, d / 256, -32896 d) is q * d rounded once, as the reference's
// product is (the constant has 9 significant bits, so it and d / 256 are exact). A VPERMB merged
// into that pattern, and the FMA, per 16 values.
constexpr uint64_t kSecondBytes = 0x2222222222222222ull;
constexpr ByteIndex kQ8Plain[2] = {
    MakeByteIndex([](int i) { return i % 4 == 1 ? i / 4 : 0; }),
    MakeByteIndex([](int i) { return i % 4 == 1 ? 16 + i / 4 : 0; }),
};
// Row r of four rows' 16 elements as a q8_0x8 unit's halves give them: bytes 0..31 elements
// 0..7 (or 16..23) of the four rows, 8 each; bytes 32..63 elements 8..15 (or 24..31).
constexpr ByteIndex MakeQ8Tiled(int r) {
  return MakeByteIndex([r](int i) {
    const int j = i / 4;
    return i % 4 == 1 ? (j < 8 ? 8 * r + j : 32 + 8 * r + j - 8) : 0;
  });
}
constexpr ByteIndex kQ8Tiled[4] = {MakeQ8Tiled(0), MakeQ8Tiled(1), MakeQ8Tiled(2), MakeQ8Tiled(3)};

inline __m512i FlipSigns(__m512i bytes) { return _mm512_xor_si512(bytes, _mm512_set1_epi8(static_cast<char>(0x80))); }

inline __m512 Q8Values(__m512i flipped, const ByteIndex& index, __m512 scale, __m512 offset) {
  const __m512i bits = PermuteBytesMerged(_mm512_set1_epi32(0x4b000000), kSecondBytes, LoadIndex(index), flipped);
  return _mm512_fmadd_ps(_mm512_castsi512_ps(bits), scale, offset);
}

// One row from the sign-flipped bytes holding its elements 0..15 (lo) and 16..31 (hi).
inline __m512i Q8Row(__m512i lo, const ByteIndex& lo_index, __m512i hi, const ByteIndex& hi_index, const float* scale,
                     const float* offset) {
  const __m512 s = BroadcastLoad(scale), o = BroadcastLoad(offset);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(Q8Values(hi, hi_index, s, o), Q8Values(lo, lo_index, s, o)));
}

// The 16 rows' scales from their f16 d_w (rows past the matrix zero): Q4_0 d itself; Q8_0 d / 256
// and -32896 d, Q8Values' two constants.
struct alignas(64) RowScales {
  float d[16];
  float offset[16];  // Q8_0 only
};

inline void ConvertScales(__m256i halves, bool q8, RowScales* out) {
  const __m512 d = HalvesToFloat(halves);
  if (q8) {
    _mm512_store_ps(out->d, _mm512_mul_ps(d, _mm512_set1_ps(1.0f / 256)));
    _mm512_store_ps(out->offset, _mm512_mul_ps(d, _mm512_set1_ps(-32896.0f)));
  } else {
    _mm512_store_ps(out->d, d);
  }
}

// A plain block's scales: the f16 d_w leading each of n_rows rows, row_bytes apart.
inline void PlainScales(const uint8_t* block, int64_t row_bytes, int n_rows, bool q8, RowScales* out) {
  alignas(32) uint16_t halves[16] = {};
  for (int m = 0; m < n_rows; ++m) std::memcpy(&halves[m], block + m * row_bytes, 2);
  ConvertScales(_mm256_load_si256(reinterpret_cast<const __m256i*>(halves)), q8, out);
}

// Block b of rows r0 .. r0 + n_rows - 1 dequantized into `out` (rows past n_rows are left as they
// are, or hold the rest of a layout tile). Always inlined, as Strip's lambdas are: clang 14 made
// each a call per block (with that and Q8Values' permute, clang's strips took 1.16-1.22x GCC's time
// in the kernels bench; 0.92-1.15x after).
template <typename Weights>
__attribute__((always_inline)) inline void DequantizeBlock(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows,
                                                           int64_t b, ATile* out) {
  RowScales s;
  if constexpr (std::is_same_v<Weights, TiledQ4_0x4>) {
    const int units = (n_rows + 3) / 4;
    long long halves[4] = {};
    for (int t = 0; t < units; ++t) std::memcpy(&halves[t], Weights::Group(data, blocks, r0, t, b), 8);
    ConvertScales(_mm256_setr_epi64x(halves[0], halves[1], halves[2], halves[3]), false, &s);
    for (int t = 0; t < units; ++t) {
      const __m512i quants = _mm512_loadu_si512(Weights::Group(data, blocks, r0, t, b) + 8);
      for (int r = 0; r < 4; r += 2) {
        const int m = 4 * t + r;
        Q4Rows(quants, kQ4Tiled[r], kQ4Tiled[r + 1], &s.d[m], out->row[m], out->row[m + 1]);
      }
    }
  } else if constexpr (std::is_same_v<Weights, PlainQ4_0>) {
    constexpr int kBytes = Weights::kRowBlockBytes;
    const uint8_t* block = data + (r0 * blocks + b) * kBytes;
    PlainScales(block, blocks * kBytes, n_rows, false, &s);
    const auto quants = [&](int m) {
      return m < n_rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + m * blocks * kBytes + 2))
                        : _mm_setzero_si128();
    };
    for (int m = 0; m < n_rows; m += 2) {  // row m's 16 quant bytes in lane 0, row m + 1's in lane 1
      const __m512i pair = _mm512_inserti32x4(_mm512_castsi128_si512(quants(m)), quants(m + 1), 1);
      Q4Rows(pair, kQ4Plain[0], kQ4Plain[1], &s.d[m], out->row[m], out->row[m + 1]);
    }
  } else if constexpr (std::is_same_v<Weights, TiledQ8_0x8>) {
    const int units = (n_rows + 7) / 8;
    __m128i halves[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int t = 0; t < units; ++t) {
      halves[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(Weights::Group(data, blocks, r0, t, b)));
    }
    ConvertScales(_mm256_set_m128i(halves[1], halves[0]), true, &s);
    for (int t = 0; t < units; ++t) {
      const uint8_t* unit = Weights::Group(data, blocks, r0, t, b) + 16;
      // Chunk q (64 bytes at 64q) holds elements 8q..8q+7 of the unit's 8 rows, 8 bytes a row.
      const auto halves_of = [&](int q, int rows) {
        const __m512i first =
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 64 * q + rows)));
        return FlipSigns(_mm512_inserti64x4(
            first, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 64 * (q + 1) + rows)), 1));
      };
      for (int half = 0; half < 2; ++half) {  // rows 0-3, then 4-7
        const __m512i lo = halves_of(0, 32 * half), hi = halves_of(2, 32 * half);
        for (int r = 0; r < 4; ++r) {
          const int m = 8 * t + 4 * half + r;
          _mm512_store_si512(out->row[m], Q8Row(lo, kQ8Tiled[r], hi, kQ8Tiled[r], &s.d[m], &s.offset[m]));
        }
      }
    }
  } else {
    static_assert(std::is_same_v<Weights, PlainQ8_0>);
    constexpr int kBytes = Weights::kRowBlockBytes;
    const uint8_t* block = data + (r0 * blocks + b) * kBytes;
    PlainScales(block, blocks * kBytes, n_rows, true, &s);
    for (int m = 0; m < n_rows; ++m) {
      const __m512i quants = FlipSigns(_mm512_castsi256_si512(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + m * blocks * kBytes + 2))));
      _mm512_store_si512(out->row[m], Q8Row(quants, kQ8Plain[0], quants, kQ8Plain[1], &s.d[m], &s.offset[m]));
    }
  }
}

// C tile kTile (16 weight rows x 16 tokens) transposed into y: token n's n_rows sums at y + n * y_stride.
template <int kTile>
inline void StoreSums(float* y, int64_t y_stride, int n_tokens, int n_rows) {
  alignas(64) int32_t c[16][16];
  TileStore<kTile>(c);
  __m512i v[16];
  for (int m = 0; m < 16; ++m) v[m] = _mm512_load_si512(c[m]);
  Transpose16(v);
  const auto mask = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int n = 0; n < n_tokens; ++n) _mm512_mask_storeu_ps(y + n * y_stride, mask, _mm512_castsi512_ps(v[n]));
}

// How far ahead (in blocks) the weights are prefetched, into the next strip past the end of this one.
constexpr int64_t kPrefetchBlocks = 8;

// One strip (rows r0 .. r0 + n_rows - 1) over all its blocks for kTiles token tiles: the sums stay
// in the C tiles from the first block to the last. b_tiles: the chunk's first token tile at block
// 0, block i's tiles block_stride elements on (Activations::bf16). y: the chunk's first token at
// the strip's first row; tokens: how many of the chunk's are real. next_rows: rows of the strip
// after this one (0: none), prefetched as this one ends.
template <int kTiles, typename Weights>
void Strip(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, const uint16_t* b_tiles, int64_t block_stride,
           float* y, int64_t y_stride, int64_t tokens, int next_rows) {
  alignas(64) ATile ring[3];
  // Rows past n_rows reach only C rows that are never stored; zero, so that nothing reads stale stack.
  if (n_rows < kRows) std::memset(ring, 0, sizeof(ring));
  const auto prefetch = [&](int64_t i) {
    const int64_t ahead = i + kPrefetchBlocks;
    if (ahead < blocks) {
      Weights::Prefetch(data, blocks, r0, n_rows, ahead);
    } else if (next_rows > 0) {
      Weights::Prefetch(data, blocks, r0 + kRows, next_rows, ahead - blocks);
    }
  };
  // Block i + 1 is dequantized before block i's products are issued. (This and `block` inlined by
  // force: see DequantizeBlock.)
  const auto dequantize = [&](int64_t i) __attribute__((always_inline)) {
    prefetch(i);
    DequantizeBlock<Weights>(data, blocks, r0, n_rows, i, &ring[i % 3]);
  };
  const auto block = [&](auto set, int64_t i) __attribute__((always_inline)) {
    constexpr int a_tile = kA0 + decltype(set)::value;
    TileLoad<a_tile>(&ring[i % 3]);
    if (i + 1 < blocks) dequantize(i + 1);
    const uint16_t* b = b_tiles + i * block_stride;
    TileLoad<kB0>(b);
    TileMultiply<0, a_tile, kB0>();
    if constexpr (kTiles > 1) {
      TileLoad<kB0 + 1>(b + kBf16TileElements);
      TileMultiply<1, a_tile, kB0 + 1>();
    }
    if constexpr (kTiles > 2) {
      TileLoad<kB0>(b + 2 * kBf16TileElements);
      TileMultiply<2, a_tile, kB0>();
    }
    if constexpr (kTiles > 3) {
      TileLoad<kB0 + 1>(b + 3 * kBf16TileElements);
      TileMultiply<3, a_tile, kB0 + 1>();
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
  const auto tile_tokens = [&](int k) {
    return static_cast<int>(tokens - k * kTileTokens < kTileTokens ? tokens - k * kTileTokens : kTileTokens);
  };
  StoreSums<0>(y, y_stride, tile_tokens(0), n_rows);
  if constexpr (kTiles > 1) StoreSums<1>(y + 16 * y_stride, y_stride, tile_tokens(1), n_rows);
  if constexpr (kTiles > 2) StoreSums<2>(y + 32 * y_stride, y_stride, tile_tokens(2), n_rows);
  if constexpr (kTiles > 3) StoreSums<3>(y + 48 * y_stride, y_stride, tile_tokens(3), n_rows);
}

}  // namespace

void F32ToBf16Tile(const float* x, int64_t columns, int64_t n_tokens, uint16_t* out, int64_t block_stride) {
  const int64_t blocks = columns / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i v[16];
    for (int t = 0; t < 16; ++t) {
      if (t < n_tokens) {
        const float* row = x + t * columns + 32 * b;
        v[t] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 16), _mm512_loadu_ps(row)));
      } else {
        v[t] = _mm512_setzero_si512();
      }
    }
    Transpose16(v);  // v[p] lane n: token n's elements 2p and 2p + 1
    for (int p = 0; p < 16; ++p) _mm512_storeu_si512(out + b * block_stride + 32 * p, v[p]);
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
  const uint16_t* tiles = x.bf16;
  int64_t block_stride = x.bf16_block_stride;
  if (tiles == nullptr) {
    // Not rounded by the session (a direct caller): rounded here, as the session lays them out.
    const int64_t n_tiles = (x.n_tokens + kTileTokens - 1) / kTileTokens;
    block_stride = n_tiles * kBf16TileElements;
    auto* rounded = static_cast<uint16_t*>(StagingBuffer(static_cast<size_t>(blocks * block_stride) * 2));
    for (int64_t t = 0; t < n_tiles; ++t) {
      const int64_t first = t * kTileTokens;
      F32ToBf16Tile(x.f32 + first * x.columns, x.columns, std::min<int64_t>(kTileTokens, x.n_tokens - first),
                    rounded + t * kBf16TileElements, block_stride);
    }
    tiles = rounded;
    __asm__ volatile("" ::: "memory");  // every tile stored before the tile loads that read them
  }
  ConfigureTiles();
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += kTokenChunk) {
    const int64_t c_tokens = x.n_tokens - c0 < kTokenChunk ? x.n_tokens - c0 : kTokenChunk;
    const int n_tiles = static_cast<int>((c_tokens + kTileTokens - 1) / kTileTokens);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int n_rows = static_cast<int>(row_end - r0 < kRows ? row_end - r0 : kRows);
      const int64_t after = row_end - (r0 + kRows);
      const int next_rows = static_cast<int>(after <= 0 ? 0 : (after < kRows ? after : kRows));
      kByTiles[n_tiles - 1](data, blocks, r0, n_rows, tiles + c0 / kTileTokens * kBf16TileElements, block_stride,
                            y + c0 * y_stride + r0, y_stride, c_tokens, next_rows);
    }
  }
  _tile_release();
}

}  // namespace

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t blocks = w.columns / 32;
  const int64_t min_tokens = MinTokens(w.dtype);
  if (min_tokens == 0 || x.n_tokens < min_tokens || x.f32 == nullptr || blocks == 0 || row_begin >= row_end) {
    return amx_int8::Matmul(w, x, y, y_stride, row_begin, row_end);
  }
  const auto* data = static_cast<const uint8_t*>(w.data);
  WithQuantizedLoader(w, [&](auto loader) {
    PrefillRows<decltype(loader)>(data, blocks, x, y, y_stride, row_begin, row_end);
  });
}

}  // namespace kestrel::amx_bf16
