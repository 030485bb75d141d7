// Mapping between ModelConfig / TokenizerData and metadata keys, with validation.
#include "format/model_config.h"

#include "absl/strings/str_cat.h"

namespace kestrel {

std::string ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kQwen2: return "qwen2";
    case Architecture::kQwen3: return "qwen3";
  }
  return "unknown";
}

absl::StatusOr<Architecture> ArchitectureFromName(const std::string& name) {
  if (name == "llama") return Architecture::kLlama;
  if (name == "qwen2") return Architecture::kQwen2;
  if (name == "qwen3") return Architecture::kQwen3;
  return absl::UnimplementedError(absl::StrCat("unsupported architecture '", name, "' (supported: llama, qwen2, qwen3)"));
}

std::string RopeStyleName(RopeStyle s) { return s == RopeStyle::kInterleaved ? "interleaved" : "half_split"; }

void ModelConfig::ToMetadata(Metadata* m) const {
  m->Set("general.architecture", ArchitectureName(architecture));
  m->Set("general.name", name);
  m->Set("model.dim", static_cast<uint32_t>(dim));
  m->Set("model.n_layers", static_cast<uint32_t>(n_layers));
  m->Set("model.n_heads", static_cast<uint32_t>(n_heads));
  m->Set("model.n_kv_heads", static_cast<uint32_t>(n_kv_heads));
  m->Set("model.head_dim", static_cast<uint32_t>(head_dim));
  m->Set("model.ffn_dim", static_cast<uint32_t>(ffn_dim));
  m->Set("model.vocab_size", static_cast<uint32_t>(vocab_size));
  m->Set("model.context_length", static_cast<uint32_t>(context_length));
  m->Set("model.rope_theta", rope_theta);
  m->Set("model.rope_style", RopeStyleName(rope_style));
  m->Set("model.norm_eps", norm_eps);
  m->Set("model.tied_embeddings", tied_embeddings);
  m->Set("model.qk_norm", qk_norm);
  m->Set("model.qkv_bias", qkv_bias);
}

absl::StatusOr<ModelConfig> ModelConfig::FromMetadata(const Metadata& m) {
  ModelConfig c;
  auto arch = m.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  auto a = ArchitectureFromName(*arch);
  if (!a.ok()) return a.status();
  c.architecture = *a;
  if (auto n = m.GetString("general.name"); n.ok()) c.name = *n;
  struct IntField { const char* key; int32_t* out; };
  for (IntField f : {IntField{"model.dim", &c.dim}, {"model.n_layers", &c.n_layers}, {"model.n_heads", &c.n_heads},
                     {"model.n_kv_heads", &c.n_kv_heads}, {"model.head_dim", &c.head_dim},
                     {"model.ffn_dim", &c.ffn_dim}, {"model.vocab_size", &c.vocab_size},
                     {"model.context_length", &c.context_length}}) {
    auto v = m.GetU32(f.key);
    if (!v.ok()) return v.status();
    if (*v > (1u << 30)) return absl::InvalidArgumentError(absl::StrCat("metadata '", f.key, "' = ", *v, " is out of range"));
    *f.out = static_cast<int32_t>(*v);
  }
  auto theta = m.GetF32("model.rope_theta");
  auto eps = m.GetF32("model.norm_eps");
  auto style = m.GetString("model.rope_style");
  auto tied = m.GetBool("model.tied_embeddings");
  auto qk = m.GetBool("model.qk_norm");
  auto bias = m.GetBool("model.qkv_bias");
  for (const absl::Status& s : {theta.status(), eps.status(), style.status(), tied.status(), qk.status(), bias.status()}) {
    if (!s.ok()) return s;
  }
  c.rope_theta = *theta;
  c.norm_eps = *eps;
  if (*style == "interleaved") c.rope_style = RopeStyle::kInterleaved;
  else if (*style == "half_split") c.rope_style = RopeStyle::kHalfSplit;
  else return absl::InvalidArgumentError(absl::StrCat("unknown rope style '", *style, "'"));
  c.tied_embeddings = *tied;
  c.qk_norm = *qk;
  c.qkv_bias = *bias;
  if (auto s = c.Validate(); !s.ok()) return s;
  return c;
}

absl::Status ModelConfig::Validate() const {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("model config: ", what)); };
  if (dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || ffn_dim <= 0 ||
      vocab_size <= 0 || context_length <= 0) {
    return bad("every dimension must be positive");
  }
  if (n_heads % n_kv_heads != 0) return bad(absl::StrCat("n_heads ", n_heads, " is not a multiple of n_kv_heads ", n_kv_heads));
  if (head_dim % 2 != 0) return bad(absl::StrCat("head_dim ", head_dim, " must be even for RoPE"));
  if (!(rope_theta > 0.0f) || !(norm_eps > 0.0f)) return bad("rope_theta and norm_eps must be positive");
  return absl::OkStatus();
}

