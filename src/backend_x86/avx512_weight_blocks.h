// The AVX-512 weight-block loaders shared by the avx512_vnni kernels (avx512_kernels.cc, and its
// SIMDe twin) and the AMX kernels (amx_kernels.cc): block b of 16 rows of Q4_0 or Q8_0 weights, in
// either layout, rearranged so that 32-bit lane i of register u[k] holds the 4 bytes of row i that
// multiply activation bytes 4k..4k+3. That is what VPDPBUSD reads with one broadcast per register,
// and, stored as 8 rows of 64 bytes, exactly an AMX B tile (K = 32, N = 16) in its VNNI order.
// Include it after avx512_intrinsics.h, only from units compiled with the AVX-512 flags (or their
// SIMDe twins); like that header, everything sits in the unit's own anonymous namespace.
#pragma once

#include <cstring>

#include "backend/kernels.h"
#include "backend_x86/avx512_intrinsics.h"

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

constexpr int kRows = 16;  // weight rows per register, one per 32-bit lane

// Four activation bytes in every 32-bit lane.
inline __m512i Broadcast4(const int8_t* bytes) {
  int32_t v;
  std::memcpy(&v, bytes, 4);
  return _mm512_set1_epi32(v);
}

// The 32-bit lane indices of a two-register permutation, computed at compile time from a formula.
struct LaneIndex {
  int32_t lane[16];
};

template <typename F>
constexpr LaneIndex MakeIndex(F f) {
  LaneIndex index{};
  for (int j = 0; j < 16; ++j) index.lane[j] = f(j);
  return index;
}

// Lane j of the result is a[index[j]] when index[j] < 16, else b[index[j] - 16].
inline __m512i Pick(__m512i a, const LaneIndex& index, __m512i b) {
  return _mm512_permutex2var_epi32(a, _mm512_loadu_si512(index.lane), b);
}

constexpr int Bit(int j, int n) { return (j >> n) & 1; }

// A weight block of 16 rows ready for VPDPBUSD: lane i of u[k] holds the 4 unsigned bytes of row i
// that multiply activation bytes 4k..4k+3; scale holds the rows' d_w.
struct WeightBlock {
  __m512i u[8];
  __m512 scale;
};

// From chunk[k] (lane i: bytes 4k..4k+3 of row i's Q4_0 quants): the low nibbles are elements
// 4k..4k+3 and the high nibbles elements 16+4k..16+4k+3.
inline void SplitNibbles(const __m512i* chunk, WeightBlock* out) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    out->u[k] = _mm512_and_si512(chunk[k], low);
    out->u[4 + k] = _mm512_and_si512(_mm512_srli_epi16(chunk[k], 4), low);
  }
}

// A Q4_0 block of 16 rows kept packed (kPackedBlockBytes, 64-byte aligned in a buffer): the 16 f16
// scales in the first line, then chunk[0..3] as LoadChunks gives them, a line each. 5/9 of a
// WeightBlock's bytes; a tile splits the nibbles as it reads them.
constexpr int64_t kPackedBlockBytes = 64 + 4 * 64;

// A Q4_0 layout's Pack (block b of rows r0 .. r0 + n_rows - 1 into `out`, that format) from its
// LoadChunks: the plain layout's and q4_0x4_lines'; q4_0x4 moves its bytes directly
// (TiledQ4_0x4::Pack).
template <typename Weights>
inline void PackFromChunks(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, uint8_t* out) {
  __m256i scales;
  __m512i chunk[4];
  Weights::LoadChunks(data, blocks, r0, n_rows, b, &scales, chunk);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), scales);
  for (int k = 0; k < 4; ++k) _mm512_store_si512(out + 64 + 64 * k, chunk[k]);
}

// From chunk[k] (lane i: bytes 4k..4k+3 of row i's Q8_0 quants): w + 128 as unsigned bytes, what
// VPDPBUSD reads.
inline void BiasQ8(const __m512i* chunk, WeightBlock* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int k = 0; k < 8; ++k) out->u[k] = _mm512_xor_si512(chunk[k], flip);
}

