// GGUF importer: parses a GGUF v2/v3 file (llama, qwen2, qwen3) into a SourceModel whose tensors
// read straight from the mapping. Every count, length and offset is checked against the file size
// before it is used, so a corrupt file gives an error naming the file and the problem, never a crash.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "convert/source_model.h"
#include "format/dtype.h"
#include "format/mapped_file.h"
#include "format/model_config.h"

namespace kestrel::convert {
namespace {

// GGUF metadata value types.
enum GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;

const char* GgufTypeName(uint32_t t) {
  static const char* const kNames[kGgufTypeCount] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
  return t < kGgufTypeCount ? kNames[t] : "unknown";
}

uint64_t GgufScalarBytes(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

// ggml tensor types Kestrel reads, and names for the ones it does not (for error messages).
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlBF16 = 30;

std::optional<DType> DTypeFromGgml(uint32_t t) {
  switch (t) {
    case kGgmlF32: return DType::kF32;
    case kGgmlF16: return DType::kF16;
    case kGgmlQ4_0: return DType::kQ4_0;
    case kGgmlQ8_0: return DType::kQ8_0;
    case kGgmlBF16: return DType::kBF16;
    default: return std::nullopt;
  }
}

const char* GgmlTypeName(uint32_t t) {
  static const char* const kNames[] = {
      "F32",  "F16",     "Q4_0",   "Q4_1",    "Q4_2", "Q4_3", "Q5_0",  "Q5_1",   "Q8_0",  "Q8_1",
      "Q2_K", "Q3_K",    "Q4_K",   "Q5_K",    "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S",  "IQ4_XS",  "I8",   "I16",  "I32",   "I64",    "F64",   "IQ1_M",
      "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8",
      "MXFP4"};
  return t < sizeof(kNames) / sizeof(kNames[0]) ? kNames[t] : "unknown";
}

// One metadata value. Arrays keep their elements as strings or numbers (nested arrays are refused,
// as llama.cpp does).
struct GgufValue {
  uint32_t type = 0;
  uint64_t u = 0;  // unsigned integers and bools
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string s;
  uint32_t element_type = 0;  // arrays
  std::vector<std::string> strings;
  std::vector<double> numbers;

  bool IsSigned() const { return type == kI8 || type == kI16 || type == kI32 || type == kI64; }
};

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const std::string& file, const uint8_t* base, uint64_t size) : file_(file), base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ": truncated: ", what, " needs ", n, " bytes at offset ",
                                                     pos_, " but the file has ", size_, " bytes"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(T* out, const std::string& what) {
    if (absl::Status s = Need(sizeof(T), what); !s.ok()) return s;
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, const std::string& what) {
    uint64_t length = 0;
    if (absl::Status s = Read(&length, what + " length"); !s.ok()) return s;
    if (absl::Status s = Need(length, what); !s.ok()) return s;
    out->assign(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(length));
    pos_ += length;
    return absl::OkStatus();
  }

