// GGUF importer tests: a test-only GGUF writer builds tiny llama and qwen3 files with F32, F16,
// BF16, Q8_0 and Q4_0 tensors; LoadGguf must reproduce the config, tokenizer, canonical tensor
// order and exact values, convert losslessly, and refuse corrupt files with a message.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "convert/converter.h"
#include "convert/source_model.h"
#include "format/dtype.h"
#include "format/layout.h"
#include "format/model_config.h"
#include "format/vqf_reader.h"
#include "platform/uniform_float.h"
#include "test_support.h"

namespace kestrel::convert {
namespace {

using kestrel::testing::TempPath;
using kestrel::testing::WriteFileBytes;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30, kQ4_K = 12;

// ---- A minimal GGUF writer (test only) ----

template <typename T>
void Put(std::vector<uint8_t>* b, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b->insert(b->end(), p, p + sizeof(T));
}
void PutString(std::vector<uint8_t>* b, const std::string& s) {
  Put<uint64_t>(b, s.size());
  b->insert(b->end(), s.begin(), s.end());
}

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = kF32;
  std::vector<uint8_t> bytes;
  std::optional<uint64_t> offset_override;
};

struct GgufBuilder {
  uint32_t version = 3;
  uint64_t kv_count = 0;
  std::vector<uint8_t> kv;
  std::vector<GgufTensor> tensors;

  void Key(const std::string& key, uint32_t type) {
    PutString(&kv, key);
    Put<uint32_t>(&kv, type);
    ++kv_count;
  }
  void String(const std::string& key, const std::string& v) { Key(key, 8); PutString(&kv, v); }
  void U32(const std::string& key, uint32_t v) { Key(key, 4); Put(&kv, v); }
  void I32(const std::string& key, int32_t v) { Key(key, 5); Put(&kv, v); }
  void U64(const std::string& key, uint64_t v) { Key(key, 10); Put(&kv, v); }
  void F32(const std::string& key, float v) { Key(key, 6); Put(&kv, v); }
  void Bool(const std::string& key, bool v) { Key(key, 7); Put<uint8_t>(&kv, v ? 1 : 0); }
  void StringArray(const std::string& key, const std::vector<std::string>& v) {
    Key(key, 9);
    Put<uint32_t>(&kv, 8);
    Put<uint64_t>(&kv, v.size());
    for (const std::string& s : v) PutString(&kv, s);
  }
  void F32Array(const std::string& key, const std::vector<float>& v) {
    Key(key, 9);
    Put<uint32_t>(&kv, 6);
    Put<uint64_t>(&kv, v.size());
    for (float x : v) Put(&kv, x);
  }
  void I32Array(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, 9);
    Put<uint32_t>(&kv, 5);
    Put<uint64_t>(&kv, v.size());
    for (int32_t x : v) Put(&kv, x);
  }

  // Also reports where the tensor infos and the data section begin.
  std::vector<uint8_t> Build(size_t* infos_start = nullptr, size_t* data_start = nullptr) const {
    std::vector<uint8_t> out;
    out.insert(out.end(), {'G', 'G', 'U', 'F'});
    Put(&out, version);
    Put<uint64_t>(&out, tensors.size());
    Put(&out, kv_count);
    out.insert(out.end(), kv.begin(), kv.end());
    if (infos_start != nullptr) *infos_start = out.size();
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const GgufTensor& t : tensors) {
      PutString(&out, t.name);
      Put<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) Put(&out, d);
      Put(&out, t.type);
      Put(&out, t.offset_override.value_or(offset));
      offsets.push_back(offset);
      offset = (offset + t.bytes.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, 0);
    const size_t start = out.size();
    if (data_start != nullptr) *data_start = start;
    for (size_t i = 0; i < tensors.size(); ++i) {
      out.resize(start + offsets[i], 0);
      out.insert(out.end(), tensors[i].bytes.begin(), tensors[i].bytes.end());
    }
    return out;
  }
};

// ---- Tiny models ----

struct Spec {
  std::vector<int64_t> dims;
  uint32_t ggml_type;
  std::vector<uint8_t> bytes;      // as stored
  std::vector<float> expected;     // decoded independently of the importer
};

