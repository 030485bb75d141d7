// Token sampling: penalties, then greedy or (top-k, temperature, top-p, min-p) with a seeded,
// platform-independent random generator. Buffers are sized once; sampling allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace kestrel {

struct SamplingConfig {
  float temperature = 0.8f;     // <= 0: greedy
  int32_t top_k = 40;           // 0: off
  float top_p = 0.95f;          // 1: off
  float min_p = 0.05f;          // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // history window for the penalties
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

absl::Status ValidateSamplingConfig(const SamplingConfig& config);

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);
  // Sets the configuration and reseeds the generator.
  void Reset(const SamplingConfig& config);
  // Picks the next token. `logits` (vocab_size values) is modified by the penalties.
  int32_t Sample(float* logits, const int32_t* history, size_t n_history);

 private:
  uint64_t NextRandom();
  double NextUniform();  // [0, 1)

  int32_t vocab_size_;
  SamplingConfig config_;
  uint64_t state_ = 0;
  std::vector<int32_t> counts_;
  struct Candidate {
    int32_t id;
    float value;
  };
  std::vector<Candidate> candidates_;
};

}  // namespace kestrel
