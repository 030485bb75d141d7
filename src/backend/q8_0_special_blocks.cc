#include "backend/q8_0_special_blocks.h"

#include "backend/q8_0_summary.h"

namespace kestrel {
namespace {

bool NeedsReference(const float* block) {
  float amax = 0.0f, sum = 0.0f;
  for (int i = 0; i < kQuantBlockSize; ++i) {
    const float magnitude = __builtin_fabsf(block[i]);
    amax = magnitude > amax ? magnitude : amax;
    sum += magnitude;
  }
  return !(sum < __builtin_inff()) || (amax != 0.0f && amax < 1e-30f);
}

}  // namespace

void RequantizeSpecialQ8_0Blocks(const float* x, int64_t blocks, BlockQ8_0* out, int32_t* sums, float* scales) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* block = x + b * kQuantBlockSize;
    if (!NeedsReference(block)) continue;
    QuantizeRowQ8_0(block, out + b, kQuantBlockSize);
    if (sums != nullptr) SummarizeQ8_0Blocks(out + b, 1, sums + b, scales + b);
  }
}

}  // namespace kestrel
