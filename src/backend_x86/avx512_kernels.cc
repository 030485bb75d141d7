// AVX-512 VNNI kernels: the quantized matmul (Q4_0 and Q8_0 weights, plain and tiled) with VPDPBUSD.
// With avx512_attention.cc and avx512_activations.cc, the only files compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni; it includes nothing but the kernel types, intrinsics and a
// macro (llvm-mca markers), and keeps every helper in an anonymous namespace, so no AVX-512 code can
// leak into shared inline functions.
// avx512_simde_kernels.cc compiles it a second time for AVX2, with SIMDe emulating the AVX-512
// intrinsics (a test-only backend).
//
// A zmm holds 16 weight rows, one per 32-bit lane. Each weight block (32 columns) of 16 rows is
// rearranged into eight registers u[k] whose lane i holds the 4 bytes of row i that multiply
// activation bytes 4k..4k+3, the same bytes for every lane: one 32-bit broadcast per register, so
// VPDPBUSD sums each row's 32 products in its own lane and no horizontal reduction is needed.
// VPDPBUSD multiplies unsigned by signed bytes: Q4_0 nibbles go in as they are (0..15) and Q8_0
// quants as w + 128, and zero_point * sum(a) is subtracted once per block. Integer sums are exact,
// and each row's float accumulation is the reference's (blocks in ascending order, acc +
// float(sum) * (d_w * d_a) with a separate multiply and add), so results are bit-identical to the
// generic backend.
//
// Prefill rearranges each block once into a stack buffer that every token tile reads (32 rows x 6
// tokens per tile: each activation broadcast, offset and scale serves two VPDPBUSD rows); Q4_0 stays
// packed there and the tiles split its nibbles. Decode rearranges as it streams, two row groups at
// a time. Figures: bench/README.md.
#include "backend_x86/avx512_kernels.h"

#include <cstring>
#include <type_traits>

#include "backend/faster_path.h"
#include "backend/mca_mark.h"
#include "backend/tile_streams.h"
#include "backend_x86/avx2_kernels.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_weight_blocks.h"

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

constexpr int kTokenTile = 8;  // tokens per prefill tile of 16 rows

// Prefill: each strip of 32 rows (16 at a range's end) is loaded and rearranged once per chunk of
// kUnpackBlocks blocks into a stack buffer (18 KB, in L1) that every token tile then reads, so a
// prompt streams its weights from memory once and rearranges each block once, instead of once per
// token tile. Accumulators cross chunks through y (an f32 store and load are exact).
constexpr int64_t kUnpackBlocks = 16;
// Q4_0 chunks stay packed (Weights::Pack: 320 bytes a block of 16 rows against a WeightBlock's 576),
// so a 20 KB buffer holds twice the blocks, the accumulators cross chunks through y half as often,
// and the pass before the tiles only moves 128-bit lanes. Against unpacking into WeightBlocks:
// kernels bench 1.04-1.06x, Qwen3-1.7B pp64 products 0.91x the time at two threads
// (bench/README.md).
constexpr int64_t kPackedChunkBlocks = 32;
constexpr int64_t kTokenChunk = 256;  // tokens whose offsets are kept per strip chunk (16-32 KB)
constexpr int kWideTokens = 6;        // tokens per 32-row tile

// How a tile reads block i of its strip buffer: the eight VPDPBUSD weight operands and the rows'
// d_w. kChunkBlocks: blocks per strip chunk, which is also the neg_offset table's row length.
struct UnpackedBlocks {  // WeightBlocks, rearranged before the tiles run
  static constexpr int64_t kChunkBlocks = kUnpackBlocks;
  static constexpr int kMcaId = 35;  // 36 for 16-row strips
  static const uint8_t* Block(const uint8_t* strip, int64_t i) { return strip + i * sizeof(WeightBlock); }
  static __m512i Operand(const uint8_t* block, int k) { return reinterpret_cast<const WeightBlock*>(block)->u[k]; }
  static __m512 Scale(const uint8_t* block) { return reinterpret_cast<const WeightBlock*>(block)->scale; }
};
struct PackedBlocks {  // Q4_0 kept packed (Weights::Pack): the nibbles are split as the tile reads them
  static constexpr int64_t kChunkBlocks = kPackedChunkBlocks;
  static constexpr int kMcaId = 37;  // 38 for 16-row strips
  static const uint8_t* Block(const uint8_t* strip, int64_t i) { return strip + i * kPackedBlockBytes; }
  static __m512i Operand(const uint8_t* block, int k) {
    const __m512i packed = _mm512_load_si512(block + 64 + 64 * (k & 3));
    return _mm512_and_si512(k < 4 ? packed : _mm512_srli_epi16(packed, 4), _mm512_set1_epi8(0x0f));
  }
  static __m512 Scale(const uint8_t* block) {
    return HalvesToFloat(_mm256_load_si256(reinterpret_cast<const __m256i*>(block)));
  }
};

