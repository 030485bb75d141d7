// Hugging Face importer: config.json, model.safetensors (or shards listed in
// model.safetensors.index.json), tokenizer.json and tokenizer_config.json, for Llama, Qwen2 and
// Qwen3. Tensors are renamed to the canonical VQF names and read from the mapped shards.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "format/dtype.h"
#include "format/model_config.h"

namespace kestrel::convert {
namespace {

using nlohmann::json;

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Reads and parses a JSON file; errors name the file.
absl::StatusOr<json> ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) absl::StrAppend(&out, d ? ", " : "", shape[d]);
  return out + "]";
}

// config.json accessors: a missing key falls back when a default exists; null counts as missing.
class ConfigReader {
 public:
  ConfigReader(const std::string& file, const json& j) : file_(file), j_(j) {}

  absl::Status Bad(const std::string& what) const { return absl::InvalidArgumentError(absl::StrCat(file_, ": ", what)); }

  const json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::StatusOr<int32_t> Dimension(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return static_cast<int32_t>(*fallback);
      return Bad(absl::StrCat("missing '", key, "'"));
    }
    if (!v->is_number_integer()) return Bad(absl::StrCat("'", key, "' is not an integer"));
    const int64_t x = v->get<int64_t>();
    if (x < 1 || x > (1 << 30)) return Bad(absl::StrCat("'", key, "' = ", x, " is out of range"));
    return static_cast<int32_t>(x);
  }

  absl::StatusOr<double> Number(const char* key, std::optional<double> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Bad(absl::StrCat("missing '", key, "'"));
    }
    if (!v->is_number()) return Bad(absl::StrCat("'", key, "' is not a number"));
    return v->get<double>();
  }

  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Bad(absl::StrCat("'", key, "' is not a boolean"));
    return v->get<bool>();
  }

 private:
  const std::string& file_;
  const json& j_;
};

absl::StatusOr<ModelConfig> ParseConfig(const std::string& file, const json& j, std::string* warnings) {
  ConfigReader r(file, j);
  if (!j.is_object()) return r.Bad("not a JSON object");
  ModelConfig c;
  const json* archs = r.Find("architectures");
  if (archs == nullptr || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return r.Bad("missing 'architectures' (expected e.g. [\"Qwen3ForCausalLM\"])");
  }
  const std::string arch = (*archs)[0].get<std::string>();
  if (arch == "LlamaForCausalLM") {
    c.architecture = Architecture::kLlama;
  } else if (arch == "Qwen2ForCausalLM") {
    c.architecture = Architecture::kQwen2;
  } else if (arch == "Qwen3ForCausalLM") {
    c.architecture = Architecture::kQwen3;
  } else {
    return absl::UnimplementedError(absl::StrCat(file, ": unsupported architecture '", arch,
                                                 "' (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)"));
  }
  auto dim = r.Dimension("hidden_size");
  auto layers = r.Dimension("num_hidden_layers");
  auto heads = r.Dimension("num_attention_heads");
  auto ffn = r.Dimension("intermediate_size");
  auto vocab = r.Dimension("vocab_size");
  auto context = r.Dimension("max_position_embeddings");
  for (const absl::Status& s : {dim.status(), layers.status(), heads.status(), ffn.status(), vocab.status(),
                                context.status()}) {
    if (!s.ok()) return s;
  }
  auto kv_heads = r.Dimension("num_key_value_heads", *heads);
  auto head_dim = r.Dimension("head_dim", *dim / *heads > 0 ? *dim / *heads : 1);
  auto theta = r.Number("rope_theta", 10000.0);
  auto eps = r.Number("rms_norm_eps");
  auto tied = r.Bool("tie_word_embeddings", false);
  for (const absl::Status& s : {kv_heads.status(), head_dim.status(), theta.status(), eps.status(), tied.status()}) {
    if (!s.ok()) return s;
  }
  c.dim = *dim;
  c.n_layers = *layers;
  c.n_heads = *heads;
  c.n_kv_heads = *kv_heads;
  c.head_dim = *head_dim;
  c.ffn_dim = *ffn;
  c.vocab_size = *vocab;
  c.context_length = *context;
  c.rope_theta = static_cast<float>(*theta);
  c.norm_eps = static_cast<float>(*eps);
  c.tied_embeddings = *tied;
  c.rope_style = RopeStyle::kHalfSplit;  // HF checkpoints keep Q/K unpermuted: rotate (i, i + head_dim/2)
  c.qkv_bias = c.architecture == Architecture::kQwen2;
  c.qk_norm = c.architecture == Architecture::kQwen3;
  if (const json* scaling = r.Find("rope_scaling"); scaling != nullptr) {
    absl::StrAppend(warnings, "; rope_scaling ignored");
  }
  if (absl::Status s = c.Validate(); !s.ok()) return r.Bad(std::string(s.message()));
  return c;
}

