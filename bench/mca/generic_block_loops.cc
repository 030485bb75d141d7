// The generic backend's quantized block loop (src/backend_generic/generic_kernels.cc, plain
// layout: one row, one token, blocks in ascending order), restated with llvm-mca markers so
// scripts/llvm-mca-table.sh can compare it with the NEON loops compiled for the same CPU. Only for
// that script; not part of the library. Fp16ToFp32 stays an out-of-line call as in the library, so
// its body is not counted: the generic figures are lower bounds.
#include <cstdint>
#include <cstring>

namespace kestrel {

float Fp16ToFp32(uint16_t h);

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};

namespace {

inline int32_t DotBlock(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) sum += int32_t{w.qs[i]} * int32_t{a.qs[i]};
  return sum;
}

inline int32_t DotBlock(const BlockQ4_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < 16; ++j) {
    sum += ((w.qs[j] & 0x0f) - 8) * int32_t{a.qs[j]};
    sum += ((w.qs[j] >> 4) - 8) * int32_t{a.qs[j + 16]};
  }
  return sum;
}

}  // namespace

// kMcaId 91 (Q8_0) and 92 (Q4_0), one row and one token per iteration.
float GenericRowQ8_0(const uint8_t* row, const BlockQ8_0* a, int64_t blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    __asm__ volatile("// LLVM-MCA-BEGIN k91t1");
    BlockQ8_0 wb;
    std::memcpy(&wb, row + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
    const float scale = Fp16ToFp32(wb.d) * Fp16ToFp32(a[b].d);
    acc += static_cast<float>(DotBlock(wb, a[b])) * scale;
    __asm__ volatile("// LLVM-MCA-END k91t1");
  }
  return acc;
}

float GenericRowQ4_0(const uint8_t* row, const BlockQ8_0* a, int64_t blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    __asm__ volatile("// LLVM-MCA-BEGIN k92t1");
    BlockQ4_0 wb;
    std::memcpy(&wb, row + b * sizeof(BlockQ4_0), sizeof(BlockQ4_0));
    const float scale = Fp16ToFp32(wb.d) * Fp16ToFp32(a[b].d);
    acc += static_cast<float>(DotBlock(wb, a[b])) * scale;
    __asm__ volatile("// LLVM-MCA-END k92t1");
  }
  return acc;
}

}  // namespace kestrel