 private:
  const std::string& file_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t ggml_type = 0;
  uint64_t offset = 0;  // relative to the data section
};

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class GgufParser {
 public:
  GgufParser(std::string path, std::shared_ptr<MappedFile> mapping)
      : path_(std::move(path)),
        name_(BaseName(path_)),
        mapping_(std::move(mapping)),
        cursor_(name_, mapping_->data(), mapping_->size()) {}

  absl::StatusOr<SourceModel> Load();

 private:
  absl::Status Bad(const std::string& what) const { return absl::InvalidArgumentError(absl::StrCat(name_, ": ", what)); }

  absl::Status ParseHeader();
  absl::Status ReadValue(uint32_t type, GgufValue* out, const std::string& key);
  absl::Status ParseTensorInfos();
  absl::Status BuildConfig(SourceModel* model);
  absl::Status BuildTensors(SourceModel* model);
  absl::Status BuildTokenizer(SourceModel* model);

  const GgufValue* Find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }
  // Integer key; `fallback` when absent (NotFound error when absent and no fallback).
  absl::StatusOr<int64_t> GetInt(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  // A model dimension: an integer in [1, 2^30].
  absl::StatusOr<int32_t> GetDimension(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  absl::StatusOr<double> GetFloat(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<const GgufValue*> GetArray(const std::string& key, bool strings) const;

  std::string path_;
  std::string name_;  // file name used in messages
  std::shared_ptr<MappedFile> mapping_;
  Cursor cursor_;
  uint32_t version_ = 0;
  uint64_t tensor_count_ = 0, kv_count_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> infos_;
  std::map<std::string, size_t> info_index_;
  uint64_t data_start_ = 0;
  std::string arch_;
};

absl::Status GgufParser::ParseHeader() {
  uint8_t magic[4];
  for (uint8_t& b : magic) {
    if (absl::Status s = cursor_.Read(&b, "magic"); !s.ok()) return s;
  }
  if (std::memcmp(magic, "GGUF", 4) != 0) return Bad("not a GGUF file (bad magic)");
  if (absl::Status s = cursor_.Read(&version_, "version"); !s.ok()) return s;
  if (version_ != 2 && version_ != 3) {
    if (version_ == 0x02000000u || version_ == 0x03000000u) return Bad("big-endian GGUF files are not supported");
    return Bad(absl::StrCat("GGUF version ", version_, " is not supported (supported: 2, 3)"));
  }
  if (absl::Status s = cursor_.Read(&tensor_count_, "tensor count"); !s.ok()) return s;
  if (absl::Status s = cursor_.Read(&kv_count_, "metadata count"); !s.ok()) return s;
  // Each tensor info takes at least 24 bytes (name length, n_dims, type, offset), each KV at least 12.
  if (tensor_count_ > cursor_.remaining() / 24) {
    return Bad(absl::StrCat("tensor count ", tensor_count_, " is impossible for a file of ", mapping_->size(), " bytes"));
  }
  if (kv_count_ > cursor_.remaining() / 12) {
    return Bad(absl::StrCat("metadata count ", kv_count_, " is impossible for a file of ", mapping_->size(), " bytes"));
  }
  for (uint64_t k = 0; k < kv_count_; ++k) {
    std::string key;
    if (absl::Status s = cursor_.ReadString(&key, absl::StrCat("metadata key #", k)); !s.ok()) return s;
    uint32_t type = 0;
    if (absl::Status s = cursor_.Read(&type, absl::StrCat("type of '", key, "'")); !s.ok()) return s;
    GgufValue value;
    if (absl::Status s = ReadValue(type, &value, key); !s.ok()) return s;
    if (!kv_.emplace(key, std::move(value)).second) return Bad(absl::StrCat("duplicate metadata key '", key, "'"));
  }
  return absl::OkStatus();
}

absl::Status GgufParser::ReadValue(uint32_t type, GgufValue* out, const std::string& key) {
  out->type = type;
  const std::string what = absl::StrCat("value of '", key, "'");
  switch (type) {
    case kU8: { uint8_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->u = v; return absl::OkStatus(); }
    case kI8: { int8_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->i = v; return absl::OkStatus(); }
    case kU16: { uint16_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->u = v; return absl::OkStatus(); }
    case kI16: { int16_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->i = v; return absl::OkStatus(); }
    case kU32: { uint32_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->u = v; return absl::OkStatus(); }
    case kI32: { int32_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->i = v; return absl::OkStatus(); }
    case kU64: { uint64_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->u = v; return absl::OkStatus(); }
    case kI64: { int64_t v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->i = v; return absl::OkStatus(); }
    case kF32: { float v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->f = v; return absl::OkStatus(); }
    case kF64: { double v; if (auto s = cursor_.Read(&v, what); !s.ok()) return s; out->f = v; return absl::OkStatus(); }
    case kBool: {
      uint8_t v;
      if (auto s = cursor_.Read(&v, what); !s.ok()) return s;
      if (v > 1) return Bad(absl::StrCat("metadata '", key, "': bool value ", v, " is neither 0 nor 1"));
      out->u = v;
      return absl::OkStatus();
    }
    case kString: return cursor_.ReadString(&out->s, what);
    case kArray: {
      uint64_t count = 0;
      if (auto s = cursor_.Read(&out->element_type, absl::StrCat("element type of '", key, "'")); !s.ok()) return s;
      if (auto s = cursor_.Read(&count, absl::StrCat("element count of '", key, "'")); !s.ok()) return s;
      const uint32_t et = out->element_type;
      if (et == kArray) return Bad(absl::StrCat("metadata '", key, "': nested arrays are not supported"));
      if (et >= kGgufTypeCount) return Bad(absl::StrCat("metadata '", key, "': unknown array element type ", et));
      // A string takes at least its 8-byte length, so both checks bound the allocation by the file size.
      const uint64_t min_element_bytes = et == kString ? 8 : GgufScalarBytes(et);
      if (count > cursor_.remaining() / min_element_bytes) {
        return Bad(absl::StrCat("metadata '", key, "': array of ", count, " ", GgufTypeName(et),
                                " elements does not fit in the ", cursor_.remaining(), " bytes left in the file"));
      }
      if (et == kString) {
        // Grow as elements are read, so memory stays proportional to what the file really holds.
        out->strings.reserve(static_cast<size_t>(std::min<uint64_t>(count, 1u << 20)));
        for (uint64_t j = 0; j < count; ++j) {
          std::string element;
          if (auto s = cursor_.ReadString(&element, absl::StrCat("'", key, "'[", j, "]")); !s.ok()) return s;
          out->strings.push_back(std::move(element));
        }
        return absl::OkStatus();
      }
      out->numbers.reserve(static_cast<size_t>(std::min<uint64_t>(count, 1u << 20)));
      for (uint64_t j = 0; j < count; ++j) {
        GgufValue element;
        if (auto s = ReadValue(et, &element, key); !s.ok()) return s;
        out->numbers.push_back(et == kF32 || et == kF64 ? element.f
                          : element.IsSigned()     ? static_cast<double>(element.i)
                                                   : static_cast<double>(element.u));
      }
      return absl::OkStatus();
    }
    default:
      return Bad(absl::StrCat("metadata '", key, "' has unknown value type ", type));
  }
}

absl::Status GgufParser::ParseTensorInfos() {
  if (tensor_count_ > cursor_.remaining() / 24) {
    return Bad(absl::StrCat("truncated: tensor count ", tensor_count_, " does not fit in the ", cursor_.remaining(),
                            " bytes left after the metadata"));
  }
  infos_.reserve(static_cast<size_t>(tensor_count_));
  for (uint64_t k = 0; k < tensor_count_; ++k) {
    infos_.emplace_back();
    GgufTensorInfo& info = infos_.back();
    if (auto s = cursor_.ReadString(&info.name, absl::StrCat("name of tensor #", k)); !s.ok()) return s;
    const std::string what = absl::StrCat("tensor '", info.name, "'");
    uint32_t n_dims = 0;
    if (auto s = cursor_.Read(&n_dims, what + " dimension count"); !s.ok()) return s;
    if (n_dims == 0 || n_dims > 4) return Bad(absl::StrCat(what, " has ", n_dims, " dimensions (expected 1 to 4)"));
    info.ne.resize(n_dims);
    for (uint64_t& d : info.ne) {
      if (auto s = cursor_.Read(&d, what + " shape"); !s.ok()) return s;
      if (d == 0 || d > (1ull << 40)) return Bad(absl::StrCat(what, " has an invalid dimension ", d));
    }
    if (auto s = cursor_.Read(&info.ggml_type, what + " type"); !s.ok()) return s;
    if (auto s = cursor_.Read(&info.offset, what + " offset"); !s.ok()) return s;
    if (!info_index_.emplace(info.name, k).second) return Bad(absl::StrCat("duplicate tensor '", info.name, "'"));
  }
  uint64_t alignment = 32;
  if (Find("general.alignment") != nullptr) {
    auto a = GetInt("general.alignment");
    if (!a.ok()) return a.status();
    if (*a <= 0 || *a > (1 << 20) || (*a & (*a - 1)) != 0) {
      return Bad(absl::StrCat("general.alignment ", *a, " is not a power of two up to 1 MiB"));
    }
    alignment = static_cast<uint64_t>(*a);
  }
  data_start_ = (cursor_.pos() + alignment - 1) / alignment * alignment;
  if (data_start_ > mapping_->size()) {
    return Bad(absl::StrCat("truncated: the tensor data section would start at offset ", data_start_,
                            " but the file has ", mapping_->size(), " bytes"));
  }
  for (const GgufTensorInfo& info : infos_) {
    if (info.offset % alignment != 0) {
      return Bad(absl::StrCat("tensor '", info.name, "' offset ", info.offset, " is not a multiple of the alignment ",
                              alignment));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GgufParser::GetInt(const std::string& key, std::optional<int64_t> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return absl::NotFoundError(absl::StrCat(name_, ": missing metadata key '", key, "'"));
  }
  switch (v->type) {
    case kU8: case kU16: case kU32: case kU64:
      if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Bad(absl::StrCat("metadata '", key, "' = ", v->u, " is out of range"));
      }
      return static_cast<int64_t>(v->u);
    case kI8: case kI16: case kI32: case kI64:
      return v->i;
    default:
      return Bad(absl::StrCat("metadata '", key, "' is ", GgufTypeName(v->type), ", expected an integer"));
  }
}

absl::StatusOr<int32_t> GgufParser::GetDimension(const std::string& key, std::optional<int64_t> fallback) const {
  auto v = GetInt(key, fallback);
  if (!v.ok()) return v.status();
  if (*v < 1 || *v > (1 << 30)) return Bad(absl::StrCat("metadata '", key, "' = ", *v, " is out of range"));
  return static_cast<int32_t>(*v);
}

absl::StatusOr<double> GgufParser::GetFloat(const std::string& key, std::optional<double> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return absl::NotFoundError(absl::StrCat(name_, ": missing metadata key '", key, "'"));
  }
  if (v->type == kF32 || v->type == kF64) return v->f;
  auto i = GetInt(key);
  if (!i.ok()) return Bad(absl::StrCat("metadata '", key, "' is ", GgufTypeName(v->type), ", expected a number"));
  return static_cast<double>(*i);
}

absl::StatusOr<std::string> GgufParser::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(name_, ": missing metadata key '", key, "'"));
  if (v->type != kString) return Bad(absl::StrCat("metadata '", key, "' is ", GgufTypeName(v->type), ", expected a string"));
  return v->s;
}

absl::StatusOr<const GgufValue*> GgufParser::GetArray(const std::string& key, bool strings) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(name_, ": missing metadata key '", key, "'"));
  if (v->type != kArray || (v->element_type == kString) != strings) {
    return Bad(absl::StrCat("metadata '", key, "' is not an array of ", strings ? "strings" : "numbers"));
  }
  return v;
}

