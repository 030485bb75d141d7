// Model loading: every tensor the architecture needs is looked up, shape-checked and checked
// against what the chosen backend can read, so a session never meets a surprise.
#include "decoder/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kestrel {

namespace {
// A file that parses but lacks what the model needs is a bad file: report it as such, naming it.
absl::Status AsBadFile(const std::string& path, const absl::Status& s) {
  const bool bad = s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kInvalidArgument;
  return absl::Status(bad ? absl::StatusCode::kDataLoss : s.code(), absl::StrCat(path, ": ", s.message()));
}
}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path, const ModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  auto backend = SelectBackend(options.backend);
  if (!backend.ok()) return backend.status();
  auto file = VqfFile::Open(path, options.weights);
  if (!file.ok()) return file.status();
  m->file_ = std::move(*file);
  const bool automatic = options.backend.empty() || options.backend == "auto";
  if (automatic) {
    // The best usable backend that reads every weight format in this file natively.
    const Backend* best = nullptr;
    for (const Backend* b : CompiledBackends()) {
      if (!b->cpu_supports() || (best != nullptr && b->priority <= best->priority)) continue;
      bool reads_all = true;
      for (const TensorInfo& t : m->file_->tensors()) reads_all = reads_all && b->accepts(t.dtype, t.layout);
      if (reads_all) best = b;
    }
    if (best != nullptr) *backend = best;
  }
  m->backend_ = *backend;
  auto config = ModelConfig::FromMetadata(m->file_->metadata());
  if (!config.ok()) return AsBadFile(path, config.status());
  m->config_ = *config;
  auto tok_data = TokenizerData::FromMetadata(m->file_->metadata());
  if (!tok_data.ok()) return AsBadFile(path, tok_data.status());
  auto tokenizer = Tokenizer::Create(*tok_data);
  if (!tokenizer.ok()) return AsBadFile(path, tokenizer.status());
  m->tokenizer_ = std::move(*tokenizer);
  if (m->tokenizer_->vocab_size() > m->config_.vocab_size) {
    return absl::DataLossError(absl::StrCat(path, ": tokenizer has ", m->tokenizer_->vocab_size(),
                                            " tokens but the model's vocabulary is ", m->config_.vocab_size));
  }
  if (auto s = m->Resolve(); !s.ok()) return AsBadFile(path, s);
  if (m->backend_->wants_q4_0x4_lines) m->RegroupQ4_0x4Lines();
  const int half = m->config_.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    m->rope_inv_freq_.push_back(
        1.0f / std::pow(m->config_.rope_theta, static_cast<float>(2 * i) / static_cast<float>(m->config_.head_dim)));
  }
  m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

absl::Status Model::Resolve() {
  const ModelConfig& c = config_;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  auto find = [&](const std::string& name, std::vector<int64_t> dims) -> absl::StatusOr<const TensorInfo*> {
    const TensorInfo* t = file_->Find(name);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("tensor '", name, "' is missing"));
    if (t->dims != dims) {
      auto str = [](const std::vector<int64_t>& d) {
        std::string s;
        for (size_t i = 0; i < d.size(); ++i) absl::StrAppend(&s, i ? "x" : "", d[i]);
        return s;
      };
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ", str(t->dims), ", expected ", str(dims)));
    }
    return t;
  };
  auto vector = [&](const std::string& name, int64_t n, const float** out) -> absl::Status {
    auto t = find(name, {n});
    if (!t.ok()) return t.status();
    if ((*t)->dtype != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' must be f32, found ", DTypeName((*t)->dtype)));
    }
    *out = reinterpret_cast<const float*>((*t)->data);
    return absl::OkStatus();
  };
  auto matrix = [&](const std::string& name, int64_t columns, int64_t rows, MatrixView* out) -> absl::Status {
    auto t = find(name, {columns, rows});
    if (!t.ok()) return t.status();
    if (!backend_->accepts((*t)->dtype, (*t)->layout)) {
      return absl::FailedPreconditionError(absl::StrCat("backend '", backend_->name, "' cannot read tensor '", name, "' (",
                                                        DTypeName((*t)->dtype), ", layout ", LayoutName((*t)->layout), ")"));
    }
    *out = MatrixView{(*t)->dtype, (*t)->layout, (*t)->data, columns, rows};
    return absl::OkStatus();
  };