// Encodes random values as `type`; `expected` is decoded by hand (not with the importer's code).
Spec MakeSpec(std::vector<int64_t> dims, uint32_t type, std::mt19937* rng) {
  Spec s{dims, type, {}, {}};
  const int64_t columns = dims[0], rows = dims.size() > 1 ? dims[1] : 1;
  UniformFloat dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(columns * rows));
  for (float& v : values) v = dist(*rng);
  s.expected.resize(values.size());
  switch (type) {
    case kF32:
      s.bytes.resize(values.size() * 4);
      std::memcpy(s.bytes.data(), values.data(), s.bytes.size());
      s.expected = values;
      break;
    case kF16:
    case kBF16: {
      std::vector<uint16_t> h(values.size());
      for (size_t i = 0; i < h.size(); ++i) {
        h[i] = type == kF16 ? Fp32ToFp16(values[i]) : Fp32ToBf16(values[i]);
        s.expected[i] = type == kF16 ? Fp16ToFp32(h[i]) : Bf16ToFp32(h[i]);
      }
      s.bytes.resize(h.size() * 2);
      std::memcpy(s.bytes.data(), h.data(), s.bytes.size());
      break;
    }
    case kQ8_0: {
      std::vector<BlockQ8_0> blocks(values.size() / 32);
      for (int64_t r = 0; r < rows; ++r) QuantizeRowQ8_0(&values[r * columns], &blocks[r * columns / 32], columns);
      for (size_t b = 0; b < blocks.size(); ++b) {
        for (int i = 0; i < 32; ++i) s.expected[b * 32 + i] = Fp16ToFp32(blocks[b].d) * static_cast<float>(blocks[b].qs[i]);
      }
      s.bytes.resize(blocks.size() * sizeof(BlockQ8_0));
      std::memcpy(s.bytes.data(), blocks.data(), s.bytes.size());
      break;
    }
    case kQ4_0: {
      std::vector<BlockQ4_0> blocks(values.size() / 32);
      for (int64_t r = 0; r < rows; ++r) QuantizeRowQ4_0(&values[r * columns], &blocks[r * columns / 32], columns);
      for (size_t b = 0; b < blocks.size(); ++b) {
        const float d = Fp16ToFp32(blocks[b].d);
        for (int j = 0; j < 16; ++j) {
          s.expected[b * 32 + j] = d * static_cast<float>(static_cast<int>(blocks[b].qs[j] & 15) - 8);
          s.expected[b * 32 + j + 16] = d * static_cast<float>(static_cast<int>(blocks[b].qs[j] >> 4) - 8);
        }
      }
      s.bytes.resize(blocks.size() * sizeof(BlockQ4_0));
      std::memcpy(s.bytes.data(), blocks.data(), s.bytes.size());
      break;
    }
  }
  return s;
}

DType KestrelType(uint32_t ggml) {
  switch (ggml) {
    case kF16: return DType::kF16;
    case kBF16: return DType::kBF16;
    case kQ8_0: return DType::kQ8_0;
    case kQ4_0: return DType::kQ4_0;
    default: return DType::kF32;
  }
}

struct TinyModel {
  GgufBuilder builder;
  std::vector<std::string> order;  // canonical order expected from the importer
  std::map<std::string, Spec> specs;
  std::vector<std::string> tokens;
};

constexpr int kDim = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kFfn = 96, kVocab = 40;

