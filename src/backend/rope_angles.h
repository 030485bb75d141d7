// The cosines and sines RoPE rotates by at one position: angle i = pos * inv_freq[i]. Every layer
// and both the query and key heads of a token use the same ones, so the session computes them once
// per token and the rope kernels take them ready-made (computed per call, they were most of a
// prefill's per-token work outside the products; bench/README.md).
#pragma once

#include <cstdint>

namespace kestrel {

// cos[i] and sin[i] of float(pos) * inv_freq[i] for i < half (std::cos / std::sin in float).
void RopeAngles(int64_t pos, const float* inv_freq, int64_t half, float* cos, float* sin);

}  // namespace kestrel