template <bool kPacked>
struct StripBlocks {
  using type = UnpackedBlocks;
};
template <>
struct StripBlocks<true> {
  using type = PackedBlocks;
};

// kTokens tokens against blocks 0 .. n-1 of kGroups x 16 rows in the strip buffer (kGroups blocks
// per block index; n_rows in the last group). a, neg_offset (-zero_point * sum(a)) and a_scale hold
// the first token's entries at the chunk's first block; a and a_scale advance by a_stride per
// token, neg_offset by Blocks::kChunkBlocks. y is the first token's output row at the strip's first
// row; the sums start from zero when `first`, else continue from y. Token and group counts are
// template arguments so the accumulators stay in registers. 32 rows x 6 tokens make each
// activation broadcast, offset and scale serve two VPDPBUSD rows: 10-16% faster than 16 x 8 on a
// Zen 5 (bench/README.md). Packed Q4_0 blocks: the ANDs and shifts issue beside the VPDPBUSDs on a
// Zen 5 instead of in a pass of their own before the tiles.
template <typename Blocks, int kGroups, int kTokens>
void StripTile(const uint8_t* strip, int64_t n, const BlockQ8_0* a, const int32_t* neg_offset, const float* a_scale,
               int64_t a_stride, bool first, float* y, int64_t y_stride, int n_rows) {
  __m512 acc[kTokens][kGroups];
  for (int t = 0; t < kTokens; ++t) {
    for (int g = 0; g < kGroups; ++g) {
      const int rows = g + 1 < kGroups ? kRows : n_rows;
      acc[t][g] = first ? _mm512_setzero_ps() : LoadRows(y + t * y_stride + g * kRows, rows);
    }
  }
  [[maybe_unused]] constexpr int kMcaId = Blocks::kMcaId + (kGroups == 2 ? 0 : 1);
  for (int64_t b = 0; b < n; ++b) {
    KESTREL_MCA_MARK("BEGIN", kMcaId, kTokens);
    const uint8_t* wb[kGroups];
    for (int g = 0; g < kGroups; ++g) wb[g] = Blocks::Block(strip, kGroups * b + g);
    __m512i sum[kTokens][kGroups];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m512i offset = _mm512_set1_epi32(neg_offset[t * Blocks::kChunkBlocks + b]);
      for (int g = 0; g < kGroups; ++g) sum[t][g] = offset;
    }
    // Chunk-major: consecutive VPDPBUSD belong to different tokens' chains, never waiting on each other.
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m512i u[kGroups];
      for (int g = 0; g < kGroups; ++g) u[g] = Blocks::Operand(wb[g], k);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m512i av = Broadcast4(a[t * a_stride + b].qs + 4 * k);
        for (int g = 0; g < kGroups; ++g) sum[t][g] = _mm512_dpbusd_epi32(sum[t][g], u[g], av);
      }
    }
    __m512 w_scale[kGroups];
    for (int g = 0; g < kGroups; ++g) w_scale[g] = Blocks::Scale(wb[g]);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m512 as = _mm512_set1_ps(a_scale[t * a_stride + b]);
      for (int g = 0; g < kGroups; ++g) {
        const __m512 scale = _mm512_mul_ps(w_scale[g], as);
        acc[t][g] = _mm512_add_ps(acc[t][g], _mm512_mul_ps(IntToFloat(sum[t][g]), scale));
      }
    }
    KESTREL_MCA_MARK("END", kMcaId, kTokens);
  }
  for (int t = 0; t < kTokens; ++t) {
    for (int g = 0; g < kGroups; ++g) {
      const int rows = g + 1 < kGroups ? kRows : n_rows;
      StoreRows(y + t * y_stride + g * kRows, acc[t][g], rows);
    }
  }
}

using StripTileFn = void (*)(const uint8_t*, int64_t, const BlockQ8_0*, const int32_t*, const float*, int64_t, bool,
                             float*, int64_t, int);

// A strip's chunk: rows r0 .. r0 + n_rows - 1 (up to 32), blocks b0 .. b0 + n - 1.
struct StripChunk {
  int64_t r0, b0, n;
  int n_rows;
};

template <typename Weights, bool kToL2 = false>
void PrefetchBlock(const uint8_t* data, int64_t blocks, const StripChunk& c, int64_t i) {
  for (int g = 0; g * kRows < c.n_rows; ++g) {
    const int rows = c.n_rows - g * kRows < kRows ? c.n_rows - g * kRows : kRows;
    Weights::template Prefetch<kToL2>(data, blocks, c.r0 + g * kRows, rows, c.b0 + i);
  }
}

