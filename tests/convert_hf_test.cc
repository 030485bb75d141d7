// Hugging Face importer tests: the test writes tiny Qwen2 / Qwen3 / Llama folders (config.json,
// safetensors with F32/F16/BF16 tensors, tokenizer.json, tokenizer_config.json), single-file and
// sharded, and checks config, canonical names, dims, exact values, tokenizer data and the errors.
#include <sys/stat.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "format/dtype.h"
#include "format/model_config.h"
#include "format/vqf_reader.h"
#include "platform/uniform_float.h"
#include "test_support.h"

namespace kestrel::convert {
namespace {

using kestrel::testing::TempPath;
using kestrel::testing::WriteFileBytes;
using nlohmann::json;

struct HfTensor {
  std::string hf_name;
  std::string canonical;  // empty for tensors the importer must ignore
  std::vector<int64_t> shape;  // HF order: [out, in]
  std::string dtype;           // F32, F16, BF16
  std::vector<uint8_t> bytes;
  std::vector<float> expected;  // the stored values widened to f32
};

HfTensor MakeTensor(std::string hf_name, std::string canonical, std::vector<int64_t> shape, std::string dtype,
                    std::mt19937* rng) {
  HfTensor t{std::move(hf_name), std::move(canonical), std::move(shape), std::move(dtype), {}, {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  UniformFloat dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(*rng);
    if (t.dtype == "F32") {
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      t.bytes.insert(t.bytes.end(), p, p + 4);
      t.expected.push_back(v);
    } else {
      const uint16_t h = t.dtype == "F16" ? Fp32ToFp16(v) : Fp32ToBf16(v);
      t.bytes.push_back(static_cast<uint8_t>(h & 0xff));
      t.bytes.push_back(static_cast<uint8_t>(h >> 8));
      t.expected.push_back(t.dtype == "F16" ? Fp16ToFp32(h) : Bf16ToFp32(h));
    }
  }
  return t;
}

// Header padded with spaces to 8 bytes (as the reference writer does), or made odd on purpose so
// that 2-byte data lands at odd addresses.
std::vector<uint8_t> BuildSafetensors(const std::vector<const HfTensor*>& tensors, bool odd_header = false) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const HfTensor* t : tensors) {
    header[t->hf_name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  if (odd_header) {
    if (text.size() % 2 == 0) text += ' ';
  } else {
    while (text.size() % 8 != 0) text += ' ';
  }
  std::string buffer(8, '\0');
  const uint64_t length = text.size();
  std::memcpy(&buffer[0], &length, 8);
  buffer += text;
  std::vector<uint8_t> out(buffer.begin(), buffer.end());
  for (const HfTensor* t : tensors) out.insert(out.end(), t->bytes.begin(), t->bytes.end());
  return out;
}

struct HfModel {
  std::string arch;
  json config;
  std::vector<HfTensor> tensors;  // canonical order, then ignored extras
  json tokenizer;
  json tokenizer_config;
  json generation_config;  // null when absent
};

constexpr int kDim = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kFfn = 96;

// qwen2: head_dim 16 (default), q/k/v biases, tied embeddings with a stray lm_head to ignore, vocab 48.
// qwen3: head_dim 32 (explicit), q/k norms, untied lm_head, vocab 50 (two padding ids).
// llama: head_dim 16, untied.
HfModel MakeHfModel(const std::string& arch) {
  HfModel m;
  m.arch = arch;
  const bool qwen2 = arch == "qwen2", qwen3 = arch == "qwen3";
  const int head_dim = qwen3 ? 32 : 16;
  const int vocab = qwen3 ? 50 : 48;
  const bool tied = qwen2;
  const int q = kHeads * head_dim, kv = kKvHeads * head_dim;
  m.config = {{"architectures", {qwen2 ? "Qwen2ForCausalLM" : qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM"}},
              {"hidden_size", kDim},
              {"num_hidden_layers", kLayers},
              {"num_attention_heads", kHeads},
              {"num_key_value_heads", kKvHeads},
              {"intermediate_size", kFfn},
              {"vocab_size", vocab},
              {"max_position_embeddings", qwen3 ? 40960 : 32768},
              {"rms_norm_eps", 1e-6},
              {"tie_word_embeddings", tied},
              {"torch_dtype", "bfloat16"}};
  if (qwen3) m.config["head_dim"] = head_dim;
  if (!arch.empty() && arch != "llama") m.config["rope_theta"] = 1000000.0;

  std::mt19937 rng(qwen2 ? 3 : qwen3 ? 5 : 9);
  const char* kTypes[] = {"F32", "F16", "BF16"};
  int next = 0;
  auto add = [&](const std::string& hf, const std::string& canonical, std::vector<int64_t> shape) {
    m.tensors.push_back(MakeTensor(hf, canonical, std::move(shape), kTypes[next++ % 3], &rng));
  };
  add("model.embed_tokens.weight", "token_embd.weight", {vocab, kDim});
  for (int l = 0; l < kLayers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    add(h + "input_layernorm.weight", b + "attn_norm.weight", {kDim});
    add(h + "self_attn.q_proj.weight", b + "attn_q.weight", {q, kDim});
    add(h + "self_attn.k_proj.weight", b + "attn_k.weight", {kv, kDim});
    add(h + "self_attn.v_proj.weight", b + "attn_v.weight", {kv, kDim});
    if (qwen2) {
      add(h + "self_attn.q_proj.bias", b + "attn_q.bias", {q});
      add(h + "self_attn.k_proj.bias", b + "attn_k.bias", {kv});
      add(h + "self_attn.v_proj.bias", b + "attn_v.bias", {kv});
    }
    if (qwen3) {
      add(h + "self_attn.q_norm.weight", b + "attn_q_norm.weight", {head_dim});
      add(h + "self_attn.k_norm.weight", b + "attn_k_norm.weight", {head_dim});
    }
    add(h + "self_attn.o_proj.weight", b + "attn_output.weight", {kDim, q});
    add(h + "post_attention_layernorm.weight", b + "ffn_norm.weight", {kDim});
    add(h + "mlp.gate_proj.weight", b + "ffn_gate.weight", {kFfn, kDim});
    add(h + "mlp.up_proj.weight", b + "ffn_up.weight", {kFfn, kDim});
    add(h + "mlp.down_proj.weight", b + "ffn_down.weight", {kDim, kFfn});
  }
  add("model.norm.weight", "output_norm.weight", {kDim});
  add("lm_head.weight", tied ? "" : "output.weight", {vocab, kDim});
  add("model.layers.0.self_attn.rotary_emb.inv_freq", "", {head_dim / 2});  // ignored

  // Tokenizer: 46 base tokens t0..t46 without id 10 (a hole), then added tokens 44..47.
  json vocab_json = json::object();
  for (int i = 0; i < 44; ++i) {
    if (i != 10) vocab_json["t" + std::to_string(i)] = i;
  }
  json pre = qwen3 ? json{{"type", "ByteLevel"}, {"add_prefix_space", false}}
                   : json{{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+|\\p{N}"}}}, {"behavior", "Isolated"}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}};
  // Pairs for qwen3 (newer tokenizers), "a b" strings otherwise.
  json merges = qwen3 ? json::array({json::array({"t", "1"}), json::array({"t1", "2"})}) : json::array({"t 1", "t1 2"});
  m.tokenizer = {{"version", "1.0"},
                 {"added_tokens",
                  {{{"id", 44}, {"content", "<|endoftext|>"}, {"special", true}},
                   {{"id", 45}, {"content", "<|im_start|>"}, {"special", true}},
                   {{"id", 46}, {"content", "<|im_end|>"}, {"special", true}},
                   {{"id", 47}, {"content", "<think>"}, {"special", false}}}},
                 {"pre_tokenizer", pre},
                 {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab_json}, {"merges", merges}}}};
  if (qwen3) {
    m.tokenizer_config = {{"bos_token", "<|im_start|>"},
                          {"eos_token", {{"content", "<|im_end|>"}, {"lstrip", false}}},
                          {"pad_token", nullptr},
                          {"add_bos_token", true},
                          {"chat_template", {{{"name", "tool_use"}, {"template", "TOOLS"}},
                                             {{"name", "default"}, {"template", "{{ messages }}"}}}}};
    m.generation_config = {{"eos_token_id", {46, 44}}};
  } else if (arch == "llama") {
    // No add_bos_token: the post_processor's template decides (as in Llama 3's tokenizer.json).
    m.tokenizer_config = {{"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}};
    // Parsed from text: nested brace-initializers are ambiguous between arrays and objects.
    m.tokenizer["post_processor"] = nlohmann::json::parse(R"({
        "type": "Sequence",
        "processors": [
          {"type": "ByteLevel"},
          {"type": "TemplateProcessing",
           "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}}]}]})");
  } else {
    m.tokenizer_config = {{"bos_token", nullptr},
                          {"eos_token", "<|im_end|>"},
                          {"pad_token", {{"content", "<|endoftext|>"}}},
                          {"chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"}};
  }
  return m;
}

void WriteText(const std::string& path, const std::string& text) { WriteFileBytes(path, text.data(), text.size()); }

// Writes the folder; sharded puts the first half of the tensors in one file and the rest (with an odd
// header length) in another, listed by model.safetensors.index.json.
std::string WriteHfFolder(const HfModel& m, const std::string& name, bool sharded = false) {
  const std::string folder = TempPath(name);
  ::mkdir(folder.c_str(), 0755);
  for (const char* f : {"model.safetensors", "model.safetensors.index.json", "generation_config.json"}) {
    std::remove((folder + "/" + f).c_str());
  }
  WriteText(folder + "/config.json", m.config.dump(2));
  WriteText(folder + "/tokenizer.json", m.tokenizer.dump());
  WriteText(folder + "/tokenizer_config.json", m.tokenizer_config.dump());
  if (!m.generation_config.is_null()) WriteText(folder + "/generation_config.json", m.generation_config.dump());
  std::vector<const HfTensor*> all;
  for (const HfTensor& t : m.tensors) all.push_back(&t);
  if (!sharded) {
    const std::vector<uint8_t> bytes = BuildSafetensors(all);
    WriteFileBytes(folder + "/model.safetensors", bytes.data(), bytes.size());
    return folder;
  }
  const size_t half = all.size() / 2;
  const std::vector<const HfTensor*> first(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(half));
  const std::vector<const HfTensor*> second(all.begin() + static_cast<std::ptrdiff_t>(half), all.end());
  json map = json::object();
  for (const HfTensor* t : first) map[t->hf_name] = "model-00001-of-00002.safetensors";
  for (const HfTensor* t : second) map[t->hf_name] = "model-00002-of-00002.safetensors";
  WriteText(folder + "/model.safetensors.index.json", json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  std::vector<uint8_t> bytes = BuildSafetensors(first);
  WriteFileBytes(folder + "/model-00001-of-00002.safetensors", bytes.data(), bytes.size());
  bytes = BuildSafetensors(second, /*odd_header=*/true);
  WriteFileBytes(folder + "/model-00002-of-00002.safetensors", bytes.data(), bytes.size());
  return folder;
}

void CheckTensors(const SourceModel& model, const HfModel& m) {
  std::vector<const HfTensor*> expected;
  for (const HfTensor& t : m.tensors) {
    if (!t.canonical.empty()) expected.push_back(&t);
  }
  REQUIRE(model.tensors.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const SourceTensor& t = model.tensors[i];
    const HfTensor& e = *expected[i];
    INFO("tensor " << e.canonical);
    CHECK(t.name == e.canonical);
    CHECK(t.dims == std::vector<int64_t>(e.shape.rbegin(), e.shape.rend()));
    CHECK(t.source_dtype == *DTypeFromName(e.dtype == "F32" ? "f32" : e.dtype == "F16" ? "f16" : "bf16"));
    std::vector<float> got(e.expected.size(), -999.0f);
    REQUIRE(t.read_f32(got.data()).ok());
    CHECK(got == e.expected);
    if (t.raw != nullptr) CHECK(std::memcmp(t.raw, e.bytes.data(), e.bytes.size()) == 0);
  }
}

void CheckConfig(const ModelConfig& c, const HfModel& m) {
  CHECK(c.dim == kDim);
  CHECK(c.n_layers == kLayers);
  CHECK(c.n_heads == kHeads);
  CHECK(c.n_kv_heads == kKvHeads);
  CHECK(c.ffn_dim == kFfn);
  CHECK(c.rope_style == RopeStyle::kHalfSplit);
  CHECK(c.norm_eps == 1e-6f);
  if (m.arch == "qwen2") {
    CHECK(c.architecture == Architecture::kQwen2);
    CHECK(c.head_dim == 16);
    CHECK(c.vocab_size == 48);
    CHECK(c.context_length == 32768);
    CHECK(c.rope_theta == 1000000.0f);
    CHECK(c.tied_embeddings);
    CHECK(c.qkv_bias);
    CHECK_FALSE(c.qk_norm);
  } else if (m.arch == "qwen3") {
    CHECK(c.architecture == Architecture::kQwen3);
    CHECK(c.head_dim == 32);
    CHECK(c.vocab_size == 50);
    CHECK(c.context_length == 40960);
    CHECK_FALSE(c.tied_embeddings);
    CHECK_FALSE(c.qkv_bias);
    CHECK(c.qk_norm);
  } else {
    CHECK(c.architecture == Architecture::kLlama);
    CHECK(c.head_dim == 16);
    CHECK(c.rope_theta == 10000.0f);  // default
    CHECK_FALSE(c.tied_embeddings);
  }
}

void CheckTokenizer(const TokenizerData& tok, const HfModel& m) {
  const size_t vocab = m.arch == "qwen3" ? 50 : 48;
  CHECK(tok.type == "bpe");
  REQUIRE(tok.tokens.size() == vocab);
  REQUIRE(tok.token_types.size() == vocab);
  CHECK(tok.tokens[0] == "t0");
  CHECK(tok.tokens[43] == "t43");
  CHECK(tok.token_types[43] == static_cast<int32_t>(TokenType::kNormal));
  CHECK(tok.tokens[10].empty());  // a hole in the vocabulary
  CHECK(tok.token_types[10] == static_cast<int32_t>(TokenType::kUnknown));
  CHECK(tok.tokens[46] == "<|im_end|>");
  CHECK(tok.token_types[46] == static_cast<int32_t>(TokenType::kControl));
  CHECK(tok.tokens[47] == "<think>");
  CHECK(tok.token_types[47] == static_cast<int32_t>(TokenType::kUserDefined));
  CHECK(tok.merges == std::vector<std::string>{"t 1", "t1 2"});
  CHECK(tok.eos_id == 46);
  if (m.arch == "qwen3") {
    CHECK(tok.tokens[49].empty());  // padding up to vocab_size
    CHECK(tok.token_types[49] == static_cast<int32_t>(TokenType::kUnknown));
    CHECK(tok.pre_tokenizer == "ByteLevel");
    CHECK(tok.bos_id == 45);
    CHECK(tok.pad_id == -1);
    CHECK(tok.add_bos);
    CHECK(tok.chat_template == "{{ messages }}");
    CHECK(tok.eos_ids == std::vector<int32_t>{44});
  } else if (m.arch == "llama") {
    CHECK(tok.bos_id == 45);
    CHECK(tok.add_bos);  // from the post_processor template
    CHECK(tok.pad_id == -1);
    CHECK(tok.chat_template.empty());
  } else {
    CHECK(tok.pre_tokenizer == "\\p{L}+|\\p{N}");
    CHECK(tok.bos_id == -1);
    CHECK(tok.pad_id == 44);
    CHECK_FALSE(tok.add_bos);
    CHECK(tok.chat_template == "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}");
    CHECK(tok.eos_ids.empty());
  }
  CHECK(tok.unk_id == -1);
}

TEST_CASE("LoadHuggingFace reads tiny Qwen2, Qwen3 and Llama folders", "[convert][hf]") {
  for (const std::string arch : {"qwen2", "qwen3", "llama"}) {
    INFO("arch " << arch);
    const HfModel m = MakeHfModel(arch);
    auto model = LoadHuggingFace(WriteHfFolder(m, "hf-" + arch));
    INFO(model.status().ToString());
  REQUIRE(model.ok());
    CheckConfig(model->config, m);
    CheckTensors(*model, m);
    CheckTokenizer(model->tokenizer, m);
    CHECK(model->config.name == "hf-" + arch);
    CHECK(model->mappings.size() == 1);
    for (const SourceTensor& t : model->tensors) CHECK(t.raw != nullptr);  // aligned: exact bytes offered
  }
}

TEST_CASE("LoadHuggingFace reads sharded checkpoints, including unaligned data", "[convert][hf]") {
  const HfModel m = MakeHfModel("qwen3");
  auto model = LoadHuggingFace(WriteHfFolder(m, "hf-sharded", /*sharded=*/true));
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  CheckConfig(model->config, m);
  CheckTensors(*model, m);
  CheckTokenizer(model->tokenizer, m);
  CHECK(model->mappings.size() == 2);
  // The second shard's odd header length leaves its tensors unaligned: read through a copy, no `raw`.
  size_t unaligned = 0;
  for (const SourceTensor& t : model->tensors) unaligned += t.raw == nullptr ? 1 : 0;
  CHECK(unaligned >= model->tensors.size() / 3);
  CHECK(unaligned < model->tensors.size());
}

TEST_CASE("Hugging Face models convert to VQF with exact values", "[convert][hf]") {
  const HfModel m = MakeHfModel("qwen2");
  auto model = LoadHuggingFace(WriteHfFolder(m, "hf-convert", /*sharded=*/true));
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  for (DType type : {DType::kF32, DType::kBF16, DType::kF16}) {
    INFO("type " << DTypeName(type));
    const std::string path = TempPath("hf-convert.vqf");
    ConvertOptions options;
    options.type = type;
    REQUIRE(ConvertModel(*model, path, options, nullptr).ok());
    auto file = VqfFile::Open(path);
    REQUIRE(file.ok());
    auto tokenizer = TokenizerData::FromMetadata((*file)->metadata());
    REQUIRE(tokenizer.ok());
    CHECK(tokenizer->tokens == model->tokenizer.tokens);
    CHECK(tokenizer->chat_template == model->tokenizer.chat_template);
    for (const HfTensor& e : m.tensors) {
      if (e.canonical.empty()) continue;
      INFO("tensor " << e.canonical);
      const TensorInfo* t = (*file)->Find(e.canonical);
      REQUIRE(t != nullptr);
      std::vector<float> got(static_cast<size_t>(t->elements()));
      for (int64_t r = 0; r < t->rows(); ++r) DequantizeRow(t->dtype, t->data + DTypeRowBytes(t->dtype, t->columns()) * r,
                                                            got.data() + r * t->columns(), t->columns());
      // Exact when the target holds the source type's values: f32 always, and the same 16-bit type.
      const bool exact = t->dtype == DType::kF32 || e.dtype == (type == DType::kBF16 ? "BF16" : "F16");
      if (exact) {
        CHECK(got == e.expected);
      } else {
        for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - e.expected[i]) <= 0.01f * 2.0f);
      }
    }
    CHECK((*file)->Find("output.weight") == nullptr);  // tied
  }
}

std::string Message(const absl::StatusOr<SourceModel>& model) {
  REQUIRE_FALSE(model.ok());
  return std::string(model.status().message());
}

TEST_CASE("LoadHuggingFace errors name the file and the problem", "[convert][hf]") {
  {
    const std::string folder = TempPath("hf-empty");
    ::mkdir(folder.c_str(), 0755);
    auto model = LoadHuggingFace(folder);
    CHECK(model.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(Message(model), Catch::Contains("config.json"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    m.config["architectures"] = {"MistralForCausalLM"};
    auto model = LoadHuggingFace(WriteHfFolder(m, "hf-mistral"));
    CHECK_THAT(Message(model), Catch::Contains("config.json") &&
                                   Catch::Contains("unsupported architecture 'MistralForCausalLM'"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    m.config.erase("hidden_size");
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-nohidden"))), Catch::Contains("hidden_size"));
  }
  {
    HfModel m = MakeHfModel("qwen3");
    for (HfTensor& t : m.tensors) {
      if (t.hf_name == "model.layers.1.self_attn.k_proj.weight") {
        std::mt19937 rng(1);
        t = MakeTensor(t.hf_name, t.canonical, {32, kDim}, "F32", &rng);
      }
    }
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-shape"))),
               Catch::Contains("model.layers.1.self_attn.k_proj.weight") && Catch::Contains("[32, 64]") &&
                   Catch::Contains("expected [64, 64]"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    m.tensors.erase(m.tensors.begin() + 5);  // model.layers.0.self_attn.q_proj.bias
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-missing"))),
               Catch::Contains("missing tensor 'model.layers.0.self_attn.q_proj.bias'"));
  }
  {
    HfModel m = MakeHfModel("qwen3");  // untied: lm_head is required
    m.tensors.erase(m.tensors.end() - 2);
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-nohead"))), Catch::Contains("lm_head.weight"));
  }
  {
    // Truncated safetensors: every cut is refused.
    const HfModel m = MakeHfModel("qwen2");
    const std::string folder = WriteHfFolder(m, "hf-truncated");
    const std::vector<uint8_t> bytes = kestrel::testing::ReadFileBytes(folder + "/model.safetensors");
    REQUIRE(bytes.size() > 1000);
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    for (size_t n : {size_t{0}, size_t{4}, size_t{8}, size_t{20}, static_cast<size_t>(header) + 7,
                     static_cast<size_t>(header) + 8, bytes.size() / 2, bytes.size() - 1}) {
      INFO("cut to " << n);
      WriteFileBytes(folder + "/model.safetensors", bytes.data(), n);
      const std::string message = Message(LoadHuggingFace(folder));
      CHECK_THAT(message, Catch::Contains("model.safetensors"));
    }
    WriteFileBytes(folder + "/model.safetensors", bytes.data(), bytes.size() - 1);
    CHECK_THAT(Message(LoadHuggingFace(folder)), Catch::Contains("past the end"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    const std::string folder = WriteHfFolder(m, "hf-notokenizer");
    std::remove((folder + "/tokenizer.json").c_str());
    CHECK_THAT(Message(LoadHuggingFace(folder)), Catch::Contains("tokenizer.json"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    m.tokenizer_config["eos_token"] = "<|nope|>";
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-badeos"))),
               Catch::Contains("tokenizer_config.json") && Catch::Contains("<|nope|>"));
  }
  {
    HfModel m = MakeHfModel("qwen2");
    m.tokenizer["model"]["vocab"]["far"] = 4000;
    CHECK_THAT(Message(LoadHuggingFace(WriteHfFolder(m, "hf-bigid"))),
               Catch::Contains("'far'") && Catch::Contains("vocab_size 48"));
  }
  {
    const std::string folder = WriteHfFolder(MakeHfModel("qwen2"), "hf-badjson");
    WriteText(folder + "/config.json", "{\"hidden_size\": 64,");
    CHECK_THAT(Message(LoadHuggingFace(folder)), Catch::Contains("config.json") && Catch::Contains("invalid JSON"));
  }
}

TEST_CASE("Safetensors reader checks header, offsets and sizes", "[convert][hf]") {
  std::mt19937 rng(2);
  const HfTensor a = MakeTensor("a", "", {3, 5}, "BF16", &rng);
  const HfTensor b = MakeTensor("b", "", {7}, "F32", &rng);
  const std::string path = TempPath("st.safetensors");
  std::vector<uint8_t> bytes = BuildSafetensors({&a, &b});
  WriteFileBytes(path, bytes.data(), bytes.size());
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->tensors().size() == 2);  // __metadata__ skipped
  const SafetensorsTensor* t = (*file)->Find("a");
  REQUIRE(t != nullptr);
  CHECK(t->shape == std::vector<int64_t>{3, 5});
  CHECK(t->dtype == DType::kBF16);
  std::vector<float> got(15);
  REQUIRE(ReadSafetensorAsF32(*t, got.data()).ok());
  CHECK(got == a.expected);

  auto bad = [&](const std::string& header_text) {
    std::string buffer(8, '\0');
    const uint64_t n = header_text.size();
    std::memcpy(&buffer[0], &n, 8);
    buffer += header_text;
    buffer.append(16, '\0');
    const std::vector<uint8_t> out(buffer.begin(), buffer.end());
    WriteFileBytes(path, out.data(), out.size());
    auto f = SafetensorsFile::Open(path);
    REQUIRE_FALSE(f.ok());
    return std::string(f.status().message());
  };
  CHECK_THAT(bad(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})"), Catch::Contains("need 8"));
  CHECK_THAT(bad(R"({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})"), Catch::Contains("past the end"));
  CHECK_THAT(bad(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})"), Catch::Contains("reversed"));
  CHECK_THAT(bad(R"({"x": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}})"), Catch::Contains("unknown dtype"));
  CHECK_THAT(bad(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})"), Catch::Contains("shape"));
  CHECK_THAT(bad(R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})"),
             Catch::Contains("too large"));
  CHECK_THAT(bad(R"([1, 2])"), Catch::Contains("not a JSON object"));
  CHECK_THAT(bad(R"({"x": )"), Catch::Contains("not valid JSON"));
  // A header length larger than the file.
  bytes[0] = 0xff;
  bytes[1] = 0xff;
  WriteFileBytes(path, bytes.data(), bytes.size());
  auto f = SafetensorsFile::Open(path);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(std::string(f.status().message()), Catch::Contains("header length"));
}

TEST_CASE("LoadHuggingFace reads the real Qwen3 tokenizer files", "[convert][hf]") {
  const std::string tokenizer = kestrel::testing::SharedPath("tokenizers/qwen3/tokenizer.json");
  const std::string tokenizer_config = kestrel::testing::SharedPath("tokenizers/qwen3/tokenizer_config.json");
  if (tokenizer.empty() || tokenizer_config.empty()) {
    WARN("SKIPPED: ../shared/tokenizers/qwen3 is absent");
    return;
  }
  // A one-layer Qwen3 with the real vocabulary size (151936) and tied embeddings.
  HfModel m;
  m.arch = "qwen3";
  const int dim = 32, vocab = 151936;
  m.config = {{"architectures", {"Qwen3ForCausalLM"}}, {"hidden_size", dim}, {"num_hidden_layers", 1},
              {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 16},
              {"intermediate_size", 32}, {"vocab_size", vocab}, {"max_position_embeddings", 40960},
              {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000}, {"tie_word_embeddings", true}};
  std::mt19937 rng(4);
  auto add = [&](const std::string& hf, std::vector<int64_t> shape) {
    m.tensors.push_back(MakeTensor(hf, "x", std::move(shape), "BF16", &rng));
  };
  add("model.embed_tokens.weight", {vocab, dim});
  add("model.layers.0.input_layernorm.weight", {dim});
  add("model.layers.0.self_attn.q_proj.weight", {32, dim});
  add("model.layers.0.self_attn.k_proj.weight", {16, dim});
  add("model.layers.0.self_attn.v_proj.weight", {16, dim});
  add("model.layers.0.self_attn.q_norm.weight", {16});
  add("model.layers.0.self_attn.k_norm.weight", {16});
  add("model.layers.0.self_attn.o_proj.weight", {dim, 32});
  add("model.layers.0.post_attention_layernorm.weight", {dim});
  add("model.layers.0.mlp.gate_proj.weight", {32, dim});
  add("model.layers.0.mlp.up_proj.weight", {32, dim});
  add("model.layers.0.mlp.down_proj.weight", {dim, 32});
  add("model.norm.weight", {dim});
  m.generation_config = {{"eos_token_id", {151645, 151643}}};
  std::vector<const HfTensor*> all;
  for (const HfTensor& t : m.tensors) all.push_back(&t);
  const std::string folder = TempPath("hf-qwen3-real");
  ::mkdir(folder.c_str(), 0755);
  WriteText(folder + "/config.json", m.config.dump());
  WriteText(folder + "/generation_config.json", m.generation_config.dump());
  const std::vector<uint8_t> bytes = BuildSafetensors(all);
  WriteFileBytes(folder + "/model.safetensors", bytes.data(), bytes.size());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    const std::vector<uint8_t> data =
        kestrel::testing::ReadFileBytes(kestrel::testing::SharedPath(std::string("tokenizers/qwen3/") + f));
    WriteFileBytes(folder + "/" + f, data.data(), data.size());
  }
  auto model = LoadHuggingFace(folder);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  const TokenizerData& tok = model->tokenizer;
  CHECK(tok.type == "bpe");
  REQUIRE(tok.tokens.size() == static_cast<size_t>(vocab));
  CHECK(tok.tokens[0] == "!");
  CHECK(tok.tokens[151643] == "<|endoftext|>");
  CHECK(tok.tokens[151645] == "<|im_end|>");
  CHECK(tok.token_types[151645] == static_cast<int32_t>(TokenType::kControl));
  CHECK(tok.tokens[151668] == "</think>");
  CHECK(tok.token_types[151668] == static_cast<int32_t>(TokenType::kUserDefined));
  CHECK(tok.tokens[151669].empty());
  CHECK(tok.token_types[151669] == static_cast<int32_t>(TokenType::kUnknown));
  REQUIRE(tok.merges.size() == 151387);
  CHECK(tok.merges[0] == "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  CHECK_THAT(tok.pre_tokenizer, Catch::StartsWith("(?i:'s|'t|'re|'ve|'m|'ll|'d)") && Catch::Contains("\\p{N}|"));
  CHECK(tok.eos_id == 151645);
  CHECK(tok.eos_ids == std::vector<int32_t>{151643});
  CHECK(tok.pad_id == 151643);
  CHECK(tok.bos_id == -1);
  CHECK_FALSE(tok.add_bos);
  CHECK_THAT(tok.chat_template, Catch::StartsWith("{%- if tools %}"));
  CHECK(model->config.tied_embeddings);
  CHECK(model->tensors.size() == 13);
}

}  // namespace
}  // namespace kestrel::convert