#define KESTREL_TRY(expr)                  \
  do {                                     \
    if (auto _s = (expr); !_s.ok()) return _s; \
  } while (0)
  KESTREL_TRY(matrix("token_embd.weight", c.dim, c.vocab_size, &token_embeddings_));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights w;
    const std::string p = absl::StrCat("blk.", l, ".");
    KESTREL_TRY(vector(p + "attn_norm.weight", c.dim, &w.attn_norm));
    KESTREL_TRY(matrix(p + "attn_q.weight", c.dim, q_dim, &w.q));
    KESTREL_TRY(matrix(p + "attn_k.weight", c.dim, kv_dim, &w.k));
    KESTREL_TRY(matrix(p + "attn_v.weight", c.dim, kv_dim, &w.v));
    KESTREL_TRY(matrix(p + "attn_output.weight", q_dim, c.dim, &w.attn_output));
    if (c.qkv_bias) {
      KESTREL_TRY(vector(p + "attn_q.bias", q_dim, &w.q_bias));
      KESTREL_TRY(vector(p + "attn_k.bias", kv_dim, &w.k_bias));
      KESTREL_TRY(vector(p + "attn_v.bias", kv_dim, &w.v_bias));
    }
    if (c.qk_norm) {
      KESTREL_TRY(vector(p + "attn_q_norm.weight", c.head_dim, &w.q_norm));
      KESTREL_TRY(vector(p + "attn_k_norm.weight", c.head_dim, &w.k_norm));
    }
    KESTREL_TRY(vector(p + "ffn_norm.weight", c.dim, &w.ffn_norm));
    KESTREL_TRY(matrix(p + "ffn_gate.weight", c.dim, c.ffn_dim, &w.gate));
    KESTREL_TRY(matrix(p + "ffn_up.weight", c.dim, c.ffn_dim, &w.up));
    KESTREL_TRY(matrix(p + "ffn_down.weight", c.ffn_dim, c.dim, &w.down));
    layers_.push_back(w);
  }
  KESTREL_TRY(vector("output_norm.weight", c.dim, &output_norm_));
  if (c.tied_embeddings) {
    output_ = token_embeddings_;
  } else {
    KESTREL_TRY(matrix("output.weight", c.dim, c.vocab_size, &output_));
  }
#undef KESTREL_TRY
  return absl::OkStatus();
}

void Model::RegroupQ4_0x4Lines() {
  std::vector<MatrixView*> views = {&token_embeddings_, &output_};
  for (LayerWeights& l : layers_) {
    for (MatrixView* v : {&l.q, &l.k, &l.v, &l.attn_output, &l.gate, &l.up, &l.down}) views.push_back(v);
  }
  const auto regroups = [](const MatrixView& v) {
    return v.dtype == DType::kQ4_0 && v.layout == Layout::kQ4_0x4 &&
           CheckLayoutFits(DType::kQ4_0, Layout::kQ4_0x4Lines, v.columns, v.rows).ok();
  };
  const uint8_t* const file_bytes = file_->mapping() != nullptr ? file_->mapping()->data() : nullptr;
  std::vector<const void*> done;  // tensors already regrouped: tied embeddings are also the output
  const bool copied = file_->EditCopy([&](uint8_t* bytes) {
    for (const MatrixView* v : views) {
      if (!regroups(*v) || std::find(done.begin(), done.end(), v->data) != done.end()) continue;
      RegroupQ4_0x4ToLines(bytes + (static_cast<const uint8_t*>(v->data) - file_bytes), v->columns, v->rows);
      done.push_back(v->data);
    }
  });
  if (!copied) return;  // a mapped file stays as the file has it
  for (MatrixView* v : views) {
    if (std::find(done.begin(), done.end(), v->data) != done.end()) v->layout = Layout::kQ4_0x4Lines;
  }
  q4_0x4_lines_tensors_ = static_cast<int>(done.size());
}

}  // namespace kestrel