// kPacked (Q4_0 only): the strip buffer keeps blocks packed and StripTile<PackedBlocks> splits the
// nibbles; otherwise it holds WeightBlocks for StripTile<UnpackedBlocks>.
template <typename Weights, bool kPacked>
void PrefillRows(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end) {
  static_assert(!kPacked || Weights::kZeroPoint == 8, "only Q4_0 blocks are kept packed");
  using Blocks = typename StripBlocks<kPacked>::type;
  constexpr int64_t kChunkBlocks = Blocks::kChunkBlocks;
  static constexpr StripTileFn kByTokens[kTokenTile] = {
      StripTile<Blocks, 1, 1>, StripTile<Blocks, 1, 2>, StripTile<Blocks, 1, 3>, StripTile<Blocks, 1, 4>,
      StripTile<Blocks, 1, 5>, StripTile<Blocks, 1, 6>, StripTile<Blocks, 1, 7>, StripTile<Blocks, 1, 8>,
  };
  static constexpr StripTileFn kWideByTokens[kWideTokens] = {
      StripTile<Blocks, 2, 1>, StripTile<Blocks, 2, 2>, StripTile<Blocks, 2, 3>,
      StripTile<Blocks, 2, 4>, StripTile<Blocks, 2, 5>, StripTile<Blocks, 2, 6>,
  };
  static_assert(kTokenTile == 8 && kWideTokens == 6, "the tables list one instantiation per token count");
  if (row_begin >= row_end) return;
  // Strips are 32 rows while 32 remain, then 16 (the last one fewer).
  const auto strip_rows = [&](int64_t r0) {
    const int64_t left = row_end - r0;
    return static_cast<int>(left >= 2 * kRows ? 2 * kRows : (left < kRows ? left : kRows));
  };
  // The chunk after c: the strip's next blocks, else the next strip's first (n = 0 past the range).
  const auto next_chunk = [&](const StripChunk& c) {
    StripChunk next{c.r0, c.b0 + kChunkBlocks, 0, 0};
    if (next.b0 >= blocks) next.r0 += c.n_rows, next.b0 = 0;
    if (next.r0 >= row_end) return next;
    next.n = blocks - next.b0 < kChunkBlocks ? blocks - next.b0 : kChunkBlocks;
    next.n_rows = strip_rows(next.r0);
    return next;
  };
  constexpr int64_t kStripBytes =
      kPacked ? 2 * kChunkBlocks * kPackedBlockBytes : 2 * kChunkBlocks * sizeof(WeightBlock);
  alignas(64) uint8_t strip[kStripBytes];
  alignas(64) int32_t neg_offset[kTokenChunk * kChunkBlocks];
  // Packed Q4_0 strips read the caller's offsets where they come in this kernel's runs: built once
  // per input, not once per strip and chunk (1.3-2.5% of the products' time, bench/README.md).
  static_assert(kPackedChunkBlocks == kQ4_0OffsetRun, "the packed chunks are the runs the table asks for");
  const bool given_offsets = kPacked && x.q4_0_offsets != nullptr && x.q4_0_offset_run == kChunkBlocks;
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = x.n_tokens - c0 < kTokenChunk ? x.n_tokens : c0 + kTokenChunk;
    StripChunk c{row_begin, 0, 0, 0};
    c.n = blocks < kChunkBlocks ? blocks : kChunkBlocks;
    c.n_rows = strip_rows(row_begin);
    for (; c.n > 0; c = next_chunk(c)) {
      const bool wide = c.n_rows == 2 * kRows;
      const int groups = wide ? 2 : 1;
      for (int64_t i = 0; i < c.n; ++i) {
        for (int g = 0; g < groups; ++g) {
          const int rows = wide ? kRows : c.n_rows;
          if constexpr (kPacked) {
            Weights::Pack(data, blocks, c.r0 + g * kRows, rows, c.b0 + i, strip + (groups * i + g) * kPackedBlockBytes);
          } else {
            Weights::Load(data, blocks, c.r0 + g * kRows, rows, c.b0 + i,
                          reinterpret_cast<WeightBlock*>(strip) + groups * i + g);
          }
        }
      }
      const int32_t* offsets = neg_offset;
      if (given_offsets) {
        offsets = x.q4_0_offsets + (c.b0 / kChunkBlocks * x.n_tokens + c0) * kChunkBlocks;
      } else {
        for (int64_t t = c0; t < c1; ++t) {
          const int32_t* sums = x.q8_0_sums + t * blocks + c.b0;
          for (int64_t i = 0; i < c.n; ++i) neg_offset[(t - c0) * kChunkBlocks + i] = -Weights::kZeroPoint * sums[i];
        }
      }
      // The next chunk is prefetched a share per token tile: a burst of prefetches just before
      // unpacking it would wait on memory with nothing to compute (~10% of a prefill). Packed
      // Q4_0 chunks go into L2 that way and then all into L1 during the last token tile, so the
      // activations streaming through L1 do not push them out before the pack reads them (pp64
      // ~1% faster at one and two threads, bench/README.md).
      const StripChunk next = next_chunk(c);
      // The tokens are dealt out evenly over the fewest tiles that hold them (64 tokens in 32-row
      // strips: nine tiles of 6 and two of 5, not ten of 6 and one of 4), as a short tile spends
      // more of its time on what it does once per block.
      const int tile = wide ? kWideTokens : kTokenTile;
      const int64_t n_tiles = (c1 - c0 + tile - 1) / tile;
      const int64_t base_tokens = (c1 - c0) / n_tiles, longer_tiles = (c1 - c0) % n_tiles;
      int64_t prefetched = 0;
      int64_t t0 = c0;
      for (int64_t i_tile = 0; i_tile < n_tiles; ++i_tile) {
        const int64_t share = next.n * (i_tile + 1) / n_tiles;
        for (; prefetched < share; ++prefetched) PrefetchBlock<Weights, kPacked>(data, blocks, next, prefetched);
        if (kPacked && i_tile + 1 == n_tiles) {
          for (int64_t i = 0; i < next.n; ++i) PrefetchBlock<Weights>(data, blocks, next, i);
        }
        const int n_tok = static_cast<int>(base_tokens + (i_tile < longer_tiles ? 1 : 0));
        (wide ? kWideByTokens : kByTokens)[n_tok - 1](strip, c.n, x.q8_0 + t0 * blocks + c.b0,
                                                      offsets + (t0 - c0) * kChunkBlocks,
                                                      x.q8_0_scales + t0 * blocks + c.b0, blocks, c.b0 == 0,
                                                      y + t0 * y_stride + c.r0, y_stride, wide ? kRows : c.n_rows);
        t0 += n_tok;
      }
    }
  }
}

