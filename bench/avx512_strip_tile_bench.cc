// The avx512_vnni kernels compiled a second time, in a namespace of their own (as the SIMDe test
// backend does), so the kernels bench can time their prefill tile (StripTile, in the kernel file's
// anonymous namespace) without the library exporting it. Built with the library's AVX-512 flags;
// the kernels bench calls it only where the CPU runs the avx512_vnni backend.
#include <utility>

#include "backend_x86/avx512_kernels.h"

namespace kestrel::avx512_strip_tile_bench {
constexpr int64_t kQ4_0OffsetRun = avx512_vnni::kQ4_0OffsetRun;  // the same kernel source
}  // namespace kestrel::avx512_strip_tile_bench

#define KESTREL_AVX512_NAMESPACE avx512_strip_tile_bench
#include "avx512_strip_tile_bench.h"
#include "backend_x86/avx512_kernels.cc"

namespace kestrel::avx512_strip_tile_bench {
namespace {

constexpr int64_t kChunk = kPackedChunkBlocks;  // blocks per strip chunk, as PrefillRows packs them
constexpr int64_t kTokens = 64;
constexpr int64_t kBlocksPerRow = 64;  // a 2048-column product: the activations' row stride

struct ChunkInputs {
  alignas(64) uint8_t strip[2 * kChunk * kPackedBlockBytes];
  alignas(64) int32_t neg_offset[kTokens * kChunk];
  alignas(64) float y[kTokens * 2 * kRows];
  BlockQ8_0 a[kTokens * kBlocksPerRow];
  float a_scale[kTokens * kBlocksPerRow];