// llama: head_dim 16 (default dim/heads), untied output, "llama" (scores) tokenizer.
// qwen3: head_dim 32 (key_length), tied embeddings, qk norms, "gpt2" BPE tokenizer with 38 tokens.
// qwen2: like qwen3 but head_dim 16 (default), q/k/v biases, no qk norms, rope_theta default.
TinyModel MakeTinyModel(const std::string& arch, const std::string& tokenizer_model = "") {
  const bool llama = arch == "llama", qwen2 = arch == "qwen2", qwen3 = arch == "qwen3";
  const int head_dim = qwen3 ? 32 : 16;
  const int q = kHeads * head_dim, kv = kKvHeads * head_dim;
  const uint32_t mat = llama ? kQ8_0 : kQ4_0;
  std::mt19937 rng(llama ? 7 : qwen2 ? 13 : 11);
  TinyModel m;
  auto add = [&](const std::string& name, std::vector<int64_t> dims, uint32_t type) {
    m.order.push_back(name);
    m.specs.emplace(name, MakeSpec(std::move(dims), type, &rng));
  };
  add("token_embd.weight", {kDim, kVocab}, llama ? kF16 : kQ4_0);
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {kDim}, kF32);
    add(b + "attn_q.weight", {kDim, q}, mat);
    add(b + "attn_k.weight", {kDim, kv}, mat);
    add(b + "attn_v.weight", {kDim, kv}, l == 0 ? kF16 : mat);
    if (qwen2) {
      add(b + "attn_q.bias", {q}, kF32);
      add(b + "attn_k.bias", {kv}, kF32);
      add(b + "attn_v.bias", {kv}, kF32);
    }
    if (qwen3) {
      add(b + "attn_q_norm.weight", {head_dim}, kF32);
      add(b + "attn_k_norm.weight", {head_dim}, kF32);
    }
    add(b + "attn_output.weight", {q, kDim}, llama ? mat : kBF16);
    add(b + "ffn_norm.weight", {kDim}, kF32);
    add(b + "ffn_gate.weight", {kDim, kFfn}, mat);
    add(b + "ffn_up.weight", {kDim, kFfn}, llama ? kBF16 : mat);
    add(b + "ffn_down.weight", {kFfn, kDim}, mat);
  }
  add("output_norm.weight", {kDim}, kF32);
  if (llama) add("output.weight", {kDim, kVocab}, kQ8_0);

  GgufBuilder& g = m.builder;
  g.String("general.architecture", arch);
  g.String("general.name", "tiny-" + arch);
  g.U32("general.alignment", 32);
  g.U32(arch + ".embedding_length", kDim);
  g.U32(arch + ".block_count", kLayers);
  g.U32(arch + ".attention.head_count", kHeads);
  g.U32(arch + ".attention.head_count_kv", kKvHeads);
  g.U32(arch + ".feed_forward_length", kFfn);
  g.U64(arch + ".context_length", llama ? 2048 : 4096);
  g.F32(arch + ".attention.layer_norm_rms_epsilon", llama ? 1e-5f : 1e-6f);
  if (qwen3) {
    g.U32(arch + ".attention.key_length", head_dim);
    g.U32(arch + ".attention.value_length", head_dim);
    g.F32(arch + ".rope.freq_base", 1000000.0f);
  }
  const int n_tokens = llama ? kVocab : kVocab - 2;
  for (int i = 0; i < n_tokens; ++i) m.tokens.push_back(i == 0 ? "<unk>" : "tok" + std::to_string(i));
  g.StringArray("tokenizer.ggml.tokens", m.tokens);
  std::vector<int32_t> types(n_tokens, 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  types[3] = types[4] = 6;
  types[5] = 4;
  g.I32Array("tokenizer.ggml.token_type", types);
  if (llama) {
    g.String("tokenizer.ggml.model", tokenizer_model.empty() ? "llama" : tokenizer_model);
    std::vector<float> scores;
    for (int i = 0; i < n_tokens; ++i) scores.push_back(-static_cast<float>(i) * 0.5f);
    g.F32Array("tokenizer.ggml.scores", scores);
    g.U32("tokenizer.ggml.bos_token_id", 1);
    g.U32("tokenizer.ggml.eos_token_id", 2);
    g.U32("tokenizer.ggml.unknown_token_id", 0);
  } else {
    g.String("tokenizer.ggml.model", tokenizer_model.empty() ? "gpt2" : tokenizer_model);
    g.String("tokenizer.ggml.pre", "qwen2");
    g.StringArray("tokenizer.ggml.merges", {"t o", "to k", "tok 1"});
    g.U32("tokenizer.ggml.eos_token_id", 2);
    g.U32("tokenizer.ggml.eot_token_id", 5);
    g.U32("tokenizer.ggml.padding_token_id", 1);
    g.String("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  }
  // An extra tensor in a type Kestrel cannot read: ignored because no canonical tensor needs it.
  g.tensors.push_back({"rope_freqs.weight", {32}, kQ4_K, std::vector<uint8_t>(144, 0x5a), std::nullopt});
  // File order differs from the canonical order (reversed), and ggml pads 1-D/2-D shapes with no 1s here.
  for (auto it = m.order.rbegin(); it != m.order.rend(); ++it) {
    const Spec& s = m.specs.at(*it);
    std::vector<uint64_t> ne(s.dims.begin(), s.dims.end());
    g.tensors.push_back({*it, ne, s.ggml_type, s.bytes, std::nullopt});
  }
  return m;
}

std::string WriteModel(const TinyModel& m, const std::string& name) {
  const std::vector<uint8_t> bytes = m.builder.Build();
  const std::string path = TempPath(name);
  WriteFileBytes(path, bytes.data(), bytes.size());
  return path;
}

void CheckTensors(const SourceModel& model, const TinyModel& tiny) {
  REQUIRE(model.tensors.size() == tiny.order.size());
  for (size_t i = 0; i < tiny.order.size(); ++i) {
    const SourceTensor& t = model.tensors[i];
    const Spec& s = tiny.specs.at(tiny.order[i]);
    INFO("tensor " << tiny.order[i]);
    CHECK(t.name == tiny.order[i]);
    CHECK(t.dims == s.dims);
    CHECK(t.source_dtype == KestrelType(s.ggml_type));
    REQUIRE(t.raw != nullptr);
    CHECK(std::memcmp(t.raw, s.bytes.data(), s.bytes.size()) == 0);
    std::vector<float> got(s.expected.size(), -999.0f);
    REQUIRE(t.read_f32(got.data()).ok());
    CHECK(got == s.expected);
    // The same values through Kestrel's codec, row by row.
    const DType dt = KestrelType(s.ggml_type);
    const int64_t columns = t.columns();
    std::vector<float> row(static_cast<size_t>(columns));
    bool same = true;
    for (int64_t r = 0; r < t.rows(); ++r) {
      DequantizeRow(dt, s.bytes.data() + DTypeRowBytes(dt, columns) * r, row.data(), columns);
      same = same && std::equal(row.begin(), row.end(), got.begin() + r * columns);
    }
    CHECK(same);
  }
}

TEST_CASE("LoadGguf reads a tiny llama with Q8_0, F16, BF16 and F32 tensors", "[convert][gguf]") {
  const TinyModel tiny = MakeTinyModel("llama");
  auto model = LoadGguf(WriteModel(tiny, "tiny-llama.gguf"));
  REQUIRE(model.ok());
  const ModelConfig& c = model->config;
  CHECK(c.architecture == Architecture::kLlama);
  CHECK(c.name == "tiny-llama");
  CHECK(c.dim == kDim);
  CHECK(c.n_layers == kLayers);
  CHECK(c.n_heads == kHeads);
  CHECK(c.n_kv_heads == kKvHeads);
  CHECK(c.head_dim == 16);
  CHECK(c.ffn_dim == kFfn);
  CHECK(c.vocab_size == kVocab);
  CHECK(c.context_length == 2048);
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rope_style == RopeStyle::kInterleaved);
  CHECK(c.norm_eps == 1e-5f);
  CHECK_FALSE(c.tied_embeddings);
  CHECK_FALSE(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CheckTensors(*model, tiny);
  CHECK(model->mappings.size() == 1);

  const TokenizerData& tok = model->tokenizer;
  CHECK(tok.type == "llama2c");
  CHECK(tok.tokens == tiny.tokens);
  REQUIRE(tok.scores.size() == static_cast<size_t>(kVocab));
  CHECK(tok.scores[0] == 0.0f);
  CHECK(tok.scores[7] == -3.5f);
  REQUIRE(tok.token_types.size() == static_cast<size_t>(kVocab));
  CHECK(tok.token_types[0] == static_cast<int32_t>(TokenType::kUnknown));
  CHECK(tok.token_types[1] == static_cast<int32_t>(TokenType::kControl));
  CHECK(tok.token_types[3] == static_cast<int32_t>(TokenType::kByte));
  CHECK(tok.token_types[5] == static_cast<int32_t>(TokenType::kUserDefined));
  CHECK(tok.token_types[6] == static_cast<int32_t>(TokenType::kNormal));
  CHECK(tok.bos_id == 1);
  CHECK(tok.eos_id == 2);
  CHECK(tok.unk_id == 0);
  CHECK(tok.pad_id == -1);
  CHECK(tok.add_bos);  // default for the "llama" tokenizer
  CHECK(tok.merges.empty());
  CHECK(tok.chat_template.empty());
}

TEST_CASE("LoadGguf reads a tiny qwen3 with Q4_0 tensors, qk norms and tied embeddings", "[convert][gguf]") {
  const TinyModel tiny = MakeTinyModel("qwen3");
  auto model = LoadGguf(WriteModel(tiny, "tiny-qwen3.gguf"));
  REQUIRE(model.ok());
  const ModelConfig& c = model->config;
  CHECK(c.architecture == Architecture::kQwen3);
  CHECK(c.head_dim == 32);
  CHECK(c.n_kv_heads == kKvHeads);
  CHECK(c.vocab_size == kVocab);
  CHECK(c.context_length == 4096);
  CHECK(c.rope_theta == 1000000.0f);
  CHECK(c.rope_style == RopeStyle::kHalfSplit);
  CHECK(c.norm_eps == 1e-6f);
  CHECK(c.tied_embeddings);
  CHECK(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CheckTensors(*model, tiny);
  CHECK(model->tensors.back().name == "output_norm.weight");

  const TokenizerData& tok = model->tokenizer;
  CHECK(tok.type == "bpe");
  CHECK(tok.pre_tokenizer == "qwen2");
  CHECK(tok.merges == std::vector<std::string>{"t o", "to k", "tok 1"});
  // 38 tokens for 40 embedding rows: the last two ids are padding.
  REQUIRE(tok.tokens.size() == static_cast<size_t>(kVocab));
  CHECK(std::equal(tiny.tokens.begin(), tiny.tokens.end(), tok.tokens.begin()));
  CHECK(tok.tokens[39].empty());
  CHECK(tok.token_types[39] == static_cast<int32_t>(TokenType::kUnknown));
  CHECK(tok.scores.empty());
  CHECK(tok.eos_id == 2);
  CHECK(tok.pad_id == 1);
  CHECK(tok.bos_id == -1);
  CHECK(tok.eos_ids == std::vector<int32_t>{5});
  CHECK_FALSE(tok.add_bos);  // default for "gpt2"
  CHECK(tok.chat_template == "{% for m in messages %}{{ m.content }}{% endfor %}");
}

TEST_CASE("LoadGguf reads a tiny qwen2 with q/k/v biases", "[convert][gguf]") {
  const TinyModel tiny = MakeTinyModel("qwen2");
  auto model = LoadGguf(WriteModel(tiny, "tiny-qwen2.gguf"));
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  const ModelConfig& c = model->config;
  CHECK(c.architecture == Architecture::kQwen2);
  CHECK(c.head_dim == 16);
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rope_style == RopeStyle::kHalfSplit);
  CHECK(c.qkv_bias);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.tied_embeddings);
  CheckTensors(*model, tiny);
  CHECK(model->tensors[5].name == "blk.0.attn_q.bias");
  CHECK(model->tensors[5].dims == std::vector<int64_t>{64});
  CHECK(model->tensors[6].dims == std::vector<int64_t>{32});
}

// Reads every tensor of a VQF file back as f32 rows, whatever its dtype and layout.
std::vector<float> ReadVqfTensor(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  for (int64_t r = 0; r < t.rows(); ++r) {
    DequantizeMatrixRow(t.dtype, t.layout, t.data, t.columns(), r, out.data() + r * t.columns());
  }
  return out;
}

TEST_CASE("GGUF models convert to VQF: f32 exactly, same quant type byte for byte", "[convert][gguf]") {
  for (const std::string arch : {"llama", "qwen3", "qwen2"}) {
    INFO("arch " << arch);
    const TinyModel tiny = MakeTinyModel(arch);
    auto model = LoadGguf(WriteModel(tiny, "convert-" + arch + ".gguf"));
    REQUIRE(model.ok());
    const DType quant = arch == "llama" ? DType::kQ8_0 : DType::kQ4_0;

    // f32: every value equals the source's decoded value.
    const std::string f32_path = TempPath("convert-" + arch + "-f32.vqf");
    ConvertOptions f32_options;
    f32_options.type = DType::kF32;
    ConvertSummary summary;
    auto status = ConvertModel(*model, f32_path, f32_options, &summary);
    REQUIRE(status.ok());
    CHECK(summary.tensors == tiny.order.size());
    auto f32_file = VqfFile::Open(f32_path);
    REQUIRE(f32_file.ok());
    auto config = ModelConfig::FromMetadata((*f32_file)->metadata());
    REQUIRE(config.ok());
    CHECK(config->dim == kDim);
    CHECK(config->head_dim == model->config.head_dim);
    CHECK(config->rope_style == model->config.rope_style);
    CHECK(config->tied_embeddings == model->config.tied_embeddings);
    auto tokenizer = TokenizerData::FromMetadata((*f32_file)->metadata());
    REQUIRE(tokenizer.ok());
    CHECK(tokenizer->tokens == model->tokenizer.tokens);
    CHECK(tokenizer->merges == model->tokenizer.merges);
    REQUIRE((*f32_file)->tensors().size() == tiny.order.size());
    for (const std::string& name : tiny.order) {
      INFO("tensor " << name);
      const TensorInfo* t = (*f32_file)->Find(name);
      REQUIRE(t != nullptr);
      CHECK(t->dtype == DType::kF32);
      CHECK(t->dims == tiny.specs.at(name).dims);
      CHECK(ReadVqfTensor(*t) == tiny.specs.at(name).expected);
    }

    // The source's quant type, plain and tiled: tensors stored in that type keep their exact values
    // (plain: the exact bytes); 1-D tensors stay f32.
    for (LayoutChoice layout : {LayoutChoice::kPlain, LayoutChoice::kTiled, LayoutChoice::kAuto}) {
      INFO("layout choice " << static_cast<int>(layout));
      const std::string path = TempPath("convert-" + arch + "-quant.vqf");
      ConvertOptions options;
      options.type = quant;
      options.layout = layout;
      REQUIRE(ConvertModel(*model, path, options, nullptr).ok());
      auto file = VqfFile::Open(path);
      REQUIRE(file.ok());
      int lossless = 0;
      for (const std::string& name : tiny.order) {
        INFO("tensor " << name);
        const Spec& s = tiny.specs.at(name);
        const TensorInfo* t = (*file)->Find(name);
        REQUIRE(t != nullptr);
        if (s.dims.size() == 1) {
          CHECK(t->dtype == DType::kF32);
          CHECK(ReadVqfTensor(*t) == s.expected);
          continue;
        }
        CHECK(t->dtype == quant);
        // auto tiles exactly where tiled would (rows filling whole tiles); plain never does.
        const bool fills_tiles = s.dims[1] % LayoutTileRows(quant == DType::kQ4_0 ? Layout::kQ4_0x4 : Layout::kQ8_0x8) == 0;
        CHECK((t->layout != Layout::kPlain) == (layout != LayoutChoice::kPlain && fills_tiles));
        if (KestrelType(s.ggml_type) != quant) continue;
        ++lossless;
        CHECK(ReadVqfTensor(*t) == s.expected);
        if (t->layout == Layout::kPlain) {
          REQUIRE(t->bytes == s.bytes.size());
          CHECK(std::memcmp(t->data, s.bytes.data(), s.bytes.size()) == 0);
        }
      }
      CHECK(lossless >= 8);
    }
  }
}

TEST_CASE("GGUF models convert with each matrix's own dtype when no type is requested", "[convert][gguf]") {
  // The default a user gets from `kestrel-convert model.gguf -o model.vqf`: nothing re-encoded.
  for (const std::string arch : {"llama", "qwen3", "qwen2"}) {
    INFO("arch " << arch);
    const TinyModel tiny = MakeTinyModel(arch);
    auto model = LoadGguf(WriteModel(tiny, "convert-source-" + arch + ".gguf"));
    REQUIRE(model.ok());
    const std::string path = TempPath("convert-source-" + arch + ".vqf");
    ConvertOptions options;
    options.layout = LayoutChoice::kPlain;
    REQUIRE(!options.type.has_value());
    ConvertSummary summary;
    REQUIRE(ConvertModel(*model, path, options, &summary).ok());
    CHECK(summary.deviations.empty());
    auto file = VqfFile::Open(path);
    REQUIRE(file.ok());
    auto requested = (*file)->metadata().GetString("general.requested_type");
    REQUIRE(requested.ok());
    CHECK(*requested == "source");
    std::set<DType> kinds;
    for (const std::string& name : tiny.order) {
      INFO("tensor " << name);
      const Spec& s = tiny.specs.at(name);
      const TensorInfo* t = (*file)->Find(name);
      REQUIRE(t != nullptr);
      CHECK(ReadVqfTensor(*t) == s.expected);
      if (s.dims.size() == 1) {
        CHECK(t->dtype == DType::kF32);
        continue;
      }
      CHECK(t->dtype == KestrelType(s.ggml_type));
      kinds.insert(t->dtype);
      REQUIRE(t->bytes == s.bytes.size());
      CHECK(std::memcmp(t->data, s.bytes.data(), s.bytes.size()) == 0);
    }
    CHECK(kinds.size() >= 3);  // the tiny models mix quantized, f16 and bf16 matrices
  }
}

// ---- Corrupt and unsupported files ----

absl::Status LoadBytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = TempPath(name);
  WriteFileBytes(path, bytes.data(), bytes.size());
  auto model = LoadGguf(path);
  return model.status();
}