// acc plus one token's block against 16 rows of weights, summed as the reference sums it: the
// integer dot product (offset: -zero point x the activations' sum, where the weights are stored
// unsigned) times d_w x d_a. Two chains (elements 0-15 and 16-31) halve the VPDPBUSD latency.
inline __m512 AddDecodeBlock(__m512 acc, const WeightBlock& w, const BlockQ8_0* ab, __m512i offset, __m512 as) {
  __m512i low = offset, high = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    low = _mm512_dpbusd_epi32(low, w.u[k], Broadcast4(ab->qs + 4 * k));
    high = _mm512_dpbusd_epi32(high, w.u[4 + k], Broadcast4(ab->qs + 16 + 4 * k));
  }
  const __m512 scale = _mm512_mul_ps(w.scale, as);
  return _mm512_add_ps(acc, _mm512_mul_ps(IntToFloat(_mm512_add_epi32(low, high)), scale));
}

// Decode: one token against G adjacent 16-row groups at once, each stream prefetching what it will
// read a little later (PrefetchOrder). One-thread Q4_0 tg32 read 67-70% of
// the bandwidth probe with one group, 75-78% with two groups taken from the two halves of the range
// (prefetching 32 KB ahead in each tile stream), 83-86% with two adjacent groups; three read
// 11-21% slower, four spill registers. The rearrangement is the prefill's, done as the block
// streams in.
//
// Which walk and order read fastest depends on the machine and on what else its memory is doing,
// so the kernel measures three paths as it runs and takes the fastest (FasterPath, below):
// path 0, the tile order over tile streams (DecodeStreams); path 1, the tile order over adjacent
// groups; path 2, the next-group order. On the Intel Xeon CI host the tile streams took Q4_0 0.89x
// adjacent groups' time at one thread (paired) and two-thread decode 5-8% faster; on the Zen 5
// adjacent groups read two-thread Q4_0 2-5% faster in five rounds of six (paired 0.974-0.977x the
// time) and the streams Q8_0 3-7% (bench/README.md, thirty-sixth and thirty-seventh sessions). A fourth path, the group
// after these swept in address order, won on the busy Zen 5 against the next-group order before
// the tile order had its lead and stepped pointer; it was the slowest on both hosts since (two-
// thread Q4_0 tg32 on the Zen 5 15% below the tile order) and was dropped.
enum class PrefetchOrder {
  // The loads' own order, kLeadBytes ahead: block b + lead of the tiles being read, and past a
  // tile's last block the first blocks of the tile that its stream reads next (DecodeStreams).
  kTiles,
  // Block b of the tiles of the group G on: the tile order a whole group ahead (18-55 KB per
  // stream for these models, past L1 for the long rows of the FFN's down projection).
  kNextGroup,
};

// How far ahead the tile order prefetches, over all G groups of a step: enough to cover memory's
// latency at one core's share of the bandwidth, little enough to stay in L1 until read. Per-call
// read rates of leads taken in turn in 1 ms slices of one Q4_0 decode, against the next-group
// order: 2.3 KB 2-10% below, 3.5 KB within 7% either way, 4.6-16 KB 3-22% above, 7-8 KB the most
// (Q8_0 at 6.5 KB +7-13%); bench/README.md.
constexpr int64_t kLeadBytes = 8192;
// That lead in block steps of G 16-row groups (at least one).
template <typename Weights, int G>
constexpr int64_t kTileOrderLead = kLeadBytes / (G * kRows * Weights::kRowBlockBytes) > 0
                                       ? kLeadBytes / (G * kRows * Weights::kRowBlockBytes)
                                       : 1;

