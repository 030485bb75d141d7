// The llama2.c tokenizer: SentencePiece-style BPE driven by merge scores, with a dummy-prefix
// space and byte fallback tokens <0x00>..<0xFF>, exactly as llama2.c's run.c encodes and decodes.
#pragma once

#include "absl/container/flat_hash_map.h"
#include "tokenizer/tokenizer.h"

namespace kestrel {

class Llama2cTokenizer : public Tokenizer {
 public:
  explicit Llama2cTokenizer(TokenizerData data);
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options) const override;
  void AppendPiece(int32_t previous, int32_t token, std::string* out) const override;

 private:
  int32_t Lookup(std::string_view piece) const;
  absl::flat_hash_map<std::string, int32_t> ids_;
  int32_t byte_fallback_base_ = -1;  // id of <0x00>, or -1
  std::vector<int16_t> byte_value_;  // per id: the byte a <0xXX> token stands for, or -1
};

}  // namespace kestrel