TEST_CASE("LoadGguf refuses bad magic, unsupported versions and missing files", "[convert][gguf]") {
  std::vector<uint8_t> bytes = MakeTinyModel("llama").builder.Build();
  REQUIRE(LoadBytes(bytes, "ok.gguf").ok());

  std::vector<uint8_t> magic = bytes;
  magic[3] = 'X';
  absl::Status s = LoadBytes(magic, "magic.gguf");
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("magic.gguf") && Catch::Contains("magic"));

  for (uint32_t version : {0u, 1u, 4u}) {
    TinyModel tiny = MakeTinyModel("llama");
    tiny.builder.version = version;
    s = LoadBytes(tiny.builder.Build(), "version.gguf");
    CHECK_FALSE(s.ok());
    CHECK_THAT(std::string(s.message()), Catch::Contains("version " + std::to_string(version)));
  }
  TinyModel v2 = MakeTinyModel("llama");
  v2.builder.version = 2;
  CHECK(LoadBytes(v2.builder.Build(), "v2.gguf").ok());

  auto missing = LoadGguf(TempPath("does-not-exist.gguf"));
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("LoadGguf refuses every truncation of a valid file", "[convert][gguf]") {
  size_t infos_start = 0, data_start = 0;
  const std::vector<uint8_t> bytes = MakeTinyModel("qwen3").builder.Build(&infos_start, &data_start);
  REQUIRE(infos_start > 24);
  REQUIRE(data_start > infos_start);
  // Every length through the header, metadata and tensor infos, then points through the data.
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= data_start; ++n) lengths.push_back(n);
  for (size_t n = data_start + 1; n < bytes.size(); n += 997) lengths.push_back(n);
  lengths.push_back(bytes.size() - 1);
  int failures = 0;
  for (size_t n : lengths) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const absl::Status s = LoadBytes(cut, "cut.gguf");
    if (s.ok() || s.message().empty()) {
      FAIL_CHECK("truncated to " << n << " of " << bytes.size() << " bytes was accepted");
      ++failures;
    }
  }
  CHECK(failures == 0);
  // The message says what happened.
  const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(infos_start + 5));
  CHECK_THAT(std::string(LoadBytes(cut, "cut.gguf").message()), Catch::Contains("truncated"));
  const std::vector<uint8_t> cut_data(bytes.begin(), bytes.end() - 1);
  CHECK_THAT(std::string(LoadBytes(cut_data, "cut.gguf").message()), Catch::Contains("past the end"));
}