absl::Status GgufParser::BuildConfig(SourceModel* model) {
  auto arch = GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  arch_ = *arch;
  auto architecture = ArchitectureFromName(arch_);
  if (!architecture.ok()) return Bad(std::string(architecture.status().message()));
  ModelConfig& c = model->config;
  c.architecture = *architecture;
  if (auto n = GetString("general.name"); n.ok()) c.name = *n;
  const std::string p = arch_ + ".";
  auto dim = GetDimension(p + "embedding_length");
  auto layers = GetDimension(p + "block_count");
  auto heads = GetDimension(p + "attention.head_count");
  auto ffn = GetDimension(p + "feed_forward_length");
  auto context = GetDimension(p + "context_length");
  for (const absl::Status& s : {dim.status(), layers.status(), heads.status(), ffn.status(), context.status()}) {
    if (!s.ok()) return s;
  }
  auto kv_heads = GetDimension(p + "attention.head_count_kv", *heads);
  if (!kv_heads.ok()) return kv_heads.status();
  auto head_dim = GetDimension(p + "attention.key_length", *dim / *heads > 0 ? *dim / *heads : 1);
  if (!head_dim.ok()) return head_dim.status();
  auto value_length = GetDimension(p + "attention.value_length", *head_dim);
  if (!value_length.ok()) return value_length.status();
  if (*value_length != *head_dim) {
    return Bad(absl::StrCat("attention.value_length ", *value_length, " differs from key_length ", *head_dim,
                            " (not supported)"));
  }
  auto rope_dims = GetDimension(p + "rope.dimension_count", *head_dim);
  if (!rope_dims.ok()) return rope_dims.status();
  if (*rope_dims != *head_dim) {
    return Bad(absl::StrCat("rope.dimension_count ", *rope_dims, " differs from the head size ", *head_dim,
                            " (partial rotary embeddings are not supported)"));
  }
  auto theta = GetFloat(p + "rope.freq_base", 10000.0);
  auto eps = GetFloat(p + "attention.layer_norm_rms_epsilon");
  if (!theta.ok()) return theta.status();
  if (!eps.ok()) return eps.status();
  c.dim = *dim;
  c.n_layers = *layers;
  c.n_heads = *heads;
  c.n_kv_heads = *kv_heads;
  c.head_dim = *head_dim;
  c.ffn_dim = *ffn;
  c.context_length = *context;
  c.rope_theta = static_cast<float>(*theta);
  c.norm_eps = static_cast<float>(*eps);
  // llama.cpp's converter permutes llama's Q/K rows so adjacent pairs rotate; Qwen keeps the HF layout.
  c.rope_style = c.architecture == Architecture::kLlama ? RopeStyle::kInterleaved : RopeStyle::kHalfSplit;
  c.qkv_bias = c.architecture == Architecture::kQwen2;
  c.qk_norm = c.architecture == Architecture::kQwen3;
  c.tied_embeddings = info_index_.count("output.weight") == 0;
  auto embd = info_index_.find("token_embd.weight");
  if (embd == info_index_.end()) return Bad("missing tensor 'token_embd.weight'");
  const GgufTensorInfo& e = infos_[embd->second];
  if (e.ne.size() < 2 || e.ne[1] > (1u << 30)) return Bad("tensor 'token_embd.weight' must be 2-D {dim, vocab}");
  c.vocab_size = static_cast<int32_t>(e.ne[1]);
  if (absl::Status s = c.Validate(); !s.ok()) return Bad(std::string(s.message()));
  return absl::OkStatus();
}

