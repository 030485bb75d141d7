// Model hyperparameters and tokenizer data as stored in VQF metadata (keys listed in docs/vqf.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/metadata.h"
#include "format/model_types.h"

namespace kestrel {


struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string name;
  int32_t dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kHalfSplit;
  float norm_eps = 1e-5f;
  bool tied_embeddings = false;
  bool qk_norm = false;   // Qwen3
  bool qkv_bias = false;  // Qwen2

  void ToMetadata(Metadata* m) const;
  static absl::StatusOr<ModelConfig> FromMetadata(const Metadata& m);
  absl::Status Validate() const;
};

std::string ArchitectureName(Architecture a);
absl::StatusOr<Architecture> ArchitectureFromName(const std::string& name);
std::string RopeStyleName(RopeStyle s);

// Token kinds stored in tokenizer.token_types.
enum class TokenType : int32_t { kNormal = 0, kByte = 1, kControl = 2, kUserDefined = 3, kUnknown = 4 };

// Bits of TokenizerData::added_flags, as Hugging Face's AddedToken fields.
enum AddedTokenFlags : int32_t {
  kAddedSpecial = 1 << 0,     // special: not recognised when the caller asks to split special tokens
  kAddedLstrip = 1 << 1,      // swallows the whitespace on its left
  kAddedRstrip = 1 << 2,      // swallows the whitespace on its right
  kAddedSingleWord = 1 << 3,  // matches only when not inside a word
  kAddedNormalized = 1 << 4,  // matched in the normalized text rather than the raw text
};

struct TokenizerData {
  std::string type;  // "llama2c" (scores-based merges) or "bpe" (byte-level BPE, ranked merges)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // llama2c
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // bpe: "left right" by rank
  std::string pre_tokenizer;        // bpe: the split regex pattern, or a known name ("qwen2", "llama-bpe")
  std::string normalizer;           // bpe: "" (none), "NFC", "NFD", "NFKC" or "NFKD"
  bool ignore_merges = false;       // bpe: a pre-token found whole in the vocabulary is not merged
  // bpe: the added tokens (matched in text before pre-tokenization) and their AddedTokenFlags.
  // When both are empty, every kControl / kUserDefined token is an added token with no flags.
  std::vector<int32_t> added_ids;
  std::vector<int32_t> added_flags;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  std::vector<int32_t> eos_ids;  // additional end-of-generation ids (e.g. <|im_end|>)
  std::string chat_template;     // raw template text from the source, may be empty

  void ToMetadata(Metadata* m) const;
  static absl::StatusOr<TokenizerData> FromMetadata(const Metadata& m);
  absl::Status Validate() const;
};

}  // namespace kestrel
