// Importer for llama2.c checkpoints (legacy version-0 format) and their tokenizer.bin.
// Layout (from llama2.c run.c): 7 int32 header, then f32 arrays: token_embedding, rms_att, wq, wk,
// wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis (skipped), and wcls when vocab_size < 0.
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "convert/source_model.h"

namespace kestrel::convert {
namespace {

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

absl::StatusOr<TokenizerData> LoadLlama2cTokenizer(const std::string& path, int32_t vocab_size) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  const uint8_t* p = (*file)->data();
  const size_t size = (*file)->size();
  size_t pos = 0;
  auto need = [&](size_t n, const char* what) -> absl::Status {
    if (n > size - pos) {
      return absl::DataLossError(absl::StrCat(path, ": truncated tokenizer at byte ", pos, " while reading ", what));
    }
    return absl::OkStatus();
  };
  if (auto s = need(4, "max_token_length"); !s.ok()) return s;
  pos += 4;
  TokenizerData t;
  t.type = "llama2c";
  for (int32_t i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t len = 0;
    if (auto s = need(8, "token score and length"); !s.ok()) return s;
    std::memcpy(&score, p + pos, 4);
    std::memcpy(&len, p + pos + 4, 4);
    pos += 8;
    if (len < 0 || len > 4096) {
      return absl::DataLossError(absl::StrCat(path, ": token ", i, " has an invalid length ", len));
    }
    if (auto s = need(static_cast<size_t>(len), "token bytes"); !s.ok()) return s;
    std::string piece(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    TokenType type = TokenType::kNormal;
    if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') type = TokenType::kByte;
    if (i == 0) type = TokenType::kUnknown;
    if (i == 1 || i == 2) type = TokenType::kControl;
    t.tokens.push_back(std::move(piece));
    t.scores.push_back(score);
    t.token_types.push_back(static_cast<int32_t>(type));
  }
  // llama2.c's conventions: 0 <unk>, 1 BOS, 2 EOS; run.c stops when BOS is produced.
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.add_bos = true;
  t.eos_ids = {1};
  if (auto s = t.Validate(); !s.ok()) return s;
  return t;
}

}  // namespace

absl::StatusOr<SourceModel> LoadLlama2C(const std::string& checkpoint_path, const std::string& tokenizer_path) {
  auto mapped = MappedFile::Open(checkpoint_path);
  if (!mapped.ok()) return mapped.status();
  std::shared_ptr<MappedFile> file(std::move(*mapped));
  if (file->size() < sizeof(Llama2cHeader)) {
    return absl::DataLossError(absl::StrCat(checkpoint_path, ": shorter than the 28-byte llama2.c header"));
  }
  Llama2cHeader h;
  std::memcpy(&h, file->data(), sizeof(h));
  const bool shared_classifier = h.vocab_size > 0;
  const int32_t vocab = shared_classifier ? h.vocab_size : -h.vocab_size;
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || vocab <= 0 ||
      h.seq_len <= 0 || h.dim % h.n_heads != 0 || h.dim > (1 << 16) || h.hidden_dim > (1 << 18) ||
      h.n_layers > 1024 || vocab > (1 << 22) || h.seq_len > (1 << 22)) {
    return absl::InvalidArgumentError(absl::StrCat(checkpoint_path, ": implausible llama2.c header (dim ", h.dim,
                                                   ", hidden ", h.hidden_dim, ", layers ", h.n_layers, ", heads ",
                                                   h.n_heads, "/", h.n_kv_heads, ", vocab ", h.vocab_size, ")"));
  }
  SourceModel m;
  ModelConfig& c = m.config;
  c.architecture = Architecture::kLlama;
  c.name = "llama2.c";
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.ffn_dim = h.hidden_dim;
  c.vocab_size = vocab;
  c.context_length = h.seq_len;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kInterleaved;  // run.c rotates adjacent pairs
  c.norm_eps = 1e-5f;
  c.tied_embeddings = shared_classifier;
  if (auto s = c.Validate(); !s.ok()) return s;