absl::Status GgufParser::BuildTensors(SourceModel* model) {
  const ModelConfig& c = model->config;
  const int64_t dim = c.dim, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t ffn = c.ffn_dim, vocab = c.vocab_size, hd = c.head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  expected.push_back({"token_embd.weight", {dim, vocab}});
  for (int layer = 0; layer < c.n_layers; ++layer) {
    const std::string b = absl::StrCat("blk.", layer, ".");
    expected.push_back({b + "attn_norm.weight", {dim}});
    expected.push_back({b + "attn_q.weight", {dim, q}});
    expected.push_back({b + "attn_k.weight", {dim, kv}});
    expected.push_back({b + "attn_v.weight", {dim, kv}});
    if (c.qkv_bias) {
      expected.push_back({b + "attn_q.bias", {q}});
      expected.push_back({b + "attn_k.bias", {kv}});
      expected.push_back({b + "attn_v.bias", {kv}});
    }
    if (c.qk_norm) {
      expected.push_back({b + "attn_q_norm.weight", {hd}});
      expected.push_back({b + "attn_k_norm.weight", {hd}});
    }
    expected.push_back({b + "attn_output.weight", {q, dim}});
    expected.push_back({b + "ffn_norm.weight", {dim}});
    expected.push_back({b + "ffn_gate.weight", {dim, ffn}});
    expected.push_back({b + "ffn_up.weight", {dim, ffn}});
    expected.push_back({b + "ffn_down.weight", {ffn, dim}});
  }
  expected.push_back({"output_norm.weight", {dim}});
  if (!c.tied_embeddings) expected.push_back({"output.weight", {dim, vocab}});

  const uint64_t file_size = mapping_->size();
  for (auto& [name, dims] : expected) {
    auto it = info_index_.find(name);
    if (it == info_index_.end()) return Bad(absl::StrCat("missing tensor '", name, "'"));
    const GgufTensorInfo& info = infos_[it->second];
    // Trailing 1s in ne are padding (ggml always has 4 dims); compare the rest.
    std::vector<uint64_t> ne = info.ne;
    while (ne.size() > dims.size() && ne.back() == 1) ne.pop_back();
    bool same = ne.size() == dims.size();
    for (size_t d = 0; same && d < ne.size(); ++d) same = ne[d] == static_cast<uint64_t>(dims[d]);
    if (!same) {
      auto show = [](const auto& v) {
        std::string out = "{";
        for (size_t d = 0; d < v.size(); ++d) absl::StrAppend(&out, d ? ", " : "", static_cast<uint64_t>(v[d]));
        return out + "}";
      };
      return Bad(absl::StrCat("tensor '", name, "' has shape ", show(info.ne), ", expected ", show(dims)));
    }
    const std::optional<DType> dtype = DTypeFromGgml(info.ggml_type);
    if (!dtype) {
      return Bad(absl::StrCat("tensor '", name, "' has unsupported ggml type ", info.ggml_type, " (",
                              GgmlTypeName(info.ggml_type), "); supported: F32, F16, BF16, Q8_0, Q4_0"));
    }
    const int64_t columns = dims[0];
    const int64_t rows = dims.size() > 1 ? dims[1] : 1;
    if (columns % DTypeBlockElements(*dtype) != 0) {
      return Bad(absl::StrCat("tensor '", name, "' of type ", GgmlTypeName(info.ggml_type), " has ", columns,
                              " columns, not a multiple of the block size ", DTypeBlockElements(*dtype)));
    }
    const uint64_t row_bytes = DTypeRowBytes(*dtype, columns);  // columns <= 2^30: no overflow
    const uint64_t bytes = row_bytes * static_cast<uint64_t>(rows);  // rows <= 2^30 too
    const uint64_t available = file_size - data_start_;
    if (info.offset > available || bytes > available - info.offset) {
      return Bad(absl::StrCat("tensor '", name, "' data [", info.offset, ", +", bytes,
                              ") lies past the end of the data section (", available, " bytes): file truncated?"));
    }
    const uint8_t* data = mapping_->data() + data_start_ + info.offset;
    SourceTensor t;
    t.name = name;
    t.dims = dims;
    t.source_dtype = *dtype;
    t.raw = data;
    std::shared_ptr<MappedFile> keep = mapping_;
    const DType type = *dtype;
    t.read_f32 = [keep, data, type, columns, rows, row_bytes](float* out) {
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(type, data + static_cast<uint64_t>(r) * row_bytes, out + r * columns, columns);
      }
      return absl::OkStatus();
    };
    model->tensors.push_back(std::move(t));
  }
  return absl::OkStatus();
}