// 16-row groups a decode step reads.
constexpr int kDecodeGroups = 2;

// Which tiles a decode step reads (DecodeStreams): its G * kTiles tiles are `spread` tiles apart
// from the tile of r0 on (1: G adjacent 16-row groups), and each tile's stream reads, after it, the
// tile `hop` tiles further on (where the tile order's prefetch goes past the tile's last block).
struct TileWalk {
  int64_t spread, hop;
};
template <typename Weights, int G>
constexpr TileWalk AdjacentGroups() {
  return {1, G * (kRows / Weights::kTileRows)};
}

// The G 16-row groups of one step (n_rows rows of a lone group when not kWhole), by default G
// adjacent groups from r0. One weight pointer steps a block at a time: each tile's unit is that
// pointer plus a multiple of the tile stride, and the tile orders' prefetch a fixed offset from it
// (for kTiles `near`, then `far` once the lead passes the tile's last block and moves to the tile
// its stream reads next), so a block step computes no addresses. The earlier form computed every
// unit's address from (row, block) and parked those values in vector registers; against it one
// thread took 0.87-0.99 of the time in the tile order (Q4_0, eight paired runs; Q8_0 0.95-1.01),
// and llvm-mca's Intel models count 42 cycles a block step instead of 61 (Q4_0; Q8_0 42 instead of
// 58; bench/README.md, x86-mca.md).
template <typename Weights, PrefetchOrder kOrder, int G, bool kWhole = true>
void DecodeGroups(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, const BlockQ8_0* a, const int32_t* sums,
                  const float* a_scale, float* y, TileWalk walk = AdjacentGroups<Weights, G>()) {
  constexpr int kTiles = kRows / Weights::kTileRows;  // tiles per group
  const int n_tiles = (n_rows + Weights::kTileRows - 1) / Weights::kTileRows;
  const int64_t tile_bytes = blocks * Weights::kUnitBytes;
  const int64_t stride = walk.spread * tile_bytes;                // from one of the step's tiles to the next
  int64_t near = G * kTiles * stride, far = near, turn = blocks;  // kNextGroup: the next G groups' block b
  if constexpr (kOrder == PrefetchOrder::kTiles) {
    constexpr int64_t kLead = kTileOrderLead<Weights, G>;
    near = (kLead / blocks) * walk.hop * tile_bytes + (kLead % blocks) * Weights::kUnitBytes;
    far = near + (walk.hop - 1) * tile_bytes;
    turn = blocks - kLead % blocks;  // the first block whose lead lies in the next tile
  }
  const uint8_t* unit = Weights::Group(data, blocks, r0, 0, 0);  // tile 0 of group 0 at block b
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  const auto step = [&](int64_t b, int64_t ahead) {
    const __m512i offset = _mm512_set1_epi32(-Weights::kZeroPoint * sums[b]);
    const __m512 as = _mm512_set1_ps(a_scale[b]);
    for (int g = 0; g < G; ++g) {
      // The empty asm hides that every group reads the same activation block, so each group
      // broadcasts its own words instead of GCC hoisting 8 broadcast registers over all groups:
      // per group most broadcasts fold into VPDPBUSD's memory operand. With addresses computed
      // per block, hoisting them spilled general registers and decoded 10% slower at one thread
      // (Q4_0; Q8_0 3%); with the stepped pointer both forms read the same (paired medians
      // 0.97-1.02; bench/README.md).
      const BlockQ8_0* ab = a + b;
      __asm__("" : "+r"(ab));
      const uint8_t* group = unit + g * kTiles * stride;
      Weights::PrefetchAt(group + ahead, stride, kTiles);
      WeightBlock w;
      Weights::LoadAt(group, stride, kWhole ? kTiles : n_tiles, &w);
      acc[g] = AddDecodeBlock(acc[g], w, ab, offset, as);
    }
    unit += Weights::kUnitBytes;
  };
  constexpr bool kMarked = kOrder == PrefetchOrder::kTiles && G == kDecodeGroups && kWhole;
  int64_t b = 0;
  for (; b < turn; ++b) {
    if constexpr (kMarked) KESTREL_MCA_MARK("BEGIN", Weights::kMcaId, 1);
    step(b, near);
    if constexpr (kMarked) KESTREL_MCA_MARK("END", Weights::kMcaId, 1);
  }
  for (; b < blocks; ++b) step(b, far);
  if (walk.spread == 1) {
    for (int g = 0; g < G; ++g) StoreRows(y + r0 + g * kRows, acc[g], kWhole ? kRows : n_rows);
    return;
  }
  for (int g = 0; g < G; ++g) {
    alignas(64) float lanes[kRows];
    _mm512_store_ps(lanes, acc[g]);
    for (int t = 0; t < kTiles; ++t) {
      std::memcpy(y + r0 + (g * kTiles + t) * walk.spread * Weights::kTileRows, lanes + t * Weights::kTileRows,
                  sizeof(float) * Weights::kTileRows);
    }
  }
}