// The shards of a checkpoint, opened once each, and where every tensor lives.
struct Weights {
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::map<std::string, std::pair<const SafetensorsTensor*, const SafetensorsFile*>> by_name;
};

absl::StatusOr<Weights> OpenWeights(const std::string& folder) {
  Weights w;
  const std::string single = folder + "/model.safetensors";
  const std::string index_path = folder + "/model.safetensors.index.json";
  std::vector<std::string> shard_names;
  if (FileExists(index_path)) {
    auto index = ReadJson(index_path);
    if (!index.ok()) return index.status();
    const auto map = index->find("weight_map");
    if (!index->is_object() || map == index->end() || !map->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing object 'weight_map'"));
    }
    for (const auto& [tensor, shard] : map->items()) {
      if (!shard.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": shard of '", tensor, "' is not a string"));
      }
      const std::string name = shard.get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos || name == "..") {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": shard name '", name, "' must be a plain file name"));
      }
      bool seen = false;
      for (const std::string& s : shard_names) seen = seen || s == name;
      if (!seen) shard_names.push_back(name);
    }
    if (shard_names.empty()) return absl::InvalidArgumentError(absl::StrCat(index_path, ": 'weight_map' is empty"));
  } else if (FileExists(single)) {
    shard_names.push_back("model.safetensors");
  } else {
    return absl::NotFoundError(
        absl::StrCat(folder, ": no model.safetensors or model.safetensors.index.json (only safetensors weights are supported)"));
  }
  for (const std::string& name : shard_names) {
    auto shard = SafetensorsFile::Open(folder + "/" + name);
    if (!shard.ok()) return shard.status();
    for (const SafetensorsTensor& t : (*shard)->tensors()) {
      if (!w.by_name.emplace(t.name, std::pair{&t, shard->get()}).second) {
        return absl::InvalidArgumentError(absl::StrCat(folder, ": tensor '", t.name, "' appears in more than one shard"));
      }
    }
    w.shards.push_back(std::move(*shard));
  }
  return w;
}

struct Expected {
  std::string canonical;
  std::string hf;
  std::vector<int64_t> dims;  // ours: {in, out}
};

std::vector<Expected> ExpectedTensors(const ModelConfig& c) {
  const int64_t dim = c.dim, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t ffn = c.ffn_dim, vocab = c.vocab_size, hd = c.head_dim;
  std::vector<Expected> e;
  e.push_back({"token_embd.weight", "model.embed_tokens.weight", {dim, vocab}});
  for (int layer = 0; layer < c.n_layers; ++layer) {
    const std::string b = absl::StrCat("blk.", layer, ".");
    const std::string h = absl::StrCat("model.layers.", layer, ".");
    e.push_back({b + "attn_norm.weight", h + "input_layernorm.weight", {dim}});
    e.push_back({b + "attn_q.weight", h + "self_attn.q_proj.weight", {dim, q}});
    e.push_back({b + "attn_k.weight", h + "self_attn.k_proj.weight", {dim, kv}});
    e.push_back({b + "attn_v.weight", h + "self_attn.v_proj.weight", {dim, kv}});
    if (c.qkv_bias) {
      e.push_back({b + "attn_q.bias", h + "self_attn.q_proj.bias", {q}});
      e.push_back({b + "attn_k.bias", h + "self_attn.k_proj.bias", {kv}});
      e.push_back({b + "attn_v.bias", h + "self_attn.v_proj.bias", {kv}});
    }
    if (c.qk_norm) {
      e.push_back({b + "attn_q_norm.weight", h + "self_attn.q_norm.weight", {hd}});
      e.push_back({b + "attn_k_norm.weight", h + "self_attn.k_norm.weight", {hd}});
    }
    e.push_back({b + "attn_output.weight", h + "self_attn.o_proj.weight", {q, dim}});
    e.push_back({b + "ffn_norm.weight", h + "post_attention_layernorm.weight", {dim}});
    e.push_back({b + "ffn_gate.weight", h + "mlp.gate_proj.weight", {dim, ffn}});
    e.push_back({b + "ffn_up.weight", h + "mlp.up_proj.weight", {dim, ffn}});
    e.push_back({b + "ffn_down.weight", h + "mlp.down_proj.weight", {ffn, dim}});
  }
  e.push_back({"output_norm.weight", "model.norm.weight", {dim}});
  if (!c.tied_embeddings) e.push_back({"output.weight", "lm_head.weight", {dim, vocab}});
  return e;
}