TokenType TokenTypeFromGguf(int64_t t) {
  switch (t) {
    case 2: return TokenType::kUnknown;
    case 3: return TokenType::kControl;
    case 4: return TokenType::kUserDefined;
    case 5: return TokenType::kUnknown;  // unused
    case 6: return TokenType::kByte;
    default: return TokenType::kNormal;  // 1 normal, 0 undefined
  }
}

absl::Status GgufParser::BuildTokenizer(SourceModel* model) {
  TokenizerData& tok = model->tokenizer;
  auto kind = GetString("tokenizer.ggml.model");
  if (!kind.ok()) return kind.status();
  auto tokens = GetArray("tokenizer.ggml.tokens", /*strings=*/true);
  if (!tokens.ok()) return tokens.status();
  tok.tokens = (*tokens)->strings;
  const size_t n = tok.tokens.size();
  const size_t vocab = static_cast<size_t>(model->config.vocab_size);
  if (n == 0) return Bad("tokenizer.ggml.tokens is empty");
  if (n > vocab) {
    return Bad(absl::StrCat("the tokenizer has ", n, " tokens but token_embd.weight has only ", vocab, " rows"));
  }
  bool add_bos_default = false;
  if (*kind == "gpt2") {
    tok.type = "bpe";
    auto merges = GetArray("tokenizer.ggml.merges", /*strings=*/true);
    if (!merges.ok()) return merges.status();
    tok.merges = (*merges)->strings;
    if (auto pre = GetString("tokenizer.ggml.pre"); pre.ok()) tok.pre_tokenizer = *pre;
  } else if (*kind == "llama") {
    tok.type = "llama2c";
    add_bos_default = true;
    auto scores = GetArray("tokenizer.ggml.scores", /*strings=*/false);
    if (!scores.ok()) return scores.status();
    if ((*scores)->numbers.size() != n) {
      return Bad(absl::StrCat("tokenizer.ggml.scores has ", (*scores)->numbers.size(), " entries for ", n, " tokens"));
    }
    for (double s : (*scores)->numbers) tok.scores.push_back(static_cast<float>(s));
  } else {
    return Bad(absl::StrCat("unsupported tokenizer model '", *kind, "' (supported: gpt2, llama)"));
  }
  tok.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  if (Find("tokenizer.ggml.token_type") != nullptr) {
    auto types = GetArray("tokenizer.ggml.token_type", /*strings=*/false);
    if (!types.ok()) return types.status();
    if ((*types)->numbers.size() != n) {
      return Bad(absl::StrCat("tokenizer.ggml.token_type has ", (*types)->numbers.size(), " entries for ", n,
                              " tokens"));
    }
    for (size_t k = 0; k < n; ++k) {
      tok.token_types[k] = static_cast<int32_t>(TokenTypeFromGguf(static_cast<int64_t>((*types)->numbers[k])));
    }
  }
  // The embedding may have more rows than the tokenizer has tokens (padding); cover every id.
  tok.tokens.resize(vocab);
  tok.token_types.resize(vocab, static_cast<int32_t>(TokenType::kUnknown));
  if (!tok.scores.empty()) tok.scores.resize(vocab, 0.0f);

  for (auto [key, out] : {std::pair{"tokenizer.ggml.bos_token_id", &tok.bos_id},
                          {"tokenizer.ggml.eos_token_id", &tok.eos_id},
                          {"tokenizer.ggml.unknown_token_id", &tok.unk_id},
                          {"tokenizer.ggml.padding_token_id", &tok.pad_id}}) {
    auto id = GetInt(key, -1);
    if (!id.ok()) return id.status();
    if (*id < -1 || *id >= static_cast<int64_t>(vocab)) {
      return Bad(absl::StrCat("metadata '", key, "' = ", *id, " is outside the vocabulary of ", vocab));
    }
    *out = static_cast<int32_t>(*id);
  }
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    auto id = GetInt(key, -1);
    if (!id.ok()) return id.status();
    if (*id >= static_cast<int64_t>(vocab)) {
      return Bad(absl::StrCat("metadata '", key, "' = ", *id, " is outside the vocabulary of ", vocab));
    }
    if (*id >= 0 && *id != tok.eos_id) tok.eos_ids.push_back(static_cast<int32_t>(*id));
  }
  tok.add_bos = add_bos_default;
  if (const GgufValue* v = Find("tokenizer.ggml.add_bos_token"); v != nullptr) {
    if (v->type != kBool) return Bad("metadata 'tokenizer.ggml.add_bos_token' is not a bool");
    tok.add_bos = v->u != 0;
  }
  if (Find("tokenizer.chat_template") != nullptr) {
    auto tmpl = GetString("tokenizer.chat_template");
    if (!tmpl.ok()) return tmpl.status();
    tok.chat_template = *tmpl;
  }
  if (absl::Status s = tok.Validate(); !s.ok()) return Bad(std::string(s.message()));
  return absl::OkStatus();
}

absl::StatusOr<SourceModel> GgufParser::Load() {
  if (auto s = ParseHeader(); !s.ok()) return s;
  if (auto s = ParseTensorInfos(); !s.ok()) return s;
  SourceModel model;
  if (auto s = BuildConfig(&model); !s.ok()) return s;
  if (auto s = BuildTensors(&model); !s.ok()) return s;
  if (auto s = BuildTokenizer(&model); !s.ok()) return s;
  if (model.config.name.empty()) model.config.name = name_;
  model.description = absl::StrCat("GGUF v", version_, " ", name_, " (", arch_, ", ", model.config.n_layers,
                                   " layers, ", model.tensors.size(), " tensors)");
  model.mappings.push_back(mapping_);
  return model;
}

}  // namespace

absl::StatusOr<SourceModel> LoadGguf(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  GgufParser parser(path, std::shared_ptr<MappedFile>(std::move(*mapping)));
  return parser.Load();
}

}  // namespace kestrel::convert
