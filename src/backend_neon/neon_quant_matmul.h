// The loop around the ARM quantized block-dot kernels: groups of 4 or 8 weight rows (one vector
// lane per row), blocks in ascending order, several tokens per pass over the weights.
//
// Bit-exactness with the generic reference comes from its structure: each lane holds one (row,
// token) accumulator and adds the blocks in ascending order with the reference's two roundings,
// acc + float(sum) * (d_w * d_a), as separate multiplies and adds (never FMA; the sources are built
// with -ffp-contract=off). The integer block sums are exact in any order, and the fp16 scales are
// widened with FCVTL, which is exact and part of ARMv8.0.
//
// Everything here sits in an anonymous namespace on purpose: each ISA unit that includes this file
// (neon_kernels.cc for armv8-a, neon_dotprod_kernels.cc for armv8.2-a) gets its own private copy
// compiled with its own flags, so the linker can never substitute the ARMv8.2 copy on an ARMv8.0 CPU.
// A kernel K provides (the first five usually by deriving from one of the loaders below, which
// both units share; the last two are what differs between them):
//   kRows                       rows per group (a multiple of 4)
//   Source                      where the group's blocks are
//   MakeSource(w, row, end)     the group starting at `row` (rows past `end` repeat the last one)
//   Weights                     one block column of the group, ready for Dot (unpacked once, used
//                               for every token)
//   Load(src, b, &weights, dw)  block column b and its kRows weight scales as f32 (kRows/4 vectors)
//   Dot(weights, a_qs, sums)    kRows int32 block sums with one Q8_0 activation block
//   kMcaId                      names the kernel's loop in scripts/llvm-mca-table.sh
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "backend/kernels.h"
#include "backend/mca_mark.h"

namespace kestrel {
namespace {

// The fp16 scale at `d` widened exactly, in every lane.
inline float32x4_t BroadcastFp16(const uint16_t* d) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16(d))); }

// Four consecutive fp16 scales widened exactly.
inline float32x4_t LoadFp16x4(const uint8_t* d) {
  uint16_t h[4];
  std::memcpy(h, d, sizeof(h));
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// acc + float(sum) * (d_w * d_a): the reference's rounding steps, lane by lane.
inline float32x4_t AccumulateBlock(float32x4_t acc, int32x4_t sum, float32x4_t d_w, float32x4_t d_a) {
  return vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(sum), vmulq_f32(d_w, d_a)));
}

// Block pointers of 4 plain-layout rows; rows at or past `row_end` repeat the last valid row (their
// results are computed and dropped, which keeps the inner loop free of row tails).
template <typename Block>
struct PlainRows4 {
  const Block* rows[4];
  static PlainRows4 Make(const MatrixView& w, int64_t row, int64_t row_end) {
    PlainRows4 s;
    const int64_t blocks = w.columns / kQuantBlockSize;
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row + i < row_end ? row + i : row_end - 1;
      s.rows[i] = static_cast<const Block*>(w.data) + r * blocks;
    }
    return s;
  }
  float32x4_t Scales(int64_t b) const {
    uint16_t h[4];
    for (int i = 0; i < 4; ++i) std::memcpy(&h[i], &rows[i][b].d, 2);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  }
};

// The first block group of a tile in a tiled layout; group b follows at b * group_bytes.
struct TileStart {
  const uint8_t* tile;
  template <int kRows, typename Block>
  static TileStart Make(const MatrixView& w, int64_t row) {
    const int64_t blocks = w.columns / kQuantBlockSize;
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    return TileStart{bytes + (row / kRows) * blocks * static_cast<int64_t>(kRows * sizeof(Block))};
  }
};

// ---- Weight loaders: the layouts as each kernel reads them ----------------------------------------

// How a unit turns 16 bytes of Q4_0 nibbles into low (elements 0-15) and high (16-31) int8 vectors;
// the plain NEON and the dotprod units scale them differently.
using UnpackQ4Fn = void (*)(uint8x16_t q, int8x16_t* lo, int8x16_t* hi);

// Four rows' (or four tile chunks') nibbles, unpacked.
struct Q4Weights {
  int8x16_t lo[4], hi[4];
};

// Q8_0, plain layout, 4 rows per group: each row's 32 quants as two vectors.
struct PlainQ8_0Loader {
  static constexpr int kRows = 4;
  using Source = PlainRows4<BlockQ8_0>;
  struct Weights {
    int8x16_t q[4][2];
  };
  static Source MakeSource(const MatrixView& w, int64_t row, int64_t row_end) { return Source::Make(w, row, row_end); }
  static void Load(const Source& s, int64_t b, Weights* w, float32x4_t* d_w) {
    for (int i = 0; i < 4; ++i) {
      w->q[i][0] = vld1q_s8(s.rows[i][b].qs);
      w->q[i][1] = vld1q_s8(s.rows[i][b].qs + 16);
    }
    d_w[0] = s.Scales(b);
  }
};

// Q4_0, plain layout, 4 rows per group: lo[i] and hi[i] are row i's elements 0-15 and 16-31.
template <UnpackQ4Fn Unpack>
struct PlainQ4_0Loader {
  static constexpr int kRows = 4;
  using Source = PlainRows4<BlockQ4_0>;
  using Weights = Q4Weights;
  static Source MakeSource(const MatrixView& w, int64_t row, int64_t row_end) { return Source::Make(w, row, row_end); }
  static void Load(const Source& s, int64_t b, Weights* w, float32x4_t* d_w) {
    for (int i = 0; i < 4; ++i) Unpack(vld1q_u8(s.rows[i][b].qs), &w->lo[i], &w->hi[i]);
    d_w[0] = s.Scales(b);
  }
};

