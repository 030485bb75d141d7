// Tokenizer interface. The llama2.c scores-based tokenizer implements it here; the byte-level BPE
// tokenizer (Qwen, Llama 3) slots in behind the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "format/model_config.h"

namespace kestrel {

struct EncodeOptions {
  bool add_bos = true;         // prepend BOS when the tokenizer has one
  bool parse_special = false;  // recognise special-token text such as "<|im_end|>"
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Builds the tokenizer described by `data` (validated), or an error for an unknown type.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const TokenizerData& data);

  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options) const = 0;
  // Appends the bytes `token` contributes when it follows `previous` (-1 at the start) to `out`.
  // The bytes may end inside a multi-byte UTF-8 character; streaming callers hold those back.
  virtual void AppendPiece(int32_t previous, int32_t token, std::string* out) const = 0;

  int32_t vocab_size() const { return static_cast<int32_t>(data_.tokens.size()); }
  int32_t bos_id() const { return data_.bos_id; }
  int32_t eos_id() const { return data_.eos_id; }
  bool IsEndOfGeneration(int32_t id) const;
  const TokenizerData& data() const { return data_; }

 protected:
  explicit Tokenizer(TokenizerData data) : data_(std::move(data)) {}
  TokenizerData data_;
};

// Number of leading bytes of `text` that form complete UTF-8 characters (invalid bytes count as
// complete, so nothing is held back forever).
size_t CompleteUtf8Prefix(std::string_view text);

}  // namespace kestrel
