// Sampler implementation. The generator is splitmix64, so a seed gives the same tokens on every
// platform and standard library.
#include "decoder/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kestrel {

absl::Status ValidateSamplingConfig(const SamplingConfig& c) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("sampling: ", what)); };
  if (!std::isfinite(c.temperature) || c.temperature < 0.0f) return bad(absl::StrCat("temperature must be >= 0, got ", c.temperature));
  if (c.top_k < 0) return bad(absl::StrCat("top_k must be >= 0, got ", c.top_k));
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f)) return bad(absl::StrCat("top_p must be in (0, 1], got ", c.top_p));
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) return bad(absl::StrCat("min_p must be in [0, 1], got ", c.min_p));
  if (!(c.repeat_penalty > 0.0f) || !std::isfinite(c.repeat_penalty)) {
    return bad(absl::StrCat("repeat_penalty must be > 0, got ", c.repeat_penalty));
  }
  if (c.repeat_last_n < 0) return bad(absl::StrCat("repeat_last_n must be >= 0, got ", c.repeat_last_n));
  if (!std::isfinite(c.presence_penalty) || !std::isfinite(c.frequency_penalty)) {
    return bad("presence and frequency penalties must be finite");
  }
  return absl::OkStatus();
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size), counts_(static_cast<size_t>(vocab_size), 0), candidates_(static_cast<size_t>(vocab_size)) {}

void Sampler::Reset(const SamplingConfig& config) {
  config_ = config;
  state_ = config.seed;
}

uint64_t Sampler::NextRandom() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Sampler::NextUniform() { return static_cast<double>(NextRandom() >> 11) * (1.0 / 9007199254740992.0); }

int32_t Sampler::Sample(float* logits, const int32_t* history, size_t n_history) {
  // Penalties over the recent history.
  const bool penalize = config_.repeat_penalty != 1.0f || config_.presence_penalty != 0.0f ||
                        config_.frequency_penalty != 0.0f;
  if (penalize && config_.repeat_last_n > 0 && n_history > 0) {
    const size_t window = std::min(n_history, static_cast<size_t>(config_.repeat_last_n));
    const int32_t* recent = history + (n_history - window);
    for (size_t i = 0; i < window; ++i) {
      if (recent[i] >= 0 && recent[i] < vocab_size_) ++counts_[recent[i]];
    }
    for (size_t i = 0; i < window; ++i) {
      const int32_t id = recent[i];
      if (id < 0 || id >= vocab_size_ || counts_[id] == 0) continue;
      float& l = logits[id];
      if (config_.repeat_penalty != 1.0f) l = l > 0.0f ? l / config_.repeat_penalty : l * config_.repeat_penalty;
      l -= config_.presence_penalty + config_.frequency_penalty * static_cast<float>(counts_[id]);
      counts_[id] = 0;  // each distinct token is penalized once; this also resets the counts
    }
  }
  if (config_.temperature <= 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < vocab_size_; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return best;
  }
  size_t n = static_cast<size_t>(vocab_size_);
  for (size_t i = 0; i < n; ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};
  auto by_value = [](const Candidate& a, const Candidate& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); };
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + config_.top_k, candidates_.begin() + static_cast<std::ptrdiff_t>(n), by_value);
    n = static_cast<size_t>(config_.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n), by_value);
  }
  // Softmax with temperature (candidates are sorted, so the first is the maximum).
  const float max = candidates_[0].value;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    candidates_[i].value = std::exp((candidates_[i].value - max) / config_.temperature);
    sum += candidates_[i].value;
  }
  for (size_t i = 0; i < n; ++i) candidates_[i].value = static_cast<float>(candidates_[i].value / sum);
  // Top-p: the smallest prefix whose mass reaches top_p.
  if (config_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cumulative += candidates_[i].value;
      if (cumulative >= config_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  // Min-p: drop candidates below min_p times the most likely one.
  if (config_.min_p > 0.0f) {
    const float floor = config_.min_p * candidates_[0].value;
    size_t keep = 1;
    while (keep < n && candidates_[keep].value >= floor) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].value;
  const double r = NextUniform() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += candidates_[i].value;
    if (r < cumulative) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

}  // namespace kestrel
