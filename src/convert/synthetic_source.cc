// Seeded random-weight models in the shapes of real ones, for benchmarks at realistic sizes.
// Speed does not depend on weight values; the values are scaled like a trained model's so that
// activations stay finite through many layers.
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "convert/source_model.h"
#include "platform/uniform_float.h"

namespace kestrel::convert {
namespace {

struct Preset {
  const char* name;
  Architecture arch;
  int32_t dim, layers, heads, kv_heads, head_dim, ffn, vocab, context;
  float theta;
  bool tied;
};

constexpr Preset kPresets[] = {
    {"qwen3-0.6b", Architecture::kQwen3, 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, true},
    {"qwen3-1.7b", Architecture::kQwen3, 2048, 28, 16, 8, 128, 6144, 151936, 40960, 1000000.0f, true},
    {"llama-1b", Architecture::kLlama, 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.0f, true},
    {"tiny", Architecture::kQwen3, 128, 2, 4, 2, 32, 256, 512, 256, 1000000.0f, false},
    // Every matrix's rows a whole number of 8-block runs (q4_0x4_lines), tied embeddings.
    {"tiny-wide", Architecture::kQwen3, 256, 2, 8, 4, 32, 512, 512, 256, 1000000.0f, true},
};

// Deterministic per tensor: the seed and the tensor index define the values, so tensors can be
// generated one at a time in any order.
SourceTensor RandomTensor(std::string name, std::vector<int64_t> dims, uint64_t seed, uint64_t index, float scale,
                          float offset) {
  SourceTensor t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.source_dtype = DType::kF32;
  const size_t count = static_cast<size_t>(t.columns() * t.rows());
  t.read_f32 = [=](float* out) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
    UniformFloat dist(-1.0f, 1.0f);
    for (size_t i = 0; i < count; ++i) out[i] = offset + scale * dist(rng);
    return absl::OkStatus();
  };
  return t;
}

TokenizerData SyntheticTokenizer(int32_t vocab) {
  // A byte-level vocabulary: 256 byte tokens, then filler tokens. Enough for kestrel-run to print.
  TokenizerData t;
  t.type = "llama2c";
  for (int32_t i = 0; i < vocab; ++i) {
    if (i == 0) {
      t.tokens.push_back("<unk>");
      t.token_types.push_back(static_cast<int32_t>(TokenType::kUnknown));
    } else if (i == 1 || i == 2) {
      t.tokens.push_back(i == 1 ? "<s>" : "</s>");
      t.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
    } else if (i < 3 + 256) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", i - 3);
      t.tokens.push_back(buf);
      t.token_types.push_back(static_cast<int32_t>(TokenType::kByte));
    } else {
      t.tokens.push_back(absl::StrCat("<t", i, ">"));
      t.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
    }
    t.scores.push_back(i < 259 ? 0.0f : -static_cast<float>(i));
  }
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.add_bos = true;
  t.eos_ids = {2};
  return t;
}

}  // namespace

absl::StatusOr<SourceModel> MakeSynthetic(const std::string& preset, uint64_t seed) {
  const Preset* p = nullptr;
  for (const Preset& candidate : kPresets) {
    if (preset == candidate.name) p = &candidate;
  }
  if (p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown synthetic preset '", preset,
                                                   "' (known: qwen3-0.6b, qwen3-1.7b, llama-1b, tiny, tiny-wide)"));
  }
  SourceModel m;
  ModelConfig& c = m.config;
  c.architecture = p->arch;
  c.name = absl::StrCat("synthetic-", p->name);
  c.dim = p->dim;
  c.n_layers = p->layers;
  c.n_heads = p->heads;
  c.n_kv_heads = p->kv_heads;
  c.head_dim = p->head_dim;
  c.ffn_dim = p->ffn;
  c.vocab_size = p->vocab;
  c.context_length = p->context;
  c.rope_theta = p->theta;
  c.rope_style = RopeStyle::kHalfSplit;
  c.norm_eps = 1e-6f;
  c.tied_embeddings = p->tied;
  c.qk_norm = p->arch == Architecture::kQwen3;
  c.qkv_bias = p->arch == Architecture::kQwen2;
  const int64_t dim = c.dim, q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  uint64_t index = 0;
  auto add = [&](std::string name, std::vector<int64_t> dims, float offset = 0.0f) {
    // Uniform(-a, a) with a = sqrt(3 / fan_in) keeps unit variance through each product.
    const float scale = dims.size() == 1 ? 0.1f : std::sqrt(3.0f / static_cast<float>(dims[0]));
    m.tensors.push_back(RandomTensor(std::move(name), std::move(dims), seed, index++, scale, offset));
  };
  add("token_embd.weight", {dim, c.vocab_size});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    add(b + "attn_norm.weight", {dim}, 1.0f);
    add(b + "attn_q.weight", {dim, q_dim});
    add(b + "attn_k.weight", {dim, kv_dim});
    add(b + "attn_v.weight", {dim, kv_dim});
    if (c.qkv_bias) {
      add(b + "attn_q.bias", {q_dim});
      add(b + "attn_k.bias", {kv_dim});
      add(b + "attn_v.bias", {kv_dim});
    }
    if (c.qk_norm) {
      add(b + "attn_q_norm.weight", {c.head_dim}, 1.0f);
      add(b + "attn_k_norm.weight", {c.head_dim}, 1.0f);
    }
    add(b + "attn_output.weight", {q_dim, dim});
    add(b + "ffn_norm.weight", {dim}, 1.0f);
    add(b + "ffn_gate.weight", {dim, c.ffn_dim});
    add(b + "ffn_up.weight", {dim, c.ffn_dim});
    add(b + "ffn_down.weight", {c.ffn_dim, dim});
  }
  add("output_norm.weight", {dim}, 1.0f);
  if (!c.tied_embeddings) add("output.weight", {dim, c.vocab_size});
  m.tokenizer = SyntheticTokenizer(c.vocab_size);
  m.description = absl::StrCat("synthetic ", p->name, " (seed ", seed, ")");
  return m;
}

}  // namespace kestrel::convert
