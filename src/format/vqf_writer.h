// Streaming VQF writer: the converter plans all tensors first (so offsets are known), then streams
// each tensor's bytes in order. Memory use is bounded by what the caller holds, never the model.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/dtype.h"
#include "format/layout.h"
#include "format/metadata.h"

namespace kestrel {

struct TensorPlan {
  std::string name;
  DType dtype = DType::kF32;
  Layout layout = Layout::kPlain;
  std::vector<int64_t> dims;  // dims[0] = columns (contiguous)
};

class VqfWriter {
 public:
  // Validates the plan, writes header, metadata and directory to `path`.tmp; Finish() renames it.
  // Tensors of a transformer layer ("blk.N.*") must be adjacent in `plans`; each layer starts on a
  // page boundary.
  static absl::StatusOr<std::unique_ptr<VqfWriter>> Create(const std::string& path, const Metadata& metadata,
                                                           std::vector<TensorPlan> plans);
  ~VqfWriter();

  size_t tensor_count() const { return plans_.size(); }
  const TensorPlan& plan(size_t i) const { return plans_[i]; }
  uint64_t tensor_bytes(size_t i) const { return sizes_[i]; }
  // Writes tensor `index`; tensors must be written in plan order, each exactly once.
  absl::Status WriteTensor(size_t index, const void* data, size_t bytes);
  // Checks that every tensor was written, flushes, and renames the file into place.
  absl::Status Finish();
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  VqfWriter() = default;
  std::string path_, tmp_path_;
  std::FILE* out_ = nullptr;
  std::vector<TensorPlan> plans_;
  std::vector<uint64_t> offsets_, sizes_;
  size_t next_ = 0;
  uint64_t position_ = 0, file_bytes_ = 0;
  bool finished_ = false;
};

// Serialized metadata section (as written into the file); exposed for tests.
std::string SerializeMetadata(const Metadata& metadata);

}  // namespace kestrel