absl::Status BuildTensors(const std::string& folder, const Weights& weights, SourceModel* model) {
  for (const Expected& e : ExpectedTensors(model->config)) {
    auto it = weights.by_name.find(e.hf);
    if (it == weights.by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(folder, ": missing tensor '", e.hf, "' (for ", e.canonical, ")"));
    }
    const SafetensorsTensor& t = *it->second.first;
    // HF stores [out, in]; ours is {in, out}.
    const std::vector<int64_t> hf_shape(e.dims.rbegin(), e.dims.rend());
    if (t.shape != hf_shape) {
      return absl::InvalidArgumentError(absl::StrCat(folder, ": tensor '", e.hf, "' has shape ", ShapeString(t.shape),
                                                     ", expected ", ShapeString(hf_shape)));
    }
    if (!t.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(folder, ": tensor '", e.hf, "' has unsupported dtype ",
                                                     t.dtype_name, "; supported: F32, F16, BF16"));
    }
    SourceTensor s;
    s.name = e.canonical;
    s.dims = e.dims;
    s.source_dtype = *t.dtype;
    // Plain row-major bytes in the source dtype; offered only when aligned for typed reads.
    if (reinterpret_cast<uintptr_t>(t.data) % DTypeBlockBytes(*t.dtype) == 0) s.raw = t.data;
    // The reader owns a copy of the tensor's description and shares the mapping its bytes live in,
    // so it stays valid after the SafetensorsFile objects are gone.
    s.read_f32 = [tensor = t, keep = it->second.second->mapping()](float* out) {
      return ReadSafetensorAsF32(tensor, out);
    };
    model->tensors.push_back(std::move(s));
  }
  for (const auto& shard : weights.shards) model->mappings.push_back(shard->mapping());
  return absl::OkStatus();
}

// The Split regex inside a pre_tokenizer (searching Sequences), else the pre_tokenizer's type name.
std::optional<std::string> FindSplitPattern(const json& p) {
  if (!p.is_object()) return std::nullopt;
  const auto type = p.find("type");
  if (type != p.end() && *type == "Split") {
    const auto pattern = p.find("pattern");
    if (pattern != p.end() && pattern->is_object()) {
      for (const char* key : {"Regex", "String"}) {
        const auto v = pattern->find(key);
        if (v != pattern->end() && v->is_string()) return v->get<std::string>();
      }
    }
  }
  const auto children = p.find("pretokenizers");
  if (children != p.end() && children->is_array()) {
    for (const json& child : *children) {
      if (auto found = FindSplitPattern(child)) return found;
    }
  }
  return std::nullopt;
}

// Whether the post_processor (a TemplateProcessing, possibly inside a Sequence) starts every single
// sequence with `bos`: how tokenizer.json files such as Llama 3's add BOS when the config is silent.
bool PostProcessorAddsBos(const json& p, const std::string& bos) {
  if (!p.is_object()) return false;
  const auto type = p.find("type");
  if (type != p.end() && *type == "TemplateProcessing") {
    const auto single = p.find("single");
    if (single == p.end() || !single->is_array() || single->empty()) return false;
    const json& first = (*single)[0];
    const auto special = first.find("SpecialToken");
    if (!first.is_object() || special == first.end() || !special->is_object()) return false;
    const auto id = special->find("id");
    return id != special->end() && id->is_string() && id->get<std::string>() == bos;
  }
  const auto children = p.find("processors");
  if (children != p.end() && children->is_array()) {
    for (const json& child : *children) {
      if (PostProcessorAddsBos(child, bos)) return true;
    }
  }
  return false;
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null/absent.
absl::StatusOr<std::optional<std::string>> TokenText(const std::string& file, const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return std::optional<std::string>(content->get<std::string>());
  }
  return absl::InvalidArgumentError(absl::StrCat(file, ": '", key, "' is neither a string nor {\"content\": ...}"));
}

