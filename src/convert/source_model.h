// What every importer (llama2.c, GGUF, Hugging Face, synthetic) produces: a model description and
// tensors that can be read one at a time, so conversion never holds the whole model in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/dtype.h"
#include "format/mapped_file.h"
#include "format/model_config.h"

namespace kestrel::convert {

struct SourceTensor {
  // Canonical VQF name, e.g. "token_embd.weight", "blk.3.attn_q.weight" (see docs/vqf.md).
  std::string name;
  std::vector<int64_t> dims;  // dims[0] = columns (contiguous), dims[1] = rows
  DType source_dtype = DType::kF32;
  // Reads the whole tensor as f32 into `out` (columns * rows floats, row-major).
  std::function<absl::Status(float* out)> read_f32;
  // When set, the tensor's exact bytes in `source_dtype`, plain layout (lets Q8_0/Q4_0 GGUF tensors
  // convert losslessly when the target dtype equals the source dtype).
  const void* raw = nullptr;

  int64_t columns() const { return dims.empty() ? 0 : dims[0]; }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
};

struct SourceModel {
  ModelConfig config;
  TokenizerData tokenizer;
  std::vector<SourceTensor> tensors;  // in file order: embeddings, layers 0..N-1, output norm, output
  std::string description;            // e.g. "llama2.c checkpoint stories260K.bin"
  std::vector<std::shared_ptr<MappedFile>> mappings;  // keep source files mapped while tensors are read
};

// llama2.c checkpoint (legacy version-0 format) and its tokenizer.bin.
absl::StatusOr<SourceModel> LoadLlama2C(const std::string& checkpoint_path, const std::string& tokenizer_path);
// GGUF v2/v3 file with F32/F16/BF16/Q8_0/Q4_0 tensors; architectures llama, qwen2, qwen3.
absl::StatusOr<SourceModel> LoadGguf(const std::string& path);
// Hugging Face model folder: config.json, model.safetensors (or sharded with an index),
// tokenizer.json and tokenizer_config.json; architectures Llama, Qwen2, Qwen3.
absl::StatusOr<SourceModel> LoadHuggingFace(const std::string& folder);
// The tokenizer alone from a Hugging Face tokenizer.json (byte-level BPE) and, unless the second
// path is empty, its tokenizer_config.json (special tokens, add_bos, chat template). The vocabulary
// size is the largest id + 1. Errors name the file: NotFound when unreadable, InvalidArgument when
// malformed, Unimplemented for a valid but unsupported tokenizer.
absl::StatusOr<TokenizerData> LoadHfTokenizer(const std::string& tokenizer_json,
                                              const std::string& tokenizer_config_json_or_empty);
// Seeded random weights in the shapes of a real model: "qwen3-0.6b", "qwen3-1.7b", "llama-1b", "tiny".
absl::StatusOr<SourceModel> MakeSynthetic(const std::string& preset, uint64_t seed);

}  // namespace kestrel::convert
