// Safetensors parsing with bounds checks on the header and every tensor's byte range.
#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace kestrel::convert {
namespace {

// The reference implementation refuses headers above 100 MB; so do we, which also bounds parsing.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// Bytes per element of every dtype the format defines; 0 for an unknown name.
uint64_t ElementBytes(const std::string& dtype) {
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},
      {"F64", 8},  {"I64", 8}, {"U64", 8}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

std::optional<DType> KestrelDType(const std::string& dtype) {
  if (dtype == "F32") return DType::kF32;
  if (dtype == "F16") return DType::kF16;
  if (dtype == "BF16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded at parse time
  return n;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->mapping_ = std::shared_ptr<MappedFile>(std::move(*mapping));
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status SafetensorsFile::Parse() {
  const std::string& file = mapping_->path();
  const uint8_t* base = mapping_->data();
  const uint64_t size = mapping_->size();
  auto bad = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(file, ": ", what)); };

  if (size < 8) return bad(absl::StrCat("file of ", size, " bytes is too short for a safetensors header"));
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | base[i];
  if (header_bytes > kMaxHeaderBytes) {
    return bad(absl::StrCat("header length ", header_bytes, " exceeds the 100 MB limit (not a safetensors file?)"));
  }
  if (header_bytes > size - 8) {
    return bad(absl::StrCat("header length ", header_bytes, " runs past the end of the file (", size,
                            " bytes): truncated?"));
  }
  const uint8_t* data_start = base + 8 + header_bytes;
  const uint64_t data_bytes = size - 8 - header_bytes;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(base + 8, base + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (!header.is_object()) return bad("header is not a JSON object");

  tensors_.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    // A lambda may not capture a structured binding in C++17 (clang refuses; GCC allows it).
    const std::string& tensor_name = name;
    auto bad_tensor = [&](const std::string& what) { return bad(absl::StrCat("tensor '", tensor_name, "': ", what)); };
    if (!entry.is_object()) return bad_tensor("entry is not an object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return bad_tensor("missing or non-string 'dtype'");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad_tensor("missing or non-array 'shape'");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return bad_tensor("'data_offsets' must be an array [begin, end]");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = dtype_it->get<std::string>();
    t.dtype = KestrelDType(t.dtype_name);
    const uint64_t element_bytes = ElementBytes(t.dtype_name);
    if (element_bytes == 0) return bad_tensor(absl::StrCat("unknown dtype '", t.dtype_name, "'"));

    // Element count with overflow checks: the product must stay below the data size anyway.
    uint64_t elements = 1;
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned()) {
        return bad_tensor("shape entries must be non-negative integers");
      }
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (v != 0 && elements > std::numeric_limits<uint64_t>::max() / element_bytes / v)) {
        return bad_tensor("shape is too large");
      }
      elements *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& b = (*offsets_it)[0];
    const auto& e = (*offsets_it)[1];
    if (!b.is_number_unsigned() || !e.is_number_unsigned()) {
      return bad_tensor("data_offsets must be non-negative integers");
    }
    const uint64_t begin = b.get<uint64_t>(), end = e.get<uint64_t>();
    if (begin > end) return bad_tensor(absl::StrCat("data_offsets [", begin, ", ", end, "] are reversed"));
    if (end > data_bytes) {
      return bad_tensor(absl::StrCat("data_offsets [", begin, ", ", end, "] run past the end of the data (",
                                     data_bytes, " bytes): file truncated?"));
    }
    if (end - begin != elements * element_bytes) {
      return bad_tensor(absl::StrCat("holds ", end - begin, " bytes but its shape and dtype need ",
                                     elements * element_bytes));
    }
    t.data = data_start + begin;
    t.bytes = end - begin;
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status ReadSafetensorAsF32(const SafetensorsTensor& tensor, float* out) {
  if (!tensor.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "' has unsupported dtype ",
                                                   tensor.dtype_name, "; supported: F32, F16, BF16"));
  }
  const DType t = *tensor.dtype;
  const int64_t n = tensor.elements();
  if (t == DType::kF32) {
    std::memcpy(out, tensor.data, static_cast<size_t>(n) * sizeof(float));
    return absl::OkStatus();
  }
  // F16/BF16: DequantizeRow reads uint16_t, so widen from an aligned copy when the data is not aligned.
  if (reinterpret_cast<uintptr_t>(tensor.data) % alignof(uint16_t) == 0) {
    DequantizeRow(t, tensor.data, out, n);
    return absl::OkStatus();
  }
  constexpr int64_t kChunk = 4096;
  uint16_t buffer[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t count = std::min(kChunk, n - i);
    std::memcpy(buffer, tensor.data + i * 2, static_cast<size_t>(count) * 2);
    DequantizeRow(t, buffer, out + i, count);
  }
  return absl::OkStatus();
}

}  // namespace kestrel::convert