// Decode's walk in the tile order (tile_streams.h): a step's G * kTiles tiles (8 for Q4_0, 4 for
// Q8_0) head as many streams of kTileStreamLength consecutive tiles, rather than being G adjacent 16-row
// groups. With adjacent groups, products over 2048-column rows (all but the FFN's down projection)
// read 3-6% slower than over 6144-column ones on the Intel Xeon CI host: each step began 8 new
// short streams. Streams of 5 tiles took the one-thread Q4_0 decode of a 2048 x 151936 matrix 0.89x
// the time (paired in one process), 4 tiles 0.91x, 8 0.95x (the streams then start on the same
// 4 KiB page offset), 2 0.98x, and one stream per eighth of the range 0.985x; Q8_0 0.95x with 4-11
// tiles (bench/README.md, thirty-sixth session). The rows a step computes are not adjacent, so each
// tile's sums go to their own rows; each row's sum is the same as before, to the bit.

// Walks whole regions of the range from row_begin; returns the first row left to adjacent groups.
template <typename Weights>
int64_t DecodeStreams(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                      int64_t row_end) {
  constexpr int G = kDecodeGroups;
  constexpr int64_t kStreams = G * kRows / Weights::kTileRows;
  const int64_t walked = WalkTileStreams(
      (row_end - row_begin) / Weights::kTileRows, kStreams, kTileStreamLength, [&](int64_t i, int64_t n, int64_t hop) {
        DecodeGroups<Weights, PrefetchOrder::kTiles, G>(data, blocks, row_begin + i * Weights::kTileRows, kRows, x.q8_0,
                                                        x.q8_0_sums, x.q8_0_scales, y, TileWalk{n, hop});
      });
  return row_begin + walked * Weights::kTileRows;
}

template <typename Weights, PrefetchOrder kOrder, bool kTileStreams>
void DecodeRows(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                int64_t row_end) {
  constexpr int G = kDecodeGroups;
  if constexpr (kTileStreams) row_begin = DecodeStreams<Weights>(data, blocks, x, y, row_begin, row_end);
  const int64_t steps = (row_end - row_begin) / kRows / G;  // steps of G whole 16-row groups
  for (int64_t i = 0; i < steps; ++i) {
    DecodeGroups<Weights, kOrder, G>(data, blocks, row_begin + kRows * G * i, kRows, x.q8_0, x.q8_0_sums,
                                     x.q8_0_scales, y);
  }
  for (int64_t r = row_begin + kRows * G * steps; r < row_end; r += kRows) {
    const int n_rows = static_cast<int>(row_end - r < kRows ? row_end - r : kRows);
    DecodeGroups<Weights, kOrder, 1, false>(data, blocks, r, n_rows, x.q8_0, x.q8_0_sums, x.q8_0_scales, y);
  }
}

// Q4_0 prefill, packed strips (path 0) or unpacked ones (path 1), whichever has lately been faster
// per multiply-add in this process. The packed tiles' ANDs and shifts issue beside the VPDPBUSDs on
// a Zen 5 (4 vector pipes; 0.91x the products' time, bench/README.md), but on Intel's AVX-512 cores
// the 512-bit ALU ops share the VPDPBUSD ports (llvm-mca's models: 89.6 cycles a block step against
// 76.6, bench/x86-mca.md), where the one unpacking pass per chunk should win. A decision every
// 512 ms from a 16 ms trial in 1 ms slices, not decode's 128/8/0.5: a 64-token Qwen3-1.7B prefill
// at two threads took ~150 ms, and with the shorter trial the slower path still ran ~9% of the tile
// time on the busy Zen 5 (noisy trials picking it for whole periods). The unpacked strips must also
// win two trials in a row to take over: on the Zen 5 they lost every quiet trial by 5-13% (36 of
// 36 in four 20-run pp64s), yet on a busy host a lone trial handed them whole periods (27% of the
// samples in one perf run), and which path suits a CPU does not change while it runs.
template <typename Weights>
FasterPath prefill_q4_strips = FasterPath(512'000'000, 16'000'000, 1'000'000, 2, /*confirm=*/2);

template <typename Weights>
void PrefillQuantized(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t y_stride,
                      int64_t row_begin, int64_t row_end) {
  if constexpr (Weights::kZeroPoint == 8) {
    FasterPath& strips = prefill_q4_strips<Weights>;
    const FasterPath::Choice choice = strips.Pick(NowNanoseconds());
    if (choice.path == 1) {
      PrefillRows<Weights, false>(data, blocks, x, y, y_stride, row_begin, row_end);
    } else {
      PrefillRows<Weights, true>(data, blocks, x, y, y_stride, row_begin, row_end);
    }
    if (choice.timed) {
      strips.Report(choice, NowNanoseconds(), static_cast<uint64_t>((row_end - row_begin) * blocks * x.n_tokens));
    }
  } else {
    PrefillRows<Weights, false>(data, blocks, x, y, y_stride, row_begin, row_end);
  }
}