  ChunkInputs() {
    // Values only need to be finite: the tile's speed does not depend on them.
    for (size_t i = 0; i < sizeof(strip); ++i) strip[i] = static_cast<uint8_t>(i * 37 + 11);
    for (int64_t block = 0; block < 2 * kChunk; ++block) {
      uint16_t* scales = reinterpret_cast<uint16_t*>(strip + block * kPackedBlockBytes);
      for (int r = 0; r < kRows; ++r) scales[r] = 0x2c00;  // f16 1/16
    }
    for (int64_t i = 0; i < kTokens * kBlocksPerRow; ++i) {
      a[i].d = 0x2000;
      for (int j = 0; j < 32; ++j) a[i].qs[j] = static_cast<int8_t>((i + 7 * j) % 255 - 127);
      a_scale[i] = 1.0f / 1024;
    }
    for (int64_t i = 0; i < kTokens * kChunk; ++i) neg_offset[i] = -8 * static_cast<int32_t>(i % 97);
    for (float& v : y) v = 0.0f;
  }
};

}  // namespace

int64_t PackedStripChunkOps() { return 2 * 2 * kRows * kTokens * kChunk * 32; }

void RunPackedStripChunk(bool even_tiles) {
  static_assert(kTokens % kWideTokens == 4, "the last of the 6-token tiles is a 32 x 4 one");
  static ChunkInputs in;
  // A 2048-column strip is two chunks: the first starts its sums at zero, the second from y.
  static bool first = false;
  first = !first;
  constexpr StripTileFn kTiles[3] = {StripTile<PackedBlocks, 2, 4>, StripTile<PackedBlocks, 2, 5>,
                                     StripTile<PackedBlocks, 2, 6>};
  // As PrefillRows deals them: 64 tokens as nine tiles of 6 and two of 5, or (even_tiles false)
  // ten of 6 and one of 4.
  const int64_t n_tiles = (kTokens + kWideTokens - 1) / kWideTokens;
  for (int64_t i = 0, t0 = 0; i < n_tiles; ++i) {
    const int64_t tokens = even_tiles ? kTokens / n_tiles + (i < kTokens % n_tiles ? 1 : 0)
                                      : (kTokens - t0 < kWideTokens ? kTokens - t0 : kWideTokens);
    kTiles[tokens - 4](in.strip, kChunk, in.a + t0 * kBlocksPerRow, in.neg_offset + t0 * kChunk,
                       in.a_scale + t0 * kBlocksPerRow, kBlocksPerRow, first, in.y + t0 * 2 * kRows, 2 * kRows, kRows);
    t0 += tokens;
  }
}

namespace {

// Block j of a run of 8 (8 x 72 = 9 x 64 bytes from a line) of one tile: its 64 quant bytes from
// the run's lines j and j + 1 (line j kept in *line by the call before), or line 8 alone.
template <int j>
__m512i QuantsByLines(const uint8_t* run, __m512i* line) {
  if constexpr (j == 0) *line = _mm512_load_si512(run);
  if constexpr (j < 7) {
    const __m512i next = _mm512_load_si512(run + 64 * (j + 1));
    const __m512i quants = _mm512_alignr_epi64(next, *line, j + 1);
    *line = next;
    return quants;
  } else {
    return _mm512_load_si512(run + 512);
  }
}

struct PatternSums {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  // The light stand-in for the kernel's arithmetic on one unit's quants and scales.
  void Add(__m512i v, int64_t scales) {
    const __m512i nibbles = _mm512_set1_epi8(0x0f), a = _mm512_set1_epi32(0x01020304);
    const __m512i lo = _mm512_and_si512(v, nibbles);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibbles);
    acc[0] = _mm512_dpbusd_epi32(acc[0], lo, a);
    acc[1] = _mm512_dpbusd_epi32(acc[1], hi, a);
    acc[2] = _mm512_dpbusd_epi32(acc[2], lo, _mm512_set1_epi64(scales));
    acc[3] = _mm512_dpbusd_epi32(acc[3], hi, a);
  }
  uint64_t Total() const {
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
    return static_cast<uint64_t>(_mm512_reduce_add_epi32(sum));
  }
};

// Block b (b % 8 == j) of the step's 8 tiles, prefetching as DecodeGroups' tile order does.
template <int j, bool kByLines>
void PatternStep(const uint8_t* data, int64_t blocks, int64_t r0, int64_t b, int64_t lead, __m512i* lines,
                 PatternSums* sums) {
  using Weights = TiledQ4_0x4;
  constexpr int G = kDecodeGroups;
  // Block b + lead of the same groups, or past their last block that many blocks into the groups
  // after them.
  const int64_t ahead_rows = r0 + G * kRows * ((b + lead) / blocks), ahead_block = (b + lead) % blocks;
  for (int g = 0; g < G; ++g) {
    Weights::Prefetch(data, blocks, ahead_rows + g * kRows, kRows, ahead_block);
    for (int t = 0; t < 4; ++t) {
      const uint8_t* group = Weights::Group(data, blocks, r0 + g * kRows, t, b);
      int64_t scales;
      std::memcpy(&scales, group, 8);
      if constexpr (kByLines) {
        sums->Add(QuantsByLines<j>(group - 72 * j, &lines[4 * g + t]), scales);
      } else {
        sums->Add(_mm512_loadu_si512(group + 8), scales);
      }
    }
  }
}

template <bool kByLines, int... j>
void PatternRun(const uint8_t* data, int64_t blocks, int64_t r0, int64_t b, int64_t lead, __m512i* lines,
                PatternSums* sums, std::integer_sequence<int, j...>) {
  (PatternStep<j, kByLines>(data, blocks, r0, b + j, lead, lines, sums), ...);
}

}  // namespace

uint64_t ReadDecodePattern(const uint8_t* data, int64_t rows, int64_t blocks, bool by_lines) {
  constexpr int G = kDecodeGroups;
  constexpr int64_t lead = kTileOrderLead<TiledQ4_0x4, G>;  // block steps, as DecodeGroups' tile order
  PatternSums sums;
  __m512i lines[4 * G];
  for (int64_t r0 = 0; r0 + G * kRows <= rows; r0 += G * kRows) {
    for (int64_t b = 0; b + 8 <= blocks; b += 8) {
      if (by_lines) {
        PatternRun<true>(data, blocks, r0, b, lead, lines, &sums, std::make_integer_sequence<int, 8>());
      } else {
        PatternRun<false>(data, blocks, r0, b, lead, lines, &sums, std::make_integer_sequence<int, 8>());
      }
    }
  }
  return sums.Total();
}

}  // namespace kestrel::avx512_strip_tile_bench

namespace kestrel::avx512_strip_tile_bench {

void RepackToLineUnits(const uint8_t* q4_0x4, uint8_t* out, int64_t rows, int64_t blocks) {
  for (int64_t tile = 0; tile < rows / 4; ++tile) {
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* unit = q4_0x4 + (tile * blocks + b) * 72;
      uint8_t* lines = out + (tile * blocks + b / 8 * 8) * 72;  // 8 units' bytes are 9 lines
      std::memcpy(lines + 8 * (b % 8), unit, 8);
      std::memcpy(lines + 64 + 64 * (b % 8), unit + 8, 64);
    }
  }
}

