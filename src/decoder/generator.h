// The generation loop: sample, stream text, stop on end-of-generation tokens, stop strings, the
// token limit, the context limit or the caller's word. Text reaches the callback in batches of
// whole UTF-8 characters; text that may begin a stop string is held back until it cannot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/sampler.h"
#include "decoder/session.h"

namespace kestrel {

enum class StopReason { kMaxTokens, kEndOfGeneration, kStopString, kCallback, kContextFull };

struct GenerateOptions {
  SamplingConfig sampling;
  int32_t max_tokens = 256;
  std::vector<std::string> stop_strings;
  int32_t batch_tokens = 1;  // tokens per callback (the last batch may be shorter)
};

// Returns false to stop generation.
using TextCallback = bool (*)(const char* text, size_t length, const int32_t* tokens, size_t n_tokens, void* user_data);

struct GenerateResult {
  int32_t n_generated = 0;
  StopReason reason = StopReason::kMaxTokens;
};

class Generator {
 public:
  explicit Generator(int32_t vocab_size) : sampler_(vocab_size) {}
  // Generates after what `session` has evaluated (its logits must be current). `history` holds the
  // tokens evaluated so far (for penalties and for the piece that follows the last token).
  absl::StatusOr<GenerateResult> Run(Session& session, const GenerateOptions& options, std::vector<int32_t>* history,
                                     TextCallback callback, void* user_data);

 private:
  Sampler sampler_;
  std::vector<float> logits_;
  std::string pending_;
  std::vector<int32_t> pending_tokens_;
};

}  // namespace kestrel