TEST_CASE("LoadGguf refuses bad tensors: offset past the end, unsupported type, wrong shape, missing", "[convert][gguf]") {
  {
    TinyModel tiny = MakeTinyModel("llama");
    for (GgufTensor& t : tiny.builder.tensors) {
      if (t.name == "blk.1.ffn_down.weight") t.offset_override = 1ull << 40;
    }
    const absl::Status s = LoadBytes(tiny.builder.Build(), "offset.gguf");
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("blk.1.ffn_down.weight") && Catch::Contains("past the end"));
  }
  {
    // An offset that overflows 64 bits when added to the data start.
    TinyModel tiny = MakeTinyModel("llama");
    for (GgufTensor& t : tiny.builder.tensors) {
      if (t.name == "output.weight") t.offset_override = ~uint64_t{0} - 31;
    }
    CHECK_FALSE(LoadBytes(tiny.builder.Build(), "offset2.gguf").ok());
  }
  {
    TinyModel tiny = MakeTinyModel("llama");
    for (GgufTensor& t : tiny.builder.tensors) {
      if (t.name == "blk.0.attn_q.weight") t.type = kQ4_K;
    }
    const absl::Status s = LoadBytes(tiny.builder.Build(), "model.gguf");
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()) ==
          "model.gguf: tensor 'blk.0.attn_q.weight' has unsupported ggml type 12 (Q4_K); supported: F32, F16, "
          "BF16, Q8_0, Q4_0");
  }
  {
    TinyModel tiny = MakeTinyModel("qwen3");
    for (GgufTensor& t : tiny.builder.tensors) {
      if (t.name == "blk.1.attn_k.weight") t.ne = {kDim, 32};
    }
    const absl::Status s = LoadBytes(tiny.builder.Build(), "shape.gguf");
    CHECK_THAT(std::string(s.message()), Catch::Contains("blk.1.attn_k.weight") && Catch::Contains("{64, 32}") &&
                                             Catch::Contains("expected {64, 64}"));
  }
  {
    TinyModel tiny = MakeTinyModel("qwen3");
    auto& ts = tiny.builder.tensors;
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](const GgufTensor& t) { return t.name == "blk.1.attn_q_norm.weight"; }),
             ts.end());
    const absl::Status s = LoadBytes(tiny.builder.Build(), "missing.gguf");
    CHECK_THAT(std::string(s.message()), Catch::Contains("missing tensor 'blk.1.attn_q_norm.weight'"));
  }
}

