// Model hyperparameters and tokenizer data as stored in VQF metadata (keys listed in docs/vqf.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/metadata.h"

namespace kestrel {

enum class Architecture { kLlama, kQwen2, kQwen3 };
enum class RopeStyle { kInterleaved, kHalfSplit };  // pairs (2i, 2i+1) vs (i, i + head_dim/2)

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

struct TokenizerData {
  std::string type;  // "llama2c" (scores-based merges) or "bpe" (byte-level BPE, ranked merges)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // llama2c
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // bpe: "left right" by rank
  std::string pre_tokenizer;        // bpe: the split regex family / pattern
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  std::vector<int32_t> eos_ids;  // additional end-of-generation ids (e.g. <|im_end|>)
  std::string chat_template;     // raw template text from the source, may be empty

  void ToMetadata(Metadata* m) const;
  static absl::StatusOr<TokenizerData> FromMetadata(const Metadata& m);
  absl::Status Validate() const;
};

}  // namespace kestrel