// Q4_0 in q4_0x4 tiles, read as stored: 4 scales, then vector k holds bytes 4k..4k+3 of rows 0..3
// (one 32-bit lane per row), so lo[k] / hi[k] are elements 4k..4k+3 / 16+4k..16+4k+3 of each row.
template <UnpackQ4Fn Unpack>
struct TiledQ4_0x4Loader {
  static constexpr int kRows = 4;
  static constexpr int64_t kGroupBytes = 4 * sizeof(BlockQ4_0);
  using Source = TileStart;
  using Weights = Q4Weights;
  static Source MakeSource(const MatrixView& w, int64_t row, int64_t) { return Source::Make<4, BlockQ4_0>(w, row); }
  static void Load(const Source& s, int64_t b, Weights* w, float32x4_t* d_w) {
    const uint8_t* group = s.tile + b * kGroupBytes;
    d_w[0] = LoadFp16x4(group);
    for (int k = 0; k < 4; ++k) Unpack(vld1q_u8(group + 8 + 16 * k), &w->lo[k], &w->hi[k]);
  }
};

// Q8_0 in q8_0x8 tiles: per block column 8 scales, then for chunk k = 0..3 four 16-byte vectors j
// holding bytes 8k..8k+7 of rows 2j and 2j+1. No unpacking: Dot reads the bytes where they lie.
struct TiledQ8_0x8Loader {
  static constexpr int kRows = 8;
  static constexpr int64_t kGroupBytes = 8 * sizeof(BlockQ8_0);
  using Source = TileStart;
  struct Weights {
    const int8_t* quants;
  };
  static Source MakeSource(const MatrixView& w, int64_t row, int64_t) { return Source::Make<8, BlockQ8_0>(w, row); }
  static void Load(const Source& s, int64_t b, Weights* w, float32x4_t* d_w) {
    const uint8_t* group = s.tile + b * kGroupBytes;
    d_w[0] = LoadFp16x4(group);
    d_w[1] = LoadFp16x4(group + 8);
    w->quants = reinterpret_cast<const int8_t*>(group + 16);
  }
};

// ---- The loop ---------------------------------------------------------------------------------

template <typename K, int kTokens>
inline void MatmulGroup(const typename K::Source& src, int64_t blocks, const BlockQ8_0* activations, float* y,
                        int64_t y_stride, int valid_rows) {
  constexpr int kVectors = K::kRows / 4;
  float32x4_t acc[kTokens][kVectors];
  for (int t = 0; t < kTokens; ++t) {
    for (int v = 0; v < kVectors; ++v) acc[t][v] = vdupq_n_f32(0.0f);
  }
  for (int64_t b = 0; b < blocks; ++b) {
    KESTREL_MCA_MARK("BEGIN", K::kMcaId, kTokens);
    typename K::Weights weights;
    float32x4_t d_w[kVectors];
    K::Load(src, b, &weights, d_w);
    for (int t = 0; t < kTokens; ++t) {
      const BlockQ8_0& a = activations[t * blocks + b];
      const float32x4_t d_a = BroadcastFp16(&a.d);
      int32x4_t sums[kVectors];
      K::Dot(weights, a.qs, sums);
      for (int v = 0; v < kVectors; ++v) acc[t][v] = AccumulateBlock(acc[t][v], sums[v], d_w[v], d_a);
    }
    KESTREL_MCA_MARK("END", K::kMcaId, kTokens);
  }
  for (int t = 0; t < kTokens; ++t) {
    float* out = y + t * y_stride;
    if (valid_rows == K::kRows) {
      for (int v = 0; v < kVectors; ++v) vst1q_f32(out + 4 * v, acc[t][v]);
    } else {
      float tmp[K::kRows];
      for (int v = 0; v < kVectors; ++v) vst1q_f32(tmp + 4 * v, acc[t][v]);
      for (int r = 0; r < valid_rows; ++r) out[r] = tmp[r];
    }
  }
}

// The whole row range: groups of K::kRows rows, tokens four at a time so each unpacked weight
// block serves four tokens (prefill), then the remaining one to three.
template <typename K>
void MatmulQuantized(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const int64_t blocks = w.columns / kQuantBlockSize;
  for (int64_t r = row_begin; r < row_end; r += K::kRows) {
    const int valid = static_cast<int>(row_end - r < K::kRows ? row_end - r : K::kRows);
    const typename K::Source src = K::MakeSource(w, r, row_end);
    int64_t t = 0;
    for (; t + 4 <= x.n_tokens; t += 4) {
      MatmulGroup<K, 4>(src, blocks, x.q8_0 + t * blocks, y + t * y_stride + r, y_stride, valid);
    }
    const BlockQ8_0* a = x.q8_0 + t * blocks;
    float* out = y + t * y_stride + r;
    switch (x.n_tokens - t) {
      case 3: MatmulGroup<K, 3>(src, blocks, a, out, y_stride, valid); break;
      case 2: MatmulGroup<K, 2>(src, blocks, a, out, y_stride, valid); break;
      case 1: MatmulGroup<K, 1>(src, blocks, a, out, y_stride, valid); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace kestrel