TEST_CASE("LoadGguf refuses huge counts and lengths without allocating", "[convert][gguf]") {
  {
    TinyModel tiny = MakeTinyModel("llama");
    GgufBuilder& g = tiny.builder;
    g.Key("evil.array", 9);
    Put<uint32_t>(&g.kv, 5);
    Put<uint64_t>(&g.kv, uint64_t{1} << 61);
    const absl::Status s = LoadBytes(g.Build(), "array.gguf");
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("evil.array"));
  }
  {
    TinyModel tiny = MakeTinyModel("llama");
    GgufBuilder& g = tiny.builder;
    g.Key("evil.strings", 9);
    Put<uint32_t>(&g.kv, 8);
    Put<uint64_t>(&g.kv, ~uint64_t{0});
    CHECK_FALSE(LoadBytes(g.Build(), "strings.gguf").ok());
  }
  {
    TinyModel tiny = MakeTinyModel("llama");
    GgufBuilder& g = tiny.builder;
    g.Key("evil.string", 8);
    Put<uint64_t>(&g.kv, ~uint64_t{0} - 3);
    CHECK_THAT(std::string(LoadBytes(g.Build(), "string.gguf").message()), Catch::Contains("truncated"));
  }
  {
    std::vector<uint8_t> bytes = MakeTinyModel("llama").builder.Build();
    const uint64_t huge = uint64_t{1} << 60;
    std::memcpy(&bytes[8], &huge, 8);  // tensor count
    CHECK_THAT(std::string(LoadBytes(bytes, "tensors.gguf").message()), Catch::Contains("tensor count"));
    bytes = MakeTinyModel("llama").builder.Build();
    std::memcpy(&bytes[16], &huge, 8);  // metadata count
    CHECK_THAT(std::string(LoadBytes(bytes, "kvs.gguf").message()), Catch::Contains("metadata count"));
  }
  {
    TinyModel tiny = MakeTinyModel("llama");
    tiny.builder.Key("nested", 9);
    Put<uint32_t>(&tiny.builder.kv, 9);
    Put<uint64_t>(&tiny.builder.kv, 1);
    CHECK_THAT(std::string(LoadBytes(tiny.builder.Build(), "nested.gguf").message()), Catch::Contains("nested"));
  }
  {
    TinyModel tiny = MakeTinyModel("llama");
    tiny.builder.Key("weird", 77);
    CHECK_THAT(std::string(LoadBytes(tiny.builder.Build(), "weird.gguf").message()),
               Catch::Contains("unknown value type 77"));
  }
}