// Loaders: block b of rows r0 .. r0 + n_rows - 1 (n_rows <= 16) as a WeightBlock; rows past n_rows
// read as zero (their lanes are never stored). The transposes below are written as exchanges of
// index bits: an element is (row bits r3 r2 r1 r0, chunk bits k...), each step trades one bit of
// the register number for one bit of the lane number, two registers at a time.

// q4_0x4: tile t of the group holds chunk k of its 4 rows in 128-bit lane k (docs/vqf.md), so a
// 4x4 transpose of 128-bit lanes across the group's 4 tiles gives chunk k of all 16 rows.
inline void TilesToChunks(const __m512i* tile, __m512i* chunk) {
  const __m512i t01_lo = _mm512_shuffle_i32x4(tile[0], tile[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i t01_hi = _mm512_shuffle_i32x4(tile[0], tile[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i t23_lo = _mm512_shuffle_i32x4(tile[2], tile[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i t23_hi = _mm512_shuffle_i32x4(tile[2], tile[3], _MM_SHUFFLE(3, 2, 3, 2));
  chunk[0] = _mm512_shuffle_i32x4(t01_lo, t23_lo, _MM_SHUFFLE(2, 0, 2, 0));
  chunk[1] = _mm512_shuffle_i32x4(t01_lo, t23_lo, _MM_SHUFFLE(3, 1, 3, 1));
  chunk[2] = _mm512_shuffle_i32x4(t01_hi, t23_hi, _MM_SHUFFLE(2, 0, 2, 0));
  chunk[3] = _mm512_shuffle_i32x4(t01_hi, t23_hi, _MM_SHUFFLE(3, 1, 3, 1));
}

// Tile t's part of a packed block (kPackedBlockBytes): its 4 scales at byte 8t of the first line,
// lane k of its quants (16 bytes) as lane t of chunk k; zeros for a tile past the rows.
inline void PackTile(int t, const uint8_t* scales, const uint8_t* quants, uint8_t* out) {
  auto* lanes = reinterpret_cast<__m128i*>(out + 64) + t;  // lane t of chunk 0; chunk k is 4 lanes on
  if (scales != nullptr) {
    std::memcpy(out + 8 * t, scales, 8);
    for (int k = 0; k < 4; ++k) {
      _mm_store_si128(lanes + 4 * k, _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants + 16 * k)));
    }
  } else {
    std::memset(out + 8 * t, 0, 8);
    for (int k = 0; k < 4; ++k) _mm_store_si128(lanes + 4 * k, _mm_setzero_si128());
  }
}

struct TiledQ4_0x4 {
  static constexpr int kMcaId = 31;  // scripts/llvm-mca-x86.sh
  static constexpr int32_t kZeroPoint = 8;
  static constexpr int kRowBlockBytes = 18;  // bytes per row and block; rows r.. of a block start at r * blocks * this
  static constexpr bool kTiled = true;
  static constexpr int kTileRows = 4, kUnitBytes = 72;  // a tile's block: 4 rows' f16 scales, then their 64 bytes of quants
  // Tile t of the 16 rows from r0 at block b. Tile t's unit is tile 0's plus t * blocks * kUnitBytes,
  // which the *At forms below take as (unit0, stride), so that decode can step one pointer.
  static const uint8_t* Group(const uint8_t* data, int64_t blocks, int64_t r0, int t, int64_t b) {
    return data + ((r0 / 4 + t) * blocks + b) * 72;
  }
  template <bool kToL2 = false>  // into L1, or only into L2
  static void PrefetchAt(const uint8_t* unit0, int64_t stride, int n_tiles) {
    for (int t = 0; t < n_tiles; ++t) {
      const uint8_t* group = unit0 + t * stride;
      PrefetchLine<kToL2>(group);  // a 72-byte group spans at most two lines
      PrefetchLine<kToL2>(group + 71);
    }
  }
  template <bool kToL2 = false>
  static void Prefetch(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
    PrefetchAt<kToL2>(Group(data, blocks, r0, 0, b), blocks * 72, (n_rows + 3) / 4);
  }
  // Block b of the 16 rows as VPDPBUSD operands still packed: chunk[k] lane i holds bytes 4k..4k+3
  // of row i's quants (low nibbles elements 4k.., high nibbles 16+4k..), *scales the 16 f16 d_w.
  // Tiles from n_tiles on read as zero.
  static void LoadChunksAt(const uint8_t* unit0, int64_t stride, int n_tiles, __m256i* scales_out, __m512i* chunk) {
    __m512i tile[4];
    long long scales[4];
    for (int t = 0; t < 4; ++t) {
      if (t < n_tiles) {
        const uint8_t* group = unit0 + t * stride;
        std::memcpy(&scales[t], group, 8);
        tile[t] = _mm512_loadu_si512(group + 8);
      } else {
        scales[t] = 0;
        tile[t] = _mm512_setzero_si512();
      }
    }
    *scales_out = _mm256_setr_epi64x(scales[0], scales[1], scales[2], scales[3]);
    TilesToChunks(tile, chunk);
  }
  static void LoadChunks(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, __m256i* scales_out,
                         __m512i* chunk) {
    LoadChunksAt(Group(data, blocks, r0, 0, b), blocks * 72, (n_rows + 3) / 4, scales_out, chunk);
  }
  static void LoadAt(const uint8_t* unit0, int64_t stride, int n_tiles, WeightBlock* out) {
    __m256i scales;
    __m512i chunk[4];
    LoadChunksAt(unit0, stride, n_tiles, &scales, chunk);
    out->scale = HalvesToFloat(scales);
    SplitNibbles(chunk, out);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, WeightBlock* out) {
    LoadAt(Group(data, blocks, r0, 0, b), blocks * 72, (n_rows + 3) / 4, out);
  }
  // The packed block (kPackedBlockBytes) moved straight from the tiles: lane k of tile t (16 bytes)
  // is lane t of chunk k, and tile t's four scales are bytes 8t.. of the first line. LoadChunks' 64-byte loads
  // cross a cache line at nearly every 72-byte group, and a Zen 5 issues such loads about one a
  // cycle; these 16-byte moves need no shuffles: the pass 1.3-1.7x faster, Q4_0 pp64 ~1% (bench/README.md).
  static void Pack(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, uint8_t* out) {
    for (int t = 0; t < 4; ++t) {
      const uint8_t* group = t * 4 < n_rows ? Group(data, blocks, r0, t, b) : nullptr;
      PackTile(t, group, group == nullptr ? nullptr : group + 8, out);
    }
  }
};

// q4_0x4_lines (format/layout.h, in memory only): q4_0x4's groups 8 at a time per tile, the 8
// groups' scales in the run's first line and then each group's 64 quant bytes in a line of its
// own. Decode's loads of q4_0x4 cross a line at 8 groups of 9 and need two prefetches a group (1.8
// a line); here every load is aligned and one prefetch a line covers the stream: two-thread decode
// 0.89-0.92x the time of q4_0x4's faster path in most runs (kernels bench, bench/README.md thirty-
// ninth session). The same regrouping of q8_0x8 (1.2 prefetches a line before) gained nothing, so
// the fewer prefetches are the likelier cause than the aligned loads. Same arithmetic, same sums.
// Prefill reads it through Pack, Load and Prefetch as it reads q4_0x4 (its Pack with whole-line
// loads, below); decode walks it with DecodeLineGroups (avx512_kernels.cc).
struct LinedQ4_0x4 {
  static constexpr int32_t kZeroPoint = 8;
  static constexpr int kRowBlockBytes = 18;
  static constexpr bool kTiled = true;
  static constexpr int kTileRows = 4, kGroupBytes = 72, kRunBlocks = 8;
  static constexpr int64_t kRunBytes = kRunBlocks * kGroupBytes;  // 9 lines
  // The run of tile r0 / 4 + t holding block b, and block b's scales and quants in it.
  static const uint8_t* Run(const uint8_t* data, int64_t blocks, int64_t r0, int t, int64_t b) {
    return data + ((r0 / 4 + t) * blocks + b / kRunBlocks * kRunBlocks) * kGroupBytes;
  }
  static const uint8_t* Scales(const uint8_t* run, int64_t b) { return run + 8 * (b % kRunBlocks); }
  static const uint8_t* Quants(const uint8_t* run, int64_t b) { return run + 64 + 64 * (b % kRunBlocks); }
  // Block b's quant lines, and with a run's first block its scale lines: callers walk the blocks of
  // a run in order from its start (PrefillRows' chunks start on multiples of 32 blocks).
  template <bool kToL2 = false>
  static void Prefetch(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
    for (int t = 0; t * 4 < n_rows; ++t) {
      const uint8_t* run = Run(data, blocks, r0, t, b);
      if (b % kRunBlocks == 0) PrefetchLine<kToL2>(run);  // the run's scale line, with its first block
      PrefetchLine<kToL2>(Quants(run, b));
    }
  }
  // Block b of the 16 rows whose first tile's run is run0 (tile t's is t * stride on), as
  // TiledQ4_0x4::LoadChunksAt gives it; tiles from n_tiles on read as zero.
  static void LoadChunksAt(const uint8_t* run0, int64_t stride, int n_tiles, int64_t b, __m256i* scales_out,
                           __m512i* chunk) {
    __m512i tile[4];
    long long scales[4];
    for (int t = 0; t < 4; ++t) {
      if (t < n_tiles) {
        const uint8_t* run = run0 + t * stride;
        std::memcpy(&scales[t], Scales(run, b), 8);
        tile[t] = _mm512_loadu_si512(Quants(run, b));  // a line where the data is aligned
      } else {
        scales[t] = 0;
        tile[t] = _mm512_setzero_si512();
      }
    }
    *scales_out = _mm256_setr_epi64x(scales[0], scales[1], scales[2], scales[3]);
    TilesToChunks(tile, chunk);
  }
  static void LoadAt(const uint8_t* run0, int64_t stride, int n_tiles, int64_t b, WeightBlock* out) {
    __m256i scales;
    __m512i chunk[4];
    LoadChunksAt(run0, stride, n_tiles, b, &scales, chunk);
    out->scale = HalvesToFloat(scales);
    SplitNibbles(chunk, out);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, WeightBlock* out) {
    LoadAt(Run(data, blocks, r0, 0, b), blocks * kGroupBytes, (n_rows + 3) / 4, b, out);
  }
  static void LoadChunks(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, __m256i* scales_out,
                         __m512i* chunk) {
    LoadChunksAt(Run(data, blocks, r0, 0, b), blocks * kGroupBytes, (n_rows + 3) / 4, b, scales_out, chunk);
  }
  // The packed block from aligned 64-byte loads of the tiles' quant lines, transposed in registers
  // (TilesToChunks) and stored as whole lines (PackFromChunks). q4_0x4's Pack moves 16 bytes at a
  // time instead, because its 64-byte loads cross lines; here they do not, and paired against those
  // moves in one process (the kernels bench's prefill pairs, weights from memory) the products
  // took 0.97-0.995x the time at one thread and 0.96-0.985x at two (bench/README.md, fortieth
  // section).
  static void Pack(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, uint8_t* out) {
    PackFromChunks<LinedQ4_0x4>(data, blocks, r0, n_rows, b, out);
  }
};

// Plain Q4_0: quad[r3 r2] has rows 4q..4q+3 in its 128-bit lanes, lane (r1 r0 k1 k0); then
// half[k1 r2] lane (r3 r1 r0 k0); then chunk[k1 k0] lane (r3 r2 r1 r0).
constexpr LaneIndex kQ4Step1[2] = {
    MakeIndex([](int j) { return Bit(j, 3) * 16 + (((j >> 1) & 3) << 2 | 0 << 1 | (j & 1)); }),
    MakeIndex([](int j) { return Bit(j, 3) * 16 + (((j >> 1) & 3) << 2 | 1 << 1 | (j & 1)); }),
};
constexpr LaneIndex kQ4Step2[2] = {
    MakeIndex([](int j) { return Bit(j, 2) * 16 + (Bit(j, 3) << 3 | (j & 3) << 1 | 0); }),
    MakeIndex([](int j) { return Bit(j, 2) * 16 + (Bit(j, 3) << 3 | (j & 3) << 1 | 1); }),
};

// Block b of plain rows r0 .. r0 + n_rows - 1, kBlockBytes bytes each (at most two lines).
template <int kBlockBytes, bool kToL2>
inline void PrefetchPlainRows(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
  for (int i = 0; i < n_rows; ++i) {
    const uint8_t* block = data + ((r0 + i) * blocks + b) * kBlockBytes;
    PrefetchLine<kToL2>(block);
    PrefetchLine<kToL2>(block + kBlockBytes - 1);
  }
}

struct PlainQ4_0 {
  static constexpr int kMcaId = 33;
  static constexpr int32_t kZeroPoint = 8;
  static constexpr int kRowBlockBytes = 18;  // bytes per row and block; rows r.. of a block start at r * blocks * this
  static constexpr bool kTiled = false;      // decode runs the AVX2 kernel (MatmulQuantized)
  template <bool kToL2 = false>              // into L1, or only into L2
  static void Prefetch(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
    PrefetchPlainRows<18, kToL2>(data, blocks, r0, n_rows, b);
  }
  static void Pack(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, uint8_t* out) {
    PackFromChunks<PlainQ4_0>(data, blocks, r0, n_rows, b, out);
  }
  static void LoadChunks(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, __m256i* scales_out,
                         __m512i* chunk) {
    alignas(32) uint16_t scales[kRows];
    __m128i row[kRows];
    for (int i = 0; i < kRows; ++i) {
      if (i < n_rows) {
        const uint8_t* block = data + ((r0 + i) * blocks + b) * 18;
        std::memcpy(&scales[i], block, 2);
        row[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      } else {
        scales[i] = 0;
        row[i] = _mm_setzero_si128();
      }
    }
    *scales_out = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales));
    __m512i quad[4], half[4];
    for (int q = 0; q < 4; ++q) {
      const __m512i r01 = _mm512_inserti32x4(_mm512_castsi128_si512(row[4 * q]), row[4 * q + 1], 1);
      quad[q] = _mm512_inserti32x4(_mm512_inserti32x4(r01, row[4 * q + 2], 2), row[4 * q + 3], 3);
    }
    for (int k1 = 0; k1 < 2; ++k1) {
      for (int r2 = 0; r2 < 2; ++r2) half[2 * k1 + r2] = Pick(quad[r2], kQ4Step1[k1], quad[2 + r2]);
    }
    for (int k1 = 0; k1 < 2; ++k1) {
      for (int k0 = 0; k0 < 2; ++k0) chunk[2 * k1 + k0] = Pick(half[2 * k1], kQ4Step2[k0], half[2 * k1 + 1]);
    }
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, WeightBlock* out) {
    __m256i scales;
    __m512i chunk[4];
    LoadChunks(data, blocks, r0, n_rows, b, &scales, chunk);
    out->scale = HalvesToFloat(scales);
    SplitNibbles(chunk, out);
  }
};

// q8_0x8: the 64 bytes of 8-byte chunk q of a tile hold rows 0-7 with 32-bit lane 2r + h = bytes
// 4(2q + h)..+3 of row r, so chunk 2q + h of all 16 rows takes the even (h = 0) or odd (h = 1) lanes
// of the two tiles' registers.
constexpr LaneIndex kQ8TiledPick[2] = {
    MakeIndex([](int j) { return 2 * j; }),
    MakeIndex([](int j) { return 2 * j + 1; }),
};

struct TiledQ8_0x8 {
  static constexpr int kMcaId = 32;
  static constexpr int32_t kZeroPoint = 128;
  static constexpr int kRowBlockBytes = 34;  // bytes per row and block; rows r.. of a block start at r * blocks * this
  static constexpr bool kTiled = true;
  static constexpr int kTileRows = 8, kUnitBytes = 272;  // a tile's block: 8 f16 scales, then 256 bytes of quants
  // Tile t of the 16 rows from r0 at block b; as in TiledQ4_0x4, tile t's unit is tile 0's plus t * stride.
  static const uint8_t* Group(const uint8_t* data, int64_t blocks, int64_t r0, int t, int64_t b) {
    return data + ((r0 / 8 + t) * blocks + b) * 272;
  }
  template <bool kToL2 = false>  // into L1, or only into L2
  static void PrefetchAt(const uint8_t* unit0, int64_t stride, int n_tiles) {
    for (int t = 0; t < n_tiles; ++t) {
      const uint8_t* group = unit0 + t * stride;
      for (int line = 0; line < 5; ++line) PrefetchLine<kToL2>(group + 64 * line);  // 272 bytes span at most 5 lines
    }
  }
  template <bool kToL2 = false>
  static void Prefetch(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
    PrefetchAt<kToL2>(Group(data, blocks, r0, 0, b), blocks * 272, (n_rows + 7) / 8);
  }
  static void LoadAt(const uint8_t* unit0, int64_t stride, int n_tiles, WeightBlock* out) {
    __m512i part[2][4];
    __m128i scales[2];
    for (int t = 0; t < 2; ++t) {
      if (t < n_tiles) {
        const uint8_t* group = unit0 + t * stride;
        scales[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group));
        for (int q = 0; q < 4; ++q) part[t][q] = _mm512_loadu_si512(group + 16 + q * 64);
      } else {
        scales[t] = _mm_setzero_si128();
        for (int q = 0; q < 4; ++q) part[t][q] = _mm512_setzero_si512();
      }
    }
    out->scale = HalvesToFloat(_mm256_set_m128i(scales[1], scales[0]));
    __m512i chunk[8];
    for (int q = 0; q < 4; ++q) {
      for (int h = 0; h < 2; ++h) chunk[2 * q + h] = Pick(part[0][q], kQ8TiledPick[h], part[1][q]);
    }
    BiasQ8(chunk, out);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, WeightBlock* out) {
    LoadAt(Group(data, blocks, r0, 0, b), blocks * 272, (n_rows + 7) / 8, out);
  }
};

// Plain Q8_0: pair[r3 r2 r1] has rows 2p and 2p+1 in its 256-bit halves, lane (r0 k2 k1 k0); then
// step1[k2 r2 r1] lane (r3 r0 k1 k0); then step2[k2 k1 r1] lane (r3 r2 r0 k0); then chunk[k2 k1 k0] lane
// (r3 r2 r1 r0).
constexpr LaneIndex kQ8Step1[2] = {
    MakeIndex([](int j) { return Bit(j, 3) * 16 + (Bit(j, 2) << 3 | 0 << 2 | (j & 3)); }),
    MakeIndex([](int j) { return Bit(j, 3) * 16 + (Bit(j, 2) << 3 | 1 << 2 | (j & 3)); }),
};
constexpr LaneIndex kQ8Step2[2] = {
    MakeIndex([](int j) { return Bit(j, 2) * 16 + (Bit(j, 3) << 3 | Bit(j, 1) << 2 | 0 << 1 | (j & 1)); }),
    MakeIndex([](int j) { return Bit(j, 2) * 16 + (Bit(j, 3) << 3 | Bit(j, 1) << 2 | 1 << 1 | (j & 1)); }),
};
constexpr LaneIndex kQ8Step3[2] = {
    MakeIndex([](int j) { return Bit(j, 1) * 16 + (Bit(j, 3) << 3 | Bit(j, 2) << 2 | (j & 1) << 1 | 0); }),
    MakeIndex([](int j) { return Bit(j, 1) * 16 + (Bit(j, 3) << 3 | Bit(j, 2) << 2 | (j & 1) << 1 | 1); }),
};

struct PlainQ8_0 {
  static constexpr int kMcaId = 34;
  static constexpr int32_t kZeroPoint = 128;
  static constexpr int kRowBlockBytes = 34;  // bytes per row and block; rows r.. of a block start at r * blocks * this
  static constexpr bool kTiled = false;      // decode runs the AVX2 kernel (MatmulQuantized)
  template <bool kToL2 = false>              // into L1, or only into L2
  static void Prefetch(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b) {
    PrefetchPlainRows<34, kToL2>(data, blocks, r0, n_rows, b);
  }
  static void Load(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, int64_t b, WeightBlock* out) {
    alignas(32) uint16_t scales[kRows];
    __m256i row[kRows];
    for (int i = 0; i < kRows; ++i) {
      if (i < n_rows) {
        const uint8_t* block = data + ((r0 + i) * blocks + b) * 34;
        std::memcpy(&scales[i], block, 2);
        row[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      } else {
        scales[i] = 0;
        row[i] = _mm256_setzero_si256();
      }
    }
    out->scale = HalvesToFloat(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
    __m512i pair[8], step1[8], step2[8], chunk[8];
    for (int p = 0; p < 8; ++p) pair[p] = _mm512_inserti64x4(_mm512_castsi256_si512(row[2 * p]), row[2 * p + 1], 1);
    for (int k2 = 0; k2 < 2; ++k2) {
      for (int p = 0; p < 4; ++p) step1[4 * k2 + p] = Pick(pair[p], kQ8Step1[k2], pair[4 + p]);
    }
    for (int k2 = 0; k2 < 2; ++k2) {
      for (int k1 = 0; k1 < 2; ++k1) {
        for (int r1 = 0; r1 < 2; ++r1) {
          step2[4 * k2 + 2 * k1 + r1] = Pick(step1[4 * k2 + r1], kQ8Step2[k1], step1[4 * k2 + 2 + r1]);
        }
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int k0 = 0; k0 < 2; ++k0) chunk[2 * k + k0] = Pick(step2[2 * k], kQ8Step3[k0], step2[2 * k + 1]);
    }
    BiasQ8(chunk, out);
  }
};

// f(loader) with the loader of w's layout, an empty object whose type names it: TiledQ8_0x8,
// PlainQ8_0, TiledQ4_0x4 or PlainQ4_0 (w is Q8_0 or Q4_0).
template <typename F>
inline void WithQuantizedLoader(const MatrixView& w, F&& f) {
  if (w.dtype == DType::kQ8_0) {
    if (w.layout == Layout::kQ8_0x8) return f(TiledQ8_0x8{});
    return f(PlainQ8_0{});
  }
  if (w.layout == Layout::kQ4_0x4) return f(TiledQ4_0x4{});
  return f(PlainQ4_0{});
}

// y rows r0 .. r0 + n - 1 of one token (partial sums between block chunks round-trip exactly).
inline __m512 LoadRows(const float* y, int n) {
  if (n == kRows) return _mm512_loadu_ps(y);
  alignas(64) float tmp[kRows] = {};
  for (int i = 0; i < n; ++i) tmp[i] = y[i];
  return _mm512_load_ps(tmp);
}

inline void StoreRows(float* y, __m512 v, int n) {
  if (n == kRows) {
    _mm512_storeu_ps(y, v);
    return;
  }
  alignas(64) float tmp[kRows];
  _mm512_store_ps(tmp, v);
  for (int i = 0; i < n; ++i) y[i] = tmp[i];
}

}  // namespace
}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
