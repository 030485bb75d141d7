// A loaded model: the mapped VQF file, its configuration, tokenizer, resolved weight views and the
// backend that will run it. Immutable after Load, so many sessions (threads) can share one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/registry.h"
#include "format/model_config.h"
#include "format/vqf_reader.h"
#include "tokenizer/tokenizer.h"

namespace kestrel {

struct LayerWeights {
  const float* attn_norm = nullptr;
  MatrixView q, k, v, attn_output;
  const float* q_bias = nullptr;  // qwen2
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* q_norm = nullptr;  // qwen3
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;
  MatrixView gate, up, down;
};

struct ModelOptions {
  std::string backend;  // "" or "auto": best for this CPU
  FileResidence weights = FileResidence::kAuto;  // how the file's bytes are held (format/mapped_file.h)
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Backend& backend() const { return *backend_; }
  const VqfFile& file() const { return *file_; }
  const MatrixView& token_embeddings() const { return token_embeddings_; }
  const MatrixView& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // head_dim/2 RoPE inverse frequencies.
  const std::vector<float>& rope_inv_freq() const { return rope_inv_freq_; }
  double load_seconds() const { return load_seconds_; }
  // Tensors the loader regrouped from the file's q4_0x4 to q4_0x4_lines for the backend (0 unless
  // it wants them and the file's bytes are a copy; format/layout.h).
  int q4_0x4_lines_tensors() const { return q4_0x4_lines_tensors_; }

 private:
  Model() = default;
  absl::Status Resolve();
  // Where the backend reads q4_0x4 faster as q4_0x4_lines and the file's bytes are a private copy,
  // regroups the matrices that fit it, in place, and says so in their views.
  void RegroupQ4_0x4Lines();

  std::unique_ptr<VqfFile> file_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  const Backend* backend_ = nullptr;
  MatrixView token_embeddings_, output_;
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<float> rope_inv_freq_;
  double load_seconds_ = 0;
  int q4_0x4_lines_tensors_ = 0;
};

}  // namespace kestrel