  const int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers;
  const int64_t kv_dim = static_cast<int64_t>(h.n_kv_heads) * c.head_dim;
  const int64_t head_size = c.head_dim;
  uint64_t cursor = sizeof(Llama2cHeader);
  const uint64_t file_size = file->size();
  auto take = [&](int64_t floats, uint64_t* at) -> absl::Status {
    const uint64_t bytes = static_cast<uint64_t>(floats) * 4;
    if (bytes > file_size - cursor) {
      return absl::DataLossError(absl::StrCat(checkpoint_path, ": truncated: needs ", cursor + bytes,
                                              " bytes for the weights, file has ", file_size));
    }
    *at = cursor;
    cursor += bytes;
    return absl::OkStatus();
  };
  auto tensor_at = [&](std::string name, std::vector<int64_t> dims, uint64_t byte_offset) {
    SourceTensor t;
    t.name = std::move(name);
    t.dims = std::move(dims);
    t.source_dtype = DType::kF32;
    const uint8_t* src = file->data() + byte_offset;
    t.raw = src;
    const size_t bytes = static_cast<size_t>(t.columns() * t.rows()) * 4;
    t.read_f32 = [src, bytes, file](float* out) {
      std::memcpy(out, src, bytes);
      return absl::OkStatus();
    };
    return t;
  };
  uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls = 0;
  for (auto [floats, at] : {std::pair{vocab * dim, &emb}, {layers * dim, &rms_att}, {layers * dim * dim, &wq},
                            {layers * kv_dim * dim, &wk}, {layers * kv_dim * dim, &wv}, {layers * dim * dim, &wo},
                            {layers * dim, &rms_ffn}, {layers * hidden * dim, &w1}, {layers * dim * hidden, &w2},
                            {layers * hidden * dim, &w3}, {dim, &rms_final},
                            {static_cast<int64_t>(h.seq_len) * head_size, &freq}}) {
    if (auto s = take(floats, at); !s.ok()) return s;
  }
  if (!shared_classifier) {
    if (auto s = take(vocab * dim, &wcls); !s.ok()) return s;
  }
  m.tensors.push_back(tensor_at("token_embd.weight", {dim, vocab}, emb));
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    m.tensors.push_back(tensor_at(p + "attn_norm.weight", {dim}, rms_att + l * dim * 4));
    m.tensors.push_back(tensor_at(p + "attn_q.weight", {dim, dim}, wq + l * dim * dim * 4));
    m.tensors.push_back(tensor_at(p + "attn_k.weight", {dim, kv_dim}, wk + l * kv_dim * dim * 4));
    m.tensors.push_back(tensor_at(p + "attn_v.weight", {dim, kv_dim}, wv + l * kv_dim * dim * 4));
    m.tensors.push_back(tensor_at(p + "attn_output.weight", {dim, dim}, wo + l * dim * dim * 4));
    m.tensors.push_back(tensor_at(p + "ffn_norm.weight", {dim}, rms_ffn + l * dim * 4));
    m.tensors.push_back(tensor_at(p + "ffn_gate.weight", {dim, hidden}, w1 + l * hidden * dim * 4));
    m.tensors.push_back(tensor_at(p + "ffn_up.weight", {dim, hidden}, w3 + l * hidden * dim * 4));
    m.tensors.push_back(tensor_at(p + "ffn_down.weight", {hidden, dim}, w2 + l * dim * hidden * 4));
  }
  m.tensors.push_back(tensor_at("output_norm.weight", {dim}, rms_final));
  if (!shared_classifier) m.tensors.push_back(tensor_at("output.weight", {dim, vocab}, wcls));

  auto tok = LoadLlama2cTokenizer(tokenizer_path, vocab);
  if (!tok.ok()) return tok.status();
  m.tokenizer = std::move(*tok);
  m.description = absl::StrCat("llama2.c checkpoint ", checkpoint_path);
  m.mappings.push_back(file);
  return m;
}

}  // namespace kestrel::convert
