// Generation loop implementation.
#include "decoder/generator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kestrel {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t HeldBackForStops(const std::string& text, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (const std::string& stop : stops) {
    for (size_t len = std::min(text.size(), stop.size() - 1); len > held; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        held = len;
        break;
      }
    }
  }
  return held;
}

}  // namespace

absl::StatusOr<GenerateResult> Generator::Run(Session& session, const GenerateOptions& options,
                                              std::vector<int32_t>* history, TextCallback callback, void* user_data) {
  if (auto s = ValidateSamplingConfig(options.sampling); !s.ok()) return s;
  if (options.max_tokens < 0) return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 0, got ", options.max_tokens));
  if (options.batch_tokens < 1) return absl::InvalidArgumentError("batch_tokens must be >= 1");
  for (const auto& stop : options.stop_strings) {
    if (stop.empty()) return absl::InvalidArgumentError("stop strings must not be empty");
  }
  if (session.position() == 0) return absl::FailedPreconditionError("evaluate a prompt before generating");
  sampler_.Reset(options.sampling);
  const Tokenizer& tokenizer = session.model().tokenizer();
  const int32_t vocab = session.vocab_size();
  logits_.resize(static_cast<size_t>(vocab));
  pending_.clear();
  pending_tokens_.clear();
  GenerateResult result;
  bool stopped = false;

  // Sends complete text (minus what may start a stop string) to the callback; `flush_all` at the end.
  auto deliver = [&](bool flush_all) -> bool {
    size_t ready = flush_all ? pending_.size() : CompleteUtf8Prefix(pending_);
    if (!flush_all) ready = std::min(ready, pending_.size() - HeldBackForStops(pending_, options.stop_strings));
    if (ready == 0 && pending_tokens_.empty()) return true;
    bool keep_going = true;
    if (callback != nullptr) {
      keep_going = callback(pending_.data(), ready, pending_tokens_.data(), pending_tokens_.size(), user_data);
    }
    pending_.erase(0, ready);
    pending_tokens_.clear();
    return keep_going;
  };

  while (!stopped) {
    if (result.n_generated >= options.max_tokens) {
      result.reason = StopReason::kMaxTokens;
      break;
    }
    std::memcpy(logits_.data(), session.logits(), logits_.size() * sizeof(float));
    const int32_t token = sampler_.Sample(logits_.data(), history->data(), history->size());
    if (tokenizer.IsEndOfGeneration(token)) {
      result.reason = StopReason::kEndOfGeneration;
      break;
    }
    const int32_t previous = history->empty() ? -1 : history->back();
    history->push_back(token);
    ++result.n_generated;
    pending_tokens_.push_back(token);
    tokenizer.AppendPiece(previous, token, &pending_);
    for (const std::string& stop : options.stop_strings) {
      const size_t at = pending_.find(stop);
      if (at != std::string::npos) {
        pending_.resize(at);
        result.reason = StopReason::kStopString;
        stopped = true;
      }
    }
    if (stopped) break;
    if (static_cast<int32_t>(pending_tokens_.size()) >= options.batch_tokens && !deliver(false)) {
      result.reason = StopReason::kCallback;
      return result;
    }
    if (result.n_generated >= options.max_tokens) {
      result.reason = StopReason::kMaxTokens;
      break;
    }
    if (session.position() >= session.context_length()) {
      result.reason = StopReason::kContextFull;
      break;
    }
    if (auto s = session.Eval(&token, 1, /*decode=*/true); !s.ok()) return s;
  }
  if (!deliver(true)) result.reason = StopReason::kCallback;
  return result;
}

}  // namespace kestrel
