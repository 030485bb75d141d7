// VQF reader: validation first, then zero-copy views. See docs/vqf.md.
#include "format/vqf_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "format/vqf_spec.h"

namespace kestrel {

int64_t TensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

int LayerFromTensorName(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos) return -1;
  int layer = -1;
  const std::string_view digits = name.substr(4, dot - 4);
  if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &layer) || layer < 0) return -1;
  return layer;
}

namespace {

// Bounds-checked little-endian cursor over [begin, end) of the file image.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t begin, uint64_t end, const std::string& origin, const char* section)
      : base_(base), pos_(begin), end_(end), origin_(origin), section_(section) {}

  uint64_t pos() const { return pos_; }

  absl::Status Error(uint64_t at, const std::string& what) const {
    return absl::DataLossError(absl::StrCat(origin_, ": ", section_, " at byte ", at, ": ", what));
  }

  absl::Status Need(uint64_t n, const char* what) const {
    if (n > end_ - pos_) {
      return Error(pos_, absl::StrCat(what, " needs ", n, " bytes but only ", end_ - pos_,
                                      " remain in the section (truncated or bad length)"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(T* out, const char* what) {
    if (auto s = Need(sizeof(T), what); !s.ok()) return s;
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, uint64_t max_bytes, const char* what, bool u64_length) {
    uint64_t len = 0;
    if (u64_length) {
      if (auto s = Read(&len, what); !s.ok()) return s;
    } else {
      uint32_t len32 = 0;
      if (auto s = Read(&len32, what); !s.ok()) return s;
      len = len32;
    }
    if (len > max_bytes) {
      return Error(pos_, absl::StrCat(what, " length ", len, " exceeds the limit of ", max_bytes));
    }
    if (auto s = Need(len, what); !s.ok()) return s;
    out->assign(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

 private:
  const uint8_t* base_;
  uint64_t pos_, end_;
  const std::string& origin_;
  const char* section_;
};

#define KESTREL_RETURN_IF_ERROR(expr)          \
  do {                                         \
    if (auto _st = (expr); !_st.ok()) return _st; \
  } while (0)

template <typename T>
absl::Status ReadArray(Cursor& c, uint64_t count, MetaValue* out, const char* what) {
  if (count > (std::numeric_limits<uint64_t>::max() / sizeof(T))) return c.Error(c.pos(), "array count overflows");
  KESTREL_RETURN_IF_ERROR(c.Need(count * sizeof(T), what));
  std::vector<T> v(count);
  for (uint64_t i = 0; i < count; ++i) KESTREL_RETURN_IF_ERROR(c.Read(&v[i], what));
  *out = std::move(v);
  return absl::OkStatus();
}

absl::Status ReadScalar(Cursor& c, MetaType type, MetaValue* out) {
  switch (type) {
    case MetaType::kU32: { uint32_t v; KESTREL_RETURN_IF_ERROR(c.Read(&v, "u32 value")); *out = v; return absl::OkStatus(); }
    case MetaType::kI32: { int32_t v; KESTREL_RETURN_IF_ERROR(c.Read(&v, "i32 value")); *out = v; return absl::OkStatus(); }
    case MetaType::kF32: { float v; KESTREL_RETURN_IF_ERROR(c.Read(&v, "f32 value")); *out = v; return absl::OkStatus(); }
    case MetaType::kU64: { uint64_t v; KESTREL_RETURN_IF_ERROR(c.Read(&v, "u64 value")); *out = v; return absl::OkStatus(); }
    case MetaType::kBool: {
      uint8_t v;
      const uint64_t at = c.pos();
      KESTREL_RETURN_IF_ERROR(c.Read(&v, "bool value"));
      if (v > 1) return c.Error(at, absl::StrCat("bool value must be 0 or 1, found ", v));
      *out = v == 1;
      return absl::OkStatus();
    }
    case MetaType::kString: {
      std::string s;
      KESTREL_RETURN_IF_ERROR(c.ReadString(&s, std::numeric_limits<uint64_t>::max(), "string value", true));
      *out = std::move(s);
      return absl::OkStatus();
    }
    default:
      return c.Error(c.pos(), absl::StrCat("unknown value type ", static_cast<uint32_t>(type)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<VqfFile>> VqfFile::Open(const std::string& path, FileResidence residence) {
  auto mapping = MappedFile::Open(path, residence);
  if (!mapping.ok()) return mapping.status();
  std::unique_ptr<VqfFile> file(new VqfFile());
  file->base_ = (*mapping)->data();
  file->size_ = (*mapping)->size();
  file->origin_ = path;
  file->mapping_ = std::move(*mapping);
  KESTREL_RETURN_IF_ERROR(file->ParseAll());
  return file;
}

absl::StatusOr<std::unique_ptr<VqfFile>> VqfFile::Parse(const uint8_t* bytes, size_t size, std::string origin) {
  std::unique_ptr<VqfFile> file(new VqfFile());
  file->base_ = bytes;
  file->size_ = size;
  file->origin_ = std::move(origin);
  KESTREL_RETURN_IF_ERROR(file->ParseAll());
  return file;
}

absl::Status VqfFile::ParseAll() { return ParseHeader(); }

absl::Status VqfFile::ParseHeader() {
  Cursor c(base_, 0, size_, origin_, "header");
  if (size_ < vqf::kHeaderBytes) {
    return c.Error(0, absl::StrCat("file is ", size_, " bytes, shorter than the ", vqf::kHeaderBytes,
                                   "-byte header (truncated or not a VQF file)"));
  }
  if (std::memcmp(base_, vqf::kMagic, sizeof(vqf::kMagic)) != 0) {
    return c.Error(0, "bad magic: expected \"KESTRVQF\" (not a VQF file)");
  }
  uint32_t header_bytes = 0;
  uint64_t file_bytes = 0, meta_off = 0, meta_bytes = 0, dir_off = 0, dir_bytes = 0;
  std::memcpy(&version_major_, base_ + vqf::kOffVersionMajor, 4);
  std::memcpy(&version_minor_, base_ + vqf::kOffVersionMinor, 4);
  std::memcpy(&header_bytes, base_ + vqf::kOffHeaderBytes, 4);
  std::memcpy(&layout_flags_, base_ + vqf::kOffLayoutFlags, 4);
  std::memcpy(&file_bytes, base_ + vqf::kOffFileBytes, 8);
  std::memcpy(&meta_off, base_ + vqf::kOffMetadataOffset, 8);
  std::memcpy(&meta_bytes, base_ + vqf::kOffMetadataBytes, 8);
  std::memcpy(&dir_off, base_ + vqf::kOffDirectoryOffset, 8);
  std::memcpy(&dir_bytes, base_ + vqf::kOffDirectoryBytes, 8);
  if (version_major_ != vqf::kVersionMajor) {
    return c.Error(vqf::kOffVersionMajor, absl::StrCat("unsupported format version ", version_major_, ".",
                                                       version_minor_, ": this reader reads version ",
                                                       vqf::kVersionMajor, ".x"));
  }
  if (header_bytes != vqf::kHeaderBytes) {
    return c.Error(vqf::kOffHeaderBytes, absl::StrCat("header size: expected ", vqf::kHeaderBytes, ", found ", header_bytes));
  }
  if ((layout_flags_ & ~kKnownLayoutFlags) != 0) {
    return c.Error(vqf::kOffLayoutFlags, absl::StrFormat("unknown layout flags 0x%x (known: 0x%x)",
                                                         layout_flags_ & ~kKnownLayoutFlags,
                                                         kKnownLayoutFlags));
  }
  if (file_bytes != size_) {
    return c.Error(vqf::kOffFileBytes, absl::StrCat("file size: header says ", file_bytes, " bytes, found ", size_,
                                                    file_bytes > size_ ? " (truncated)" : " (trailing bytes)"));
  }
  const auto check_range = [&](uint64_t off, uint64_t bytes, uint64_t field, const char* what) -> absl::Status {
    if (off < vqf::kHeaderBytes || off > size_ || bytes > size_ - off) {
      return c.Error(field, absl::StrCat(what, " range [", off, ", +", bytes, ") lies outside the file body [",
                                         vqf::kHeaderBytes, ", ", size_, ")"));
    }
    return absl::OkStatus();
  };
  KESTREL_RETURN_IF_ERROR(check_range(meta_off, meta_bytes, vqf::kOffMetadataOffset, "metadata"));
  KESTREL_RETURN_IF_ERROR(check_range(dir_off, dir_bytes, vqf::kOffDirectoryOffset, "tensor directory"));
  if (meta_off < dir_off + dir_bytes && dir_off < meta_off + meta_bytes) {
    return c.Error(vqf::kOffDirectoryOffset, "metadata and tensor directory overlap");
  }
  KESTREL_RETURN_IF_ERROR(ParseMetadata(meta_off, meta_bytes));
  KESTREL_RETURN_IF_ERROR(ParseDirectory(dir_off, dir_bytes));
  return CheckTensorPlacement(std::max(meta_off + meta_bytes, dir_off + dir_bytes));
}

absl::Status VqfFile::ParseMetadata(uint64_t offset, uint64_t bytes) {
  Cursor c(base_, offset, offset + bytes, origin_, "metadata");
  uint64_t count = 0;
  KESTREL_RETURN_IF_ERROR(c.Read(&count, "entry count"));
  if (count > vqf::kMaxMetadataEntries) {
    return c.Error(offset, absl::StrCat("entry count ", count, " exceeds the limit of ", vqf::kMaxMetadataEntries));
  }
  for (uint64_t i = 0; i < count; ++i) {
    std::string key;
    const uint64_t entry_at = c.pos();
    KESTREL_RETURN_IF_ERROR(c.ReadString(&key, vqf::kMaxNameBytes, "key", false));
    if (key.empty()) return c.Error(entry_at, "empty key");
    if (metadata_.Has(key)) return c.Error(entry_at, absl::StrCat("duplicate key '", key, "'"));
    uint32_t type = 0;
    const uint64_t type_at = c.pos();
    KESTREL_RETURN_IF_ERROR(c.Read(&type, "value type"));
    MetaValue value;
    if (type == static_cast<uint32_t>(MetaType::kArray)) {
      uint32_t elem = 0;
      uint64_t n = 0;
      const uint64_t elem_at = c.pos();
      KESTREL_RETURN_IF_ERROR(c.Read(&elem, "array element type"));
      KESTREL_RETURN_IF_ERROR(c.Read(&n, "array count"));
      switch (static_cast<MetaType>(elem)) {
        case MetaType::kU32: KESTREL_RETURN_IF_ERROR(ReadArray<uint32_t>(c, n, &value, "u32 array")); break;
        case MetaType::kI32: KESTREL_RETURN_IF_ERROR(ReadArray<int32_t>(c, n, &value, "i32 array")); break;
        case MetaType::kF32: KESTREL_RETURN_IF_ERROR(ReadArray<float>(c, n, &value, "f32 array")); break;
        case MetaType::kU64: KESTREL_RETURN_IF_ERROR(ReadArray<uint64_t>(c, n, &value, "u64 array")); break;
        case MetaType::kString: {
          // Each string takes at least its 8-byte length, which bounds n before we allocate.
          KESTREL_RETURN_IF_ERROR(c.Need(n > UINT64_MAX / 8 ? UINT64_MAX : n * 8, "string array"));
          std::vector<std::string> v(n);
          for (auto& s : v) {
            KESTREL_RETURN_IF_ERROR(c.ReadString(&s, std::numeric_limits<uint64_t>::max(), "string array element", true));
          }
          value = std::move(v);
          break;
        }
        default:
          return c.Error(elem_at, absl::StrCat("key '", key, "': unknown array element type ", elem));
      }
    } else if (type < static_cast<uint32_t>(MetaType::kArray)) {
      KESTREL_RETURN_IF_ERROR(ReadScalar(c, static_cast<MetaType>(type), &value));
    } else {
      return c.Error(type_at, absl::StrCat("key '", key, "': unknown value type ", type));
    }
    metadata_.Set(std::move(key), std::move(value));
  }
  if (c.pos() != offset + bytes) {
    return c.Error(c.pos(), absl::StrCat("section holds ", offset + bytes - c.pos(), " bytes past its last entry"));
  }
  return absl::OkStatus();
}

absl::Status VqfFile::ParseDirectory(uint64_t offset, uint64_t bytes) {
  Cursor c(base_, offset, offset + bytes, origin_, "tensor directory");
  uint64_t count = 0;
  KESTREL_RETURN_IF_ERROR(c.Read(&count, "tensor count"));
  if (count > vqf::kMaxTensors) {
    return c.Error(offset, absl::StrCat("tensor count ", count, " exceeds the limit of ", vqf::kMaxTensors));
  }
  for (uint64_t i = 0; i < count; ++i) {
    TensorInfo t;
    const uint64_t at = c.pos();
    KESTREL_RETURN_IF_ERROR(c.ReadString(&t.name, vqf::kMaxNameBytes, "tensor name", false));
    if (t.name.empty()) return c.Error(at, absl::StrCat("tensor ", i, " has an empty name"));
    if (index_.count(t.name) != 0) return c.Error(at, absl::StrCat("duplicate tensor name '", t.name, "'"));
    const std::string who = absl::StrCat("tensor '", t.name, "'");
    uint32_t dtype = 0, layout = 0, n_dims = 0;
    const uint64_t dtype_at = c.pos();
    KESTREL_RETURN_IF_ERROR(c.Read(&dtype, "dtype"));
    KESTREL_RETURN_IF_ERROR(c.Read(&layout, "layout"));
    KESTREL_RETURN_IF_ERROR(c.Read(&n_dims, "dimension count"));
    if (!IsKnownDType(dtype)) return c.Error(dtype_at, absl::StrCat(who, ": unknown dtype ", dtype));
    if (!IsKnownLayout(layout)) return c.Error(dtype_at + 4, absl::StrCat(who, ": unknown layout ", layout));
    if (n_dims < 1 || n_dims > vqf::kMaxDims) {
      return c.Error(dtype_at + 8, absl::StrCat(who, ": dimension count must be 1..", vqf::kMaxDims, ", found ", n_dims));
    }
    t.dtype = static_cast<DType>(dtype);
    t.layout = static_cast<Layout>(layout);
    if ((layout_flags_ & LayoutFlag(t.layout)) == 0) {
      return c.Error(dtype_at + 4, absl::StrCat(who, ": layout ", LayoutName(t.layout),
                                                " is not declared in the header's layout flags"));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      const uint64_t dim_at = c.pos();
      KESTREL_RETURN_IF_ERROR(c.Read(&dim, "dimension"));
      if (dim == 0 || dim > (1ull << 40) || elements > (1ull << 48) / dim) {
        return c.Error(dim_at, absl::StrCat(who, ": dimension ", d, " = ", dim, " is zero or makes the element count overflow"));
      }
      elements *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t offset_at = c.pos();
    KESTREL_RETURN_IF_ERROR(c.Read(&t.offset, "data offset"));
    KESTREL_RETURN_IF_ERROR(c.Read(&t.bytes, "data size"));
    if (auto s = CheckLayoutFits(t.dtype, t.layout, t.columns(), t.rows()); !s.ok()) {
      return c.Error(dtype_at, absl::StrCat(who, ": ", s.message()));
    }
    const uint64_t expected = MatrixBytes(t.dtype, t.columns(), t.rows());
    if (t.bytes != expected) {
      return c.Error(offset_at + 8, absl::StrCat(who, ": data size: expected ", expected, " bytes for ",
                                                 DTypeName(t.dtype), " ", t.columns(), "x", t.rows(), ", found ", t.bytes));
    }
    if (t.offset % vqf::kTensorAlignment != 0) {
      return c.Error(offset_at, absl::StrCat(who, ": data offset ", t.offset, " is not aligned to ", vqf::kTensorAlignment));
    }
    if (t.offset > size_ || t.bytes > size_ - t.offset) {
      return c.Error(offset_at, absl::StrCat(who, ": data [", t.offset, ", +", t.bytes, ") extends past the end of the file (",
                                             size_, " bytes)"));
    }
    t.data = base_ + t.offset;
    t.layer = LayerFromTensorName(t.name);
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  if (c.pos() != offset + bytes) {
    return c.Error(c.pos(), absl::StrCat("section holds ", offset + bytes - c.pos(), " bytes past its last entry"));
  }
  return absl::OkStatus();
}

absl::Status VqfFile::CheckTensorPlacement(uint64_t data_start) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  uint64_t end = data_start;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->offset < end) {
      return absl::DataLossError(absl::StrCat(
          origin_, ": tensor directory: tensor '", t->name, "' data at byte ", t->offset, " overlaps ",
          previous ? absl::StrCat("tensor '", previous->name, "' (ends at byte ", end, ")")
                   : absl::StrCat("the header, metadata or directory (which end at byte ", end, ")")));
    }
    end = t->offset + t->bytes;
    previous = t;
  }
  // Each transformer layer is one run of tensors in file order, starting on a page, so LayerRange
  // covers exactly that layer and can be handed to madvise / prefetch as is.
  std::set<int> layers_seen;  // a set, not a vector: layer numbers come from untrusted names
  int run_layer = -1;
  for (const TensorInfo* t : by_offset) {
    if (t->layer >= 0 && t->layer != run_layer) {
      if (layers_seen.count(t->layer) != 0) {
        return absl::DataLossError(absl::StrCat(origin_, ": tensor directory: tensors of layer ", t->layer,
                                                " are not adjacent in the file ('", t->name, "' at byte ", t->offset,
                                                " follows tensors of another layer)"));
      }
      if (t->offset % vqf::kLayerAlignment != 0) {
        return absl::DataLossError(absl::StrCat(origin_, ": tensor directory: layer ", t->layer, " starts at byte ",
                                                t->offset, " ('", t->name, "'), not on a ", vqf::kLayerAlignment,
                                                "-byte boundary"));
      }
      layers_seen.insert(t->layer);
    }
    run_layer = t->layer;
  }
  return absl::OkStatus();
}

const TensorInfo* VqfFile::Find(std::string_view name) const {
  auto it = index_.find(absl::string_view(name.data(), name.size()));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::pair<uint64_t, uint64_t> VqfFile::LayerRange(int layer) const {
  uint64_t begin = UINT64_MAX, end = 0;
  for (const auto& t : tensors_) {
    if (t.layer != layer) continue;
    begin = std::min(begin, t.offset);
    end = std::max(end, t.offset + t.bytes);
  }
  if (begin == UINT64_MAX) return {0, 0};
  return {begin, end};
}

}  // namespace kestrel
