#include "backend/rope_angles.h"

#include <cmath>

namespace kestrel {

void RopeAngles(int64_t pos, const float* inv_freq, int64_t half, float* cos, float* sin) {
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

}  // namespace kestrel
