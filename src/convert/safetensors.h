// A small reader for the safetensors format (Hugging Face weights): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}} ("__metadata__" ignored), then the data.
// Every offset and size is checked against the file before a tensor is listed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/dtype.h"
#include "format/mapped_file.h"

namespace kestrel::convert {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;        // as written in the header, e.g. "BF16"
  std::optional<DType> dtype;    // set for F32, F16 and BF16, the types Kestrel can read
  std::vector<int64_t> shape;    // as in the file: outermost first, e.g. [out, in]
  const uint8_t* data = nullptr; // into the mapping; may be unaligned
  uint64_t bytes = 0;

  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the whole file. Errors name the file and the problem.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return mapping_->path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(const std::string& name) const;
  // Shared so that readers created from this file can keep the mapping alive.
  const std::shared_ptr<MappedFile>& mapping() const { return mapping_; }

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::shared_ptr<MappedFile> mapping_;
  std::vector<SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
};

// Decodes a F32/F16/BF16 tensor into f32 (elements() floats), handling unaligned data.
absl::Status ReadSafetensorAsF32(const SafetensorsTensor& tensor, float* out);

}  // namespace kestrel::convert
