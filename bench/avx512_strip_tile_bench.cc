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
