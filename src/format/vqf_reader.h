// Parses and validates a VQF file into metadata and zero-copy tensor views.
// Every offset, size, count and string length is checked before use; a bad file gives a
// precise error (what, where, expected vs found) and never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "format/dtype.h"
#include "format/layout.h"
#include "format/mapped_file.h"
#include "format/metadata.h"

namespace kestrel {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Layout layout = Layout::kPlain;
  std::vector<int64_t> dims;  // dims[0] is the contiguous dimension (columns)
  uint64_t offset = 0;        // from the start of the file
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping
  int layer = -1;                 // transformer layer from a "blk.N." name, else -1

  int64_t columns() const { return dims.empty() ? 0 : dims[0]; }
  int64_t rows() const;  // product of dims[1..]
  int64_t elements() const { return columns() * rows(); }
};

class VqfFile {
 public:
  // Maps (or copies, as `residence` says) the file and validates it completely.
  static absl::StatusOr<std::unique_ptr<VqfFile>> Open(const std::string& path,
                                                       FileResidence residence = FileResidence::kMapped);
  // Validates an in-memory image (the caller keeps `bytes` alive). `origin` names it in errors.
  static absl::StatusOr<std::unique_ptr<VqfFile>> Parse(const uint8_t* bytes, size_t size, std::string origin);

  uint32_t version_major() const { return version_major_; }
  uint32_t version_minor() const { return version_minor_; }
  uint32_t layout_flags() const { return layout_flags_; }
  uint64_t file_bytes() const { return size_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* Find(std::string_view name) const;
  // Byte range [begin, end) covering all tensors of a layer (page-aligned start); {0,0} if none.
  std::pair<uint64_t, uint64_t> LayerRange(int layer) const;
  const std::string& origin() const { return origin_; }
  // How the bytes are held; null for an image from Parse.
  const MappedFile* mapping() const { return mapping_.get(); }
  // MappedFile::EditCopy on the file's bytes (false for a mapped file or an in-memory image). What
  // edit changes is the caller's to keep consistent: the model loader only regroups tensor bytes.
  bool EditCopy(absl::FunctionRef<void(uint8_t* bytes)> edit) {
    return mapping_ != nullptr && mapping_->EditCopy(edit);
  }

 private:
  VqfFile() = default;
  absl::Status ParseAll();
  absl::Status ParseHeader();
  absl::Status ParseMetadata(uint64_t offset, uint64_t bytes);
  absl::Status ParseDirectory(uint64_t offset, uint64_t bytes);
  absl::Status CheckTensorPlacement(uint64_t data_start);

  std::unique_ptr<MappedFile> mapping_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::string origin_;
  uint32_t version_major_ = 0, version_minor_ = 0, layout_flags_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
};

// Layer index from a tensor name of the form "blk.N.<rest>", or -1.
int LayerFromTensorName(std::string_view name);

}  // namespace kestrel