// Which decode path has lately been fastest per byte, for this weight type in this process (one
// each: Q4_0 and Q8_0 streams differ).
template <typename Weights>
FasterPath decode_order = FasterPath::Among(3);

template <typename Weights>
void DecodeRowsFaster(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                      int64_t row_end) {
  FasterPath& order = decode_order<Weights>;
  const FasterPath::Choice choice = order.Pick(NowNanoseconds());
  if (choice.path == 0) {
    DecodeRows<Weights, PrefetchOrder::kTiles, true>(data, blocks, x, y, row_begin, row_end);
  } else if (choice.path == 1) {
    DecodeRows<Weights, PrefetchOrder::kTiles, false>(data, blocks, x, y, row_begin, row_end);
  } else {
    DecodeRows<Weights, PrefetchOrder::kNextGroup, false>(data, blocks, x, y, row_begin, row_end);
  }
  if (choice.timed) {
    order.Report(choice, NowNanoseconds(),
                 static_cast<uint64_t>((row_end - row_begin) * blocks * Weights::kRowBlockBytes));
  }
}

// Decode over q4_0x4_lines: G adjacent 16-row groups from r0 (or, not kWhole, one group of n_rows),
// with DecodeGroups' arithmetic (the same sums to the bit) and its tile order: each of the step's
// tiles is a stream, prefetched kLeadRuns runs ahead, and past its last run in the tile it reads
// next (G groups on). One prefetch a line: a block's quant line, and the run's scale line with its
// first block. Paired against q4_0x4's faster decode path (adjacent groups), two threads took
// 0.89-0.92x the time in most runs (1.00x in two of ten), one thread 0.88-0.98x (kernels bench,
// bench/README.md thirty-ninth session), so this layout has one walk and no chooser.
// 1152 bytes a stream, about the tile order's 8 KB over 8 streams; 1 run ahead read 0.98-1.06x
// q4_0x4's time, 3-4 runs 0.91-0.97x.
constexpr int64_t kLeadRuns = 2;
template <int G, bool kWhole = true>
void DecodeLineGroups(const uint8_t* data, int64_t blocks, int64_t r0, int n_rows, const BlockQ8_0* a,
                      const int32_t* sums, const float* a_scale, float* y) {
  using Weights = LinedQ4_0x4;
  constexpr int kTiles = kRows / Weights::kTileRows;
  const int n_tiles = kWhole ? kTiles : (n_rows + Weights::kTileRows - 1) / Weights::kTileRows;
  const int64_t tile_bytes = blocks * Weights::kGroupBytes, runs = blocks / Weights::kRunBlocks;
  const uint8_t* run = Weights::Run(data, blocks, r0, 0, 0);
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t u = 0; u < runs; ++u, run += Weights::kRunBytes) {
    const int64_t ahead = kLeadRuns * Weights::kRunBytes + (u + kLeadRuns < runs ? 0 : (G * kTiles - 1) * tile_bytes);
    for (int j = 0; j < Weights::kRunBlocks; ++j) {
      const int64_t b = u * Weights::kRunBlocks + j;
      const __m512i offset = _mm512_set1_epi32(-Weights::kZeroPoint * sums[b]);
      const __m512 as = _mm512_set1_ps(a_scale[b]);
      for (int g = 0; g < G; ++g) {
        const BlockQ8_0* ab = a + b;
        __asm__("" : "+r"(ab));  // as in DecodeGroups: each group broadcasts its own words
        const uint8_t* group = run + g * kTiles * tile_bytes;
        for (int t = 0; t < n_tiles; ++t) {
          const uint8_t* ahead_run = group + t * tile_bytes + ahead;
          PrefetchLine<false>(Weights::Quants(ahead_run, b));
          if (j == 0) PrefetchLine<false>(ahead_run);
        }
        WeightBlock w;
        Weights::LoadAt(group, tile_bytes, n_tiles, b, &w);
        acc[g] = AddDecodeBlock(acc[g], w, ab, offset, as);
      }
    }
  }
  for (int g = 0; g < G; ++g) StoreRows(y + r0 + g * kRows, acc[g], kWhole ? kRows : n_rows);
}

void DecodeLines(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                 int64_t row_end) {
  constexpr int G = kDecodeGroups;
  int64_t r = row_begin;
  for (; r + G * kRows <= row_end; r += G * kRows) {
    DecodeLineGroups<G>(data, blocks, r, G * kRows, x.q8_0, x.q8_0_sums, x.q8_0_scales, y);
  }
  for (; r < row_end; r += kRows) {
    const int n_rows = static_cast<int>(row_end - r < kRows ? row_end - r : kRows);
    DecodeLineGroups<1, false>(data, blocks, r, n_rows, x.q8_0, x.q8_0_sums, x.q8_0_scales, y);
  }
}