// The normalizer as TokenizerData stores it: "" for none, else one Unicode normal form.
absl::StatusOr<std::string> NormalizerName(const std::string& file, const json& n) {
  if (n.is_null()) return std::string();
  const auto type = n.find("type");
  if (n.is_object() && type != n.end() && type->is_string()) {
    const std::string t = type->get<std::string>();
    if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") return t;
    const auto children = n.find("normalizers");
    if (t == "Sequence" && children != n.end() && children->is_array() && children->size() <= 1) {
      return children->empty() ? std::string() : NormalizerName(file, (*children)[0]);
    }
  }
  return absl::UnimplementedError(
      absl::StrCat(file, ": normalizer ", n.dump(), " is not supported (only none, NFC, NFD, NFKC, NFKD)"));
}

// Whether a pre_tokenizer (or one inside a Sequence) is ByteLevel with add_prefix_space set.
bool AddsPrefixSpace(const json& p) {
  if (!p.is_object()) return false;
  if (p.value("type", "") == "ByteLevel" && p.value("add_prefix_space", false)) return true;
  const auto children = p.find("pretokenizers");
  if (children != p.end() && children->is_array()) {
    for (const json& child : *children) {
      if (AddsPrefixSpace(child)) return true;
    }
  }
  return false;
}

// Reads tokenizer.json at `path` (and tokenizer_config.json at `config_path` unless empty) into
// `tok`. vocab_size < 0 takes the vocabulary size from the largest id in the file.
absl::Status ReadTokenizerFiles(const std::string& path, const std::string& config_path, int64_t vocab_size,
                                TokenizerData* out) {
  auto j = ReadJson(path);
  if (!j.ok()) return j.status();
  auto bad = [&](const std::string& file, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
  };
  TokenizerData& tok = *out;
  tok.type = "bpe";
  const auto m = j->find("model");
  if (!j->is_object() || m == j->end() || !m->is_object()) return bad(path, "missing object 'model'");
  const auto type = m->find("type");
  if (type != m->end() && !(type->is_string() && *type == "BPE")) {
    return bad(path, absl::StrCat("tokenizer model type ", type->dump(), " is not supported (only byte-level BPE)"));
  }
  const auto byte_fallback = m->find("byte_fallback");
  if (byte_fallback != m->end() && byte_fallback->is_boolean() && byte_fallback->get<bool>()) {
    return bad(path, "SentencePiece-style BPE (byte_fallback) is not supported; only byte-level BPE");
  }
  const auto vocab = m->find("vocab");
  if (vocab == m->end() || !vocab->is_object()) return bad(path, "missing object 'model.vocab'");
  const auto added = j->find("added_tokens");
  const bool has_added = added != j->end() && added->is_array();
  if (vocab_size < 0) {
    // Without a model config, the largest id sets the size (bounded, so a corrupt id cannot
    // demand a huge allocation).
    constexpr int64_t kMaxVocab = int64_t{1} << 24;
    int64_t max_id = -1;
    auto see = [&](const json& id) {
      if (id.is_number_integer()) max_id = std::max(max_id, id.get<int64_t>());
    };
    for (const auto& item : vocab->items()) see(item.value());
    if (has_added) {
      for (const json& a : *added) {
        if (a.is_object() && a.contains("id")) see(a["id"]);
      }
    }
    if (max_id >= kMaxVocab) return bad(path, absl::StrCat("token id ", max_id, " is implausibly large"));
    vocab_size = max_id + 1;
  }

  // Ids are checked against the model's vocab_size before use, which also bounds the allocation.
  std::map<std::string, int32_t> ids;
  tok.tokens.assign(static_cast<size_t>(vocab_size), "");
  tok.token_types.assign(static_cast<size_t>(vocab_size), static_cast<int32_t>(TokenType::kUnknown));
  int64_t max_id = -1;
  auto place = [&](const std::string& text, const json& id_json, TokenType kind) -> absl::Status {
    if (!id_json.is_number_integer()) return bad(path, absl::StrCat("token '", text, "' has a non-integer id"));
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= vocab_size) {
      return bad(path, absl::StrCat("token '", text, "' has id ", id, " outside the model's vocab_size ", vocab_size));
    }
    tok.tokens[id] = text;
    tok.token_types[id] = static_cast<int32_t>(kind);
    ids[text] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
    return absl::OkStatus();
  };
  for (const auto& [text, id] : vocab->items()) {
    if (auto s = place(text, id, TokenType::kNormal); !s.ok()) return s;
  }
  if (has_added) {
    for (const json& a : *added) {
      const auto content = a.is_object() ? a.find("content") : a.end();
      const auto id = a.is_object() ? a.find("id") : a.end();
      if (!a.is_object() || content == a.end() || !content->is_string() || id == a.end()) {
        return bad(path, "an added_tokens entry lacks 'id' or 'content'");
      }
      if (content->get_ref<const std::string&>().empty()) return bad(path, "an added token has empty content");
      auto flag = [&](const char* key, bool fallback) {
        const auto v = a.find(key);
        return v != a.end() && v->is_boolean() ? v->get<bool>() : fallback;
      };
      const bool is_special = flag("special", false);
      if (auto s = place(content->get<std::string>(), *id, is_special ? TokenType::kControl : TokenType::kUserDefined);
          !s.ok()) {
        return s;
      }
      // Hugging Face's defaults: normalized unless special.
      const int32_t flags = (is_special ? kAddedSpecial : 0) | (flag("lstrip", false) ? kAddedLstrip : 0) |
                            (flag("rstrip", false) ? kAddedRstrip : 0) |
                            (flag("single_word", false) ? kAddedSingleWord : 0) |
                            (flag("normalized", !is_special) ? kAddedNormalized : 0);
      const auto token_id = static_cast<int32_t>(id->get<int64_t>());
      const auto known = std::find(tok.added_ids.begin(), tok.added_ids.end(), token_id);
      if (known != tok.added_ids.end()) {
        tok.added_flags[known - tok.added_ids.begin()] = flags;
      } else {
        tok.added_ids.push_back(token_id);
        tok.added_flags.push_back(flags);
      }
    }
  }
  // Ids the files leave out (and padding up to vocab_size) keep "" and kUnknown.
  if (max_id < 0) return bad(path, "the vocabulary is empty");
  if (const auto ignore = m->find("ignore_merges"); ignore != m->end() && ignore->is_boolean()) {
    tok.ignore_merges = ignore->get<bool>();
  }
  if (const auto normalizer = j->find("normalizer"); normalizer != j->end()) {
    auto name = NormalizerName(path, *normalizer);
    if (!name.ok()) return name.status();
    tok.normalizer = *name;
  }

  if (const auto merges = m->find("merges"); merges != m->end() && merges->is_array()) {
    tok.merges.reserve(merges->size());
    for (const json& merge : *merges) {
      if (merge.is_string()) {
        tok.merges.push_back(merge.get<std::string>());
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        tok.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      } else {
        return bad(path, absl::StrCat("merge #", tok.merges.size(), " is neither \"a b\" nor [\"a\", \"b\"]"));
      }
    }
  } else {
    return bad(path, "missing array 'model.merges'");
  }
  if (const auto pre = j->find("pre_tokenizer"); pre != j->end() && pre->is_object()) {
    if (AddsPrefixSpace(*pre)) {
      return absl::UnimplementedError(absl::StrCat(path, ": a ByteLevel pre-tokenizer with add_prefix_space is not supported"));
    }
    if (auto pattern = FindSplitPattern(*pre)) {
      tok.pre_tokenizer = *pattern;
    } else if (const auto t = pre->find("type"); t != pre->end() && t->is_string()) {
      tok.pre_tokenizer = t->get<std::string>();
    }
  }
  auto lookup = [&](const std::string& file, const std::string& text, const char* what) -> absl::StatusOr<int32_t> {
    auto it = ids.find(text);
    if (it == ids.end()) return bad(file, absl::StrCat(what, " '", text, "' is not in the vocabulary"));
    return it->second;
  };
  if (const auto unk = m->find("unk_token"); unk != m->end() && unk->is_string()) {
    auto id = lookup(path, unk->get<std::string>(), "model.unk_token");
    if (!id.ok()) return id.status();
    tok.unk_id = *id;
  }

  if (!config_path.empty()) {
    auto config = ReadJson(config_path);
    if (!config.ok()) return config.status();
    if (!config->is_object()) return bad(config_path, "not a JSON object");
    for (auto [key, out] : {std::pair{"bos_token", &tok.bos_id}, {"eos_token", &tok.eos_id},
                            {"unk_token", &tok.unk_id}, {"pad_token", &tok.pad_id}}) {
      auto text = TokenText(config_path, *config, key);
      if (!text.ok()) return text.status();
      if (!*text) continue;
      auto id = lookup(config_path, **text, key);
      if (!id.ok()) return id.status();
      *out = *id;
    }
    const auto add_bos = config->find("add_bos_token");
    if (add_bos != config->end() && !add_bos->is_null()) {
      if (!add_bos->is_boolean()) return bad(config_path, "'add_bos_token' is not a boolean");
      tok.add_bos = add_bos->get<bool>();
    } else if (tok.bos_id >= 0) {
      const auto post = j->find("post_processor");
      tok.add_bos = post != j->end() && PostProcessorAddsBos(*post, tok.tokens[static_cast<size_t>(tok.bos_id)]);
    }
    if (const auto tmpl = config->find("chat_template"); tmpl != config->end() && !tmpl->is_null()) {
      if (tmpl->is_string()) {
        tok.chat_template = tmpl->get<std::string>();
      } else if (tmpl->is_array()) {
        for (const json& named : *tmpl) {
          if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
              named["template"].is_string()) {
            tok.chat_template = named["template"].get<std::string>();
          }
        }
        if (tok.chat_template.empty()) return bad(config_path, "chat_template list has no string 'default' entry");
      } else {
        return bad(config_path, "'chat_template' is neither a string nor a list of {name, template}");
      }
    }
  }

  return absl::OkStatus();
}

