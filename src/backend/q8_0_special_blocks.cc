#include "backend/q8_0_special_blocks.h"

namespace kestrel {

bool Q8_0BlockNeedsReference(const float* block) {
  float amax = 0.0f, sum = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float magnitude = __builtin_fabsf(block[i]);
    amax = magnitude > amax ? magnitude : amax;
    sum += magnitude;
  }
  return !(sum < __builtin_inff()) || (amax != 0.0f && amax < 1e-30f);
}

}  // namespace kestrel