namespace {

// Two adjacent 16-row groups (8 tile streams) from r0, as DecodeGroups walks them in the tile
// order and with its arithmetic, over line units: aligned loads, and one prefetch a line (a
// tile's block line, and its scale line at the first block of each 8), kLeadLines units ahead.
void LineUnitsStep(const uint8_t* data, int64_t blocks, int64_t r0, const BlockQ8_0* a, const int32_t* sums,
                   const float* a_scale, float* y) {
  constexpr int G = 2, kTiles = 4;
  constexpr int64_t kLeadUnits = 2;  // 1152 bytes a stream, beside the kernel's 14 blocks (1008)
  const int64_t tile_bytes = blocks * 72, units = blocks / 8;
  const uint8_t* run = data + (r0 / 4) * tile_bytes;
  __m512 acc[G] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t u = 0; u < units; ++u, run += 576) {
    // Past a tile's last unit the lead goes on in the tile its stream reads next, G * kTiles on.
    const int64_t ahead = kLeadUnits * 576 + (u + kLeadUnits < units ? 0 : (G * kTiles - 1) * tile_bytes);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * u + j;
      const __m512i offset = _mm512_set1_epi32(-8 * sums[b]);
      const __m512 as = _mm512_set1_ps(a_scale[b]);
      for (int g = 0; g < G; ++g) {
        const BlockQ8_0* ab = a + b;
        __asm__("" : "+r"(ab));
        const uint8_t* group = run + g * kTiles * tile_bytes;
        __m512i tile[4];
        long long scales[4];
        for (int t = 0; t < kTiles; ++t) {
          const uint8_t* lines = group + t * tile_bytes;
          PrefetchLine<false>(lines + ahead + 64 * (j + 1));
          if (j == 0) PrefetchLine<false>(lines + ahead);
          std::memcpy(&scales[t], lines + 8 * j, 8);
          tile[t] = _mm512_load_si512(lines + 64 * (j + 1));
        }
        // TiledQ4_0x4::LoadChunksAt's transpose.
        const __m512i t01_lo = _mm512_shuffle_i32x4(tile[0], tile[1], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i t01_hi = _mm512_shuffle_i32x4(tile[0], tile[1], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i t23_lo = _mm512_shuffle_i32x4(tile[2], tile[3], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i t23_hi = _mm512_shuffle_i32x4(tile[2], tile[3], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i chunk[4];
        chunk[0] = _mm512_shuffle_i32x4(t01_lo, t23_lo, _MM_SHUFFLE(2, 0, 2, 0));
        chunk[1] = _mm512_shuffle_i32x4(t01_lo, t23_lo, _MM_SHUFFLE(3, 1, 3, 1));
        chunk[2] = _mm512_shuffle_i32x4(t01_hi, t23_hi, _MM_SHUFFLE(2, 0, 2, 0));
        chunk[3] = _mm512_shuffle_i32x4(t01_hi, t23_hi, _MM_SHUFFLE(3, 1, 3, 1));
        WeightBlock w;
        w.scale = HalvesToFloat(_mm256_setr_epi64x(scales[0], scales[1], scales[2], scales[3]));
        SplitNibbles(chunk, &w);
        __m512i low = offset, high = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
          low = _mm512_dpbusd_epi32(low, w.u[k], Broadcast4(ab->qs + 4 * k));
          high = _mm512_dpbusd_epi32(high, w.u[4 + k], Broadcast4(ab->qs + 16 + 4 * k));
        }
        const __m512 scale = _mm512_mul_ps(w.scale, as);
        acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(IntToFloat(_mm512_add_epi32(low, high)), scale));
      }
    }
  }
  for (int g = 0; g < G; ++g) StoreRows(y + r0 + g * kRows, acc[g], kRows);
}

}  // namespace

void DecodeLineUnits(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                     int64_t row_end) {
  for (int64_t r0 = row_begin; r0 + 32 <= row_end; r0 += 32) {
    LineUnitsStep(data, blocks, r0, x.q8_0, x.q8_0_sums, x.q8_0_scales, y);
  }
}

}  // namespace kestrel::avx512_strip_tile_bench