absl::Status BuildTokenizer(const std::string& folder, SourceModel* model) {
  const std::string path = folder + "/tokenizer.json";
  if (!FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(folder, ": missing tokenizer.json (required for the vocabulary)"));
  }
  const std::string config_path = folder + "/tokenizer_config.json";
  TokenizerData& tok = model->tokenizer;
  if (auto s = ReadTokenizerFiles(path, FileExists(config_path) ? config_path : "", model->config.vocab_size, &tok);
      !s.ok()) {
    return s;
  }
  const int64_t vocab_size = model->config.vocab_size;
  auto bad = [&](const std::string& file, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
  };
  // generation_config.json may name further end-of-generation ids (e.g. Qwen's <|endoftext|>).
  const std::string generation_path = folder + "/generation_config.json";
  if (FileExists(generation_path)) {
    auto generation = ReadJson(generation_path);
    if (!generation.ok()) return generation.status();
    if (generation->is_object()) {
      const auto eos = generation->find("eos_token_id");
      if (eos != generation->end() && !eos->is_null()) {
        const json list = eos->is_array() ? *eos : json::array({*eos});
        for (const json& id : list) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
            return bad(generation_path, absl::StrCat("eos_token_id ", id.dump(), " is outside the vocabulary"));
          }
          const auto v = static_cast<int32_t>(id.get<int64_t>());
          if (tok.eos_id < 0) {
            tok.eos_id = v;
          } else if (v != tok.eos_id) {
            bool seen = false;
            for (int32_t e : tok.eos_ids) seen = seen || e == v;
            if (!seen) tok.eos_ids.push_back(v);
          }
        }
      }
    }
  }
  if (absl::Status s = tok.Validate(); !s.ok()) return bad(path, std::string(s.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerData> LoadHfTokenizer(const std::string& tokenizer_json,
                                              const std::string& tokenizer_config_json_or_empty) {
  TokenizerData tok;
  if (auto s = ReadTokenizerFiles(tokenizer_json, tokenizer_config_json_or_empty, -1, &tok); !s.ok()) return s;
  if (absl::Status s = tok.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tokenizer_json, ": ", s.message()));
  }
  return tok;
}

absl::StatusOr<SourceModel> LoadHuggingFace(const std::string& folder) {
  const std::string config_path = folder + "/config.json";
  if (!FileExists(config_path)) return absl::NotFoundError(absl::StrCat(folder, ": missing config.json"));
  auto config_json = ReadJson(config_path);
  if (!config_json.ok()) return config_json.status();
  SourceModel model;
  std::string warnings;
  auto config = ParseConfig(config_path, *config_json, &warnings);
  if (!config.ok()) return config.status();
  model.config = *config;
  std::string name = folder;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  model.config.name = name.substr(name.find_last_of('/') + 1);  // npos + 1 == 0

  auto weights = OpenWeights(folder);
  if (!weights.ok()) return weights.status();
  if (auto s = BuildTensors(folder, *weights, &model); !s.ok()) return s;
  if (auto s = BuildTokenizer(folder, &model); !s.ok()) return s;
  model.description = absl::StrCat("Hugging Face ", ArchitectureName(model.config.architecture), " model ", folder,
                                   " (", weights->shards.size(), " safetensors file",
                                   weights->shards.size() == 1 ? "" : "s", ", ", model.tensors.size(), " tensors",
                                   warnings, ")");
  return model;
}

}  // namespace kestrel::convert