template <typename Weights>
void MatmulQuantized(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t blocks = w.columns / 32;
  if (blocks == 0) {
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      for (int64_t r = row_begin; r < row_end; ++r) y[t * y_stride + r] = 0.0f;
    }
    return;
  }
  if (x.n_tokens == 1) {
    // Decode over plain rows: 16 (32 with two groups) row streams of 18 or 34 bytes per block read
    // 6.5-8.4 GB/s from memory here, the AVX2 kernel's 4-8 rows at a time 22-27 (bench/README.md).
    if constexpr (std::is_same_v<Weights, LinedQ4_0x4>) {
      return DecodeLines(data, blocks, x, y, row_begin, row_end);
    } else if constexpr (Weights::kTiled) {
      return DecodeRowsFaster<Weights>(data, blocks, x, y, row_begin, row_end);
    } else {
      return avx2::Matmul(w, x, y, y_stride, row_begin, row_end);
    }
  }
  PrefillQuantized<Weights>(data, blocks, x, y, y_stride, row_begin, row_end);
}

// Float products. Every (row, token) is summed the same way whatever tile it falls in: two 16-lane
// accumulators taking alternate 16-column chunks (a last odd chunk goes to the first; the columns
// past the last multiple of 16 are copied into zeroed 16-wide buffers and go to the second, as
// 0 x 0 adds nothing), then their lanes. So results do not depend on how rows are split over
// threads or tokens into batches, and decode and prefill agree bit for bit.
//
// R rows x T tokens at once: each weight vector loaded and widened serves T tokens and each
// activation vector R rows.
template <typename Row, int R, int T>
void FloatTile(const uint8_t* rows, int64_t row_bytes, const float* a, int64_t a_stride, int64_t n, float* y,
               int64_t y_stride) {
  __m512 acc[R][T][2];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm512_setzero_ps();
  }
  const uint8_t* w_row[R];
  const float* a_row[T];
  for (int r = 0; r < R; ++r) w_row[r] = rows + r * row_bytes;
  for (int t = 0; t < T; ++t) a_row[t] = a + t * a_stride;
  // Columns c..c+15 of every row and token into accumulator h.
  auto step = [&](int64_t c, int h) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Row::Load16(w_row[r], c);
    for (int t = 0; t < T; ++t) {
      const __m512 av = _mm512_loadu_ps(a_row[t] + c);
      for (int r = 0; r < R; ++r) acc[r][t][h] = _mm512_fmadd_ps(wv[r], av, acc[r][t][h]);
    }
  };
  int64_t c = 0;
  for (; c + 32 <= n; c += 32) {
    step(c, 0);
    step(c + 16, 1);
  }
  if (c + 16 <= n) {
    step(c, 0);
    c += 16;
  }
  if (const int64_t left = n - c; left > 0) {
    alignas(64) uint8_t w_tail[R][16 * Row::kBytes] = {};
    alignas(64) float a_tail[T][16] = {};
    for (int r = 0; r < R; ++r) {
      std::memcpy(w_tail[r], w_row[r] + c * Row::kBytes, left * Row::kBytes);
      w_row[r] = w_tail[r];
    }
    for (int t = 0; t < T; ++t) {
      std::memcpy(a_tail[t], a_row[t] + c, left * sizeof(float));
      a_row[t] = a_tail[t];
    }
    step(0, 1);
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = Sum16(_mm512_add_ps(acc[r][t][0], acc[r][t][1]));
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

// Decode reads one row after another, one sequential stream (several rows at once read as several
// short streams: 1.2-1.3x slower from memory with 2 KB rows). Prefill: 6 rows x 2 tokens (24
// accumulators, 6 weight vectors and an activation: 31 of the 32 registers; 4 x 3 ran 0.76-1.06x
// as fast).
template <typename Row>
void MatmulFloat(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.columns * Row::kBytes;
  int64_t r = row_begin;
  if (x.n_tokens > 1) {
    for (; r + 6 <= row_end; r += 6) {
      FloatRows<Row, 6>(data + r * row_bytes, row_bytes, x, w.columns, y + r, y_stride);
    }
  }
  for (; r < row_end; ++r) FloatRows<Row, 1>(data + r * row_bytes, row_bytes, x, w.columns, y + r, y_stride);
}

}  // namespace

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
      if (w.layout == Layout::kQ4_0x4Lines) return MatmulQuantized<LinedQ4_0x4>(w, x, y, y_stride, row_begin, row_end);
      return WithQuantizedLoader(w, [&](auto loader) {
        MatmulQuantized<decltype(loader)>(w, x, y, y_stride, row_begin, row_end);
      });
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      if (w.dtype == DType::kF32) return MatmulFloat<F32Row>(w, x, y, y_stride, row_begin, row_end);
      if (w.dtype == DType::kF16) return MatmulFloat<F16Row>(w, x, y, y_stride, row_begin, row_end);
      return MatmulFloat<BF16Row>(w, x, y, y_stride, row_begin, row_end);
  }
}

bool Accepts(DType dtype, Layout layout) {
  return (dtype == DType::kQ4_0 && layout == Layout::kQ4_0x4Lines) || avx2::Accepts(dtype, layout);
}

}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