TEST_CASE("LoadGguf refuses unsupported architectures and tokenizers, and bad metadata types", "[convert][gguf]") {
  {
    TinyModel tiny = MakeTinyModel("llama");
    tiny.builder.String("general.architecture", "gemma");  // duplicate key
    CHECK_THAT(std::string(LoadBytes(tiny.builder.Build(), "dup.gguf").message()), Catch::Contains("duplicate"));
  }
  {
    TinyModel tiny = MakeTinyModel("llama", "bert");
    const absl::Status s = LoadBytes(tiny.builder.Build(), "bert.gguf");
    CHECK_THAT(std::string(s.message()), Catch::Contains("unsupported tokenizer model 'bert'"));
  }
  {
    GgufBuilder g;
    g.String("general.architecture", "gemma");
    const std::vector<uint8_t> bytes = g.Build();
    const absl::Status s = LoadBytes(bytes, "gemma.gguf");
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("gemma.gguf") && Catch::Contains("unsupported architecture 'gemma'"));
  }
  {
    GgufBuilder g;
    g.U32("general.architecture", 3);
    CHECK_THAT(std::string(LoadBytes(g.Build(), "archtype.gguf").message()), Catch::Contains("expected a string"));
  }
}

}  // namespace
}  // namespace kestrel::convert
