// The quantized matmul of the NEON dotprod backend ("neon_dotprod", registered in neon_backends.cc):
// block products with the ARMv8.2-A SDOT instruction. This is the only unit compiled with
// -march=armv8.2-a+dotprod+fp16 (sources.cmake); the registry runs it only when the auxiliary vector
// reports dotprod and fp16 arithmetic, since the compiler may use either anywhere in this unit.
// Everything that needs no SDOT (float matmul, elementwise kernels, quantizing activations) is the
// plain NEON backend's armv8-a code, called through neon_kernels.h. This unit includes only
// intrinsics and plain declarations, and its helpers are in anonymous namespaces: no inline or
// template code is shared with other units, so the linker can never hand a v8.2 copy to the neon path.
//
// fp16 arithmetic is deliberately not used: the kernels' f32 accumulation is what the reference
// defines, and the fp16 scales only need FCVTL, which ARMv8.0 has.
#include <arm_neon.h>

#include <cstdint>

#include "backend/kernels.h"
#include "backend_neon/neon_kernels.h"
#include "backend_neon/neon_quant_matmul.h"

namespace kestrel::neon_dotprod {
namespace {

// Q4_0 nibbles n as (n - 8) * 16 in int8: XOR with 0x88 turns each offset-8 nibble into a signed
// 4-bit value, which the shift (low) or mask (high) puts in the top half of a byte. Sums come out
// 16 times too large and are shifted back exactly (|sum| * 16 <= 2^19).
inline void UnpackQ4x16(uint8x16_t q, int8x16_t* lo, int8x16_t* hi) {
  const uint8x16_t x = veorq_u8(q, vdupq_n_u8(0x88));
  *lo = vreinterpretq_s8_u8(vshlq_n_u8(x, 4));
  *hi = vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0xf0)));
}

// Q8_0 weights, plain layout, 4 rows per group.
struct MatmulQ8_0Plain : PlainQ8_0Loader {
  static constexpr int kMcaId = 11;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int32x4_t r[4];
    for (int i = 0; i < 4; ++i) r[i] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w.q[i][0], a0), w.q[i][1], a1);
    sums[0] = vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3]));
  }
};

// Q4_0 weights, plain layout, 4 rows per group.
struct MatmulQ4_0Plain : PlainQ4_0Loader<UnpackQ4x16> {
  static constexpr int kMcaId = 12;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int32x4_t r[4];
    for (int i = 0; i < 4; ++i) r[i] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w.lo[i], a0), w.hi[i], a1);
    sums[0] = vshrq_n_s32(vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3])), 4);
  }
};

// Q4_0 weights in q4_0x4 tiles: vector k holds bytes 4k..4k+3 of rows 0..3, one SDOT lane per row;
// the by-element SDOT pairs them with activation lane k (a[4k..4k+3] and a[16+4k..16+4k+3]).
struct MatmulQ4_0x4 : TiledQ4_0x4Loader<UnpackQ4x16> {
  static constexpr int kMcaId = 13;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int32x4_t acc = vdotq_laneq_s32(vdupq_n_s32(0), w.lo[0], a0, 0);
    acc = vdotq_laneq_s32(acc, w.hi[0], a1, 0);
    acc = vdotq_laneq_s32(acc, w.lo[1], a0, 1);
    acc = vdotq_laneq_s32(acc, w.hi[1], a1, 1);
    acc = vdotq_laneq_s32(acc, w.lo[2], a0, 2);
    acc = vdotq_laneq_s32(acc, w.hi[2], a1, 2);
    acc = vdotq_laneq_s32(acc, w.lo[3], a0, 3);
    acc = vdotq_laneq_s32(acc, w.hi[3], a1, 3);
    sums[0] = vshrq_n_s32(acc, 4);
  }
};

// Q8_0 weights in q8_0x8 tiles: for chunk k, vector j holds bytes 8k..8k+7 of rows 2j and 2j+1;
// SDOT against a[8k..8k+7] repeated gives each row's two 4-byte halves in adjacent lanes.
struct MatmulQ8_0x8 : TiledQ8_0x8Loader {
  static constexpr int kMcaId = 14;
  static void Dot(const Weights& w, const int8_t* a, int32x4_t* sums) {
    int32x4_t r[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int k = 0; k < 4; ++k) {
      const int8x8_t a8 = vld1_s8(a + 8 * k);
      const int8x16_t a16 = vcombine_s8(a8, a8);
      for (int j = 0; j < 4; ++j) r[j] = vdotq_s32(r[j], vld1q_s8(w.quants + 64 * k + 16 * j), a16);
    }
    sums[0] = vpaddq_s32(r[0], r[1]);
    sums[1] = vpaddq_s32(r[2], r[3]);
  }
};

}  // namespace

void matmul__neondot(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0:
      if (w.layout == Layout::kQ8_0x8) return MatmulQuantized<MatmulQ8_0x8>(w, x, y, y_stride, row_begin, row_end);
      return MatmulQuantized<MatmulQ8_0Plain>(w, x, y, y_stride, row_begin, row_end);
    case DType::kQ4_0:
      if (w.layout == Layout::kQ4_0x4) return MatmulQuantized<MatmulQ4_0x4>(w, x, y, y_stride, row_begin, row_end);
      return MatmulQuantized<MatmulQ4_0Plain>(w, x, y, y_stride, row_begin, row_end);
    default: return neon::matmul_float__neon(w, x, y, y_stride, row_begin, row_end);
  }
}

}  // namespace kestrel::neon_dotprod