void TokenizerData::ToMetadata(Metadata* m) const {
  m->Set("tokenizer.type", type);
  m->Set("tokenizer.tokens", tokens);
  if (!scores.empty()) m->Set("tokenizer.scores", scores);
  m->Set("tokenizer.token_types", token_types);
  if (!merges.empty()) m->Set("tokenizer.merges", merges);
  if (!pre_tokenizer.empty()) m->Set("tokenizer.pre", pre_tokenizer);
  if (!normalizer.empty()) m->Set("tokenizer.normalizer", normalizer);
  if (ignore_merges) m->Set("tokenizer.ignore_merges", ignore_merges);
  if (!added_ids.empty()) {
    m->Set("tokenizer.added_ids", added_ids);
    m->Set("tokenizer.added_flags", added_flags);
  }
  m->Set("tokenizer.bos_id", bos_id);
  m->Set("tokenizer.eos_id", eos_id);
  m->Set("tokenizer.unk_id", unk_id);
  m->Set("tokenizer.pad_id", pad_id);
  m->Set("tokenizer.add_bos", add_bos);
  m->Set("tokenizer.eos_ids", eos_ids);
  if (!chat_template.empty()) m->Set("chat.template", chat_template);
}

absl::StatusOr<TokenizerData> TokenizerData::FromMetadata(const Metadata& m) {
  TokenizerData t;
  auto type = m.GetString("tokenizer.type");
  auto tokens = m.GetStringArray("tokenizer.tokens");
  auto types = m.GetI32Array("tokenizer.token_types");
  if (!type.ok()) return type.status();
  if (!tokens.ok()) return tokens.status();
  if (!types.ok()) return types.status();
  t.type = *type;
  t.tokens = **tokens;
  t.token_types = **types;
  if (auto s = m.GetF32Array("tokenizer.scores"); s.ok()) t.scores = **s;
  if (auto s = m.GetStringArray("tokenizer.merges"); s.ok()) t.merges = **s;
  if (auto s = m.GetString("tokenizer.pre"); s.ok()) t.pre_tokenizer = *s;
  if (auto s = m.GetString("tokenizer.normalizer"); s.ok()) t.normalizer = *s;
  if (auto s = m.GetBool("tokenizer.ignore_merges"); s.ok()) t.ignore_merges = *s;
  if (auto s = m.GetI32Array("tokenizer.added_ids"); s.ok()) t.added_ids = **s;
  if (auto s = m.GetI32Array("tokenizer.added_flags"); s.ok()) t.added_flags = **s;
  if (auto s = m.GetString("chat.template"); s.ok()) t.chat_template = *s;
  if (auto s = m.GetI32Array("tokenizer.eos_ids"); s.ok()) t.eos_ids = **s;
  for (auto [key, out] : {std::pair{"tokenizer.bos_id", &t.bos_id}, {"tokenizer.eos_id", &t.eos_id},
                          {"tokenizer.unk_id", &t.unk_id}, {"tokenizer.pad_id", &t.pad_id}}) {
    auto v = m.GetI32(key);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  auto add_bos = m.GetBool("tokenizer.add_bos");
  if (!add_bos.ok()) return add_bos.status();
  t.add_bos = *add_bos;
  if (auto s = t.Validate(); !s.ok()) return s;
  return t;
}

absl::Status TokenizerData::Validate() const {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", what)); };
  if (type != "llama2c" && type != "bpe") return bad(absl::StrCat("unknown tokenizer type '", type, "'"));
  if (tokens.empty()) return bad("empty vocabulary");
  const auto n = static_cast<int32_t>(tokens.size());
  if (token_types.size() != tokens.size()) return bad("token_types and tokens differ in length");
  if (type == "llama2c" && scores.size() != tokens.size()) return bad("scores and tokens differ in length");
  for (int32_t id : {bos_id, eos_id, unk_id, pad_id}) {
    if (id < -1 || id >= n) return bad(absl::StrCat("special token id ", id, " is outside the vocabulary of ", n));
  }
  for (int32_t id : eos_ids) {
    if (id < 0 || id >= n) return bad(absl::StrCat("end-of-generation id ", id, " is outside the vocabulary of ", n));
  }
  if (added_ids.size() != added_flags.size()) return bad("added_ids and added_flags differ in length");
  for (int32_t id : added_ids) {
    if (id < 0 || id >= n) return bad(absl::StrCat("added token id ", id, " is outside the vocabulary of ", n));
    if (tokens[id].empty()) return bad(absl::StrCat("added token id ", id, " has empty text"));
  }
  if (!normalizer.empty() && normalizer != "NFC" && normalizer != "NFD" && normalizer != "NFKC" &&
      normalizer != "NFKD") {
    return bad(absl::StrCat("unknown normalizer '", normalizer, "' (known: NFC, NFD, NFKC, NFKD)"));
  }
  return absl::OkStatus();
}

}  // namespace kestrel
