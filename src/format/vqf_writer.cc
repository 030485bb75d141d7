// VQF writer. See docs/vqf.md for the byte layout it produces.
#include "format/vqf_writer.h"

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "format/vqf_reader.h"
#include "format/vqf_spec.h"

namespace kestrel {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutString32(std::string* out, const std::string& s) {
  Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
void PutString64(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}
uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

template <typename T>
void PutArray(std::string* out, MetaType elem, const std::vector<T>& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(MetaType::kArray));
  Put<uint32_t>(out, static_cast<uint32_t>(elem));
  Put<uint64_t>(out, v.size());
  for (const T& x : v) Put<T>(out, x);
}

}  // namespace

std::string SerializeMetadata(const Metadata& metadata) {
  std::string out;
  Put<uint64_t>(&out, metadata.entries().size());
  for (const auto& [key, value] : metadata.entries()) {
    PutString32(&out, key);
    struct Visitor {
      std::string* out;
      void operator()(uint32_t v) { Put<uint32_t>(out, 0); Put(out, v); }
      void operator()(int32_t v) { Put<uint32_t>(out, 1); Put(out, v); }
      void operator()(float v) { Put<uint32_t>(out, 2); Put(out, v); }
      void operator()(uint64_t v) { Put<uint32_t>(out, 3); Put(out, v); }
      void operator()(bool v) { Put<uint32_t>(out, 4); Put<uint8_t>(out, v ? 1 : 0); }
      void operator()(const std::string& v) { Put<uint32_t>(out, 5); PutString64(out, v); }
      void operator()(const std::vector<uint32_t>& v) { PutArray(out, MetaType::kU32, v); }
      void operator()(const std::vector<int32_t>& v) { PutArray(out, MetaType::kI32, v); }
      void operator()(const std::vector<float>& v) { PutArray(out, MetaType::kF32, v); }
      void operator()(const std::vector<uint64_t>& v) { PutArray(out, MetaType::kU64, v); }
      void operator()(const std::vector<std::string>& v) {
        Put<uint32_t>(out, 6);
        Put<uint32_t>(out, 5);
        Put<uint64_t>(out, v.size());
        for (const auto& s : v) PutString64(out, s);
      }
    };
    std::visit(Visitor{&out}, value);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<VqfWriter>> VqfWriter::Create(const std::string& path, const Metadata& metadata,
                                                             std::vector<TensorPlan> plans) {
  std::unique_ptr<VqfWriter> w(new VqfWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp";
  uint32_t layout_flags = LayoutFlag(Layout::kPlain);
  std::set<std::string> names;
  std::set<int> finished_layers;
  int current_layer = -1;
  for (const auto& p : plans) {
    if (p.name.empty() || p.name.size() > vqf::kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("tensor name '", p.name, "' is empty or too long"));
    }
    if (!names.insert(p.name).second) return absl::InvalidArgumentError(absl::StrCat("duplicate tensor '", p.name, "'"));
    if (p.dims.empty() || p.dims.size() > vqf::kMaxDims) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name, "' has ", p.dims.size(), " dimensions"));
    }
    // The reader's limits (each dimension 1..2^40, at most 2^48 elements), checked before multiplying
    // so a bad plan can neither overflow nor produce a file the reader refuses.
    int64_t elements = 1;
    for (size_t i = 0; i < p.dims.size(); ++i) {
      const int64_t d = p.dims[i];
      if (d <= 0 || d > (int64_t{1} << 40) || elements > (int64_t{1} << 48) / d) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name, "': dimension ", i, " = ", d,
                                                       " is not positive or makes the element count overflow"));
      }
      elements *= d;
    }
    int64_t rows = 1;
    for (size_t i = 1; i < p.dims.size(); ++i) rows *= p.dims[i];
    if (auto s = CheckLayoutFits(p.dtype, p.layout, p.dims[0], rows); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", p.name, "': ", s.message()));
    }
    layout_flags |= LayoutFlag(p.layout);
    const int layer = LayerFromTensorName(p.name);
    if (layer != current_layer) {
      if (current_layer >= 0) finished_layers.insert(current_layer);
      if (layer >= 0 && finished_layers.count(layer)) {
        return absl::InvalidArgumentError(absl::StrCat("tensors of layer ", layer, " are not adjacent ('", p.name, "')"));
      }
      current_layer = layer;
    }
    w->sizes_.push_back(MatrixBytes(p.dtype, p.dims[0], rows));
  }
  if (metadata.entries().size() > vqf::kMaxMetadataEntries) {
    return absl::InvalidArgumentError(absl::StrCat(metadata.entries().size(), " metadata entries exceed the limit of ",
                                                   vqf::kMaxMetadataEntries));
  }
  for (const auto& entry : metadata.entries()) {
    if (entry.first.empty() || entry.first.size() > vqf::kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("metadata key '", entry.first.substr(0, 64),
                                                     "' is empty or longer than ", vqf::kMaxNameBytes, " bytes"));
    }
  }
  // Serialize directory with placeholder-free offsets: compute them first.
  const std::string meta = SerializeMetadata(metadata);
  // Directory size does not depend on offset values, so compute it with zeros, then fill in.
  auto serialize_directory = [&](const std::vector<uint64_t>& offsets) {
    std::string dir;
    Put<uint64_t>(&dir, plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      const auto& p = plans[i];
      PutString32(&dir, p.name);
      Put<uint32_t>(&dir, static_cast<uint32_t>(p.dtype));
      Put<uint32_t>(&dir, static_cast<uint32_t>(p.layout));
      Put<uint32_t>(&dir, static_cast<uint32_t>(p.dims.size()));
      for (int64_t d : p.dims) Put<uint64_t>(&dir, static_cast<uint64_t>(d));
      Put<uint64_t>(&dir, offsets[i]);
      Put<uint64_t>(&dir, w->sizes_[i]);
    }
    return dir;
  };
  const uint64_t meta_off = vqf::kHeaderBytes;
  const uint64_t dir_off = meta_off + meta.size();
  const uint64_t dir_bytes = serialize_directory(std::vector<uint64_t>(plans.size(), 0)).size();
  uint64_t pos = dir_off + dir_bytes;
  int previous_layer = -2;
  for (size_t i = 0; i < plans.size(); ++i) {
    const int layer = LayerFromTensorName(plans[i].name);
    const bool new_layer_group = layer != previous_layer && (layer >= 0 || previous_layer >= 0);
    pos = AlignUp(pos, new_layer_group ? vqf::kLayerAlignment : vqf::kTensorAlignment);
    w->offsets_.push_back(pos);
    pos += w->sizes_[i];
    previous_layer = layer;
  }
  w->file_bytes_ = pos;
  const std::string dir = serialize_directory(w->offsets_);

  std::string header(vqf::kHeaderBytes, '\0');
  std::memcpy(&header[vqf::kOffMagic], vqf::kMagic, 8);
  auto put_at = [&](uint64_t off, auto v) { std::memcpy(&header[off], &v, sizeof(v)); };
  put_at(vqf::kOffVersionMajor, vqf::kVersionMajor);
  put_at(vqf::kOffVersionMinor, vqf::kVersionMinor);
  put_at(vqf::kOffHeaderBytes, vqf::kHeaderBytes);
  put_at(vqf::kOffLayoutFlags, layout_flags);
  put_at(vqf::kOffFileBytes, w->file_bytes_);
  put_at(vqf::kOffMetadataOffset, meta_off);
  put_at(vqf::kOffMetadataBytes, static_cast<uint64_t>(meta.size()));
  put_at(vqf::kOffDirectoryOffset, dir_off);
  put_at(vqf::kOffDirectoryBytes, dir_bytes);

  w->out_ = std::fopen(w->tmp_path_.c_str(), "wb");
  if (w->out_ == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(w->tmp_path_, ": cannot create: ", std::strerror(errno)));
  }
  w->plans_ = std::move(plans);
  const std::string prefix = header + meta + dir;
  if (std::fwrite(prefix.data(), 1, prefix.size(), w->out_) != prefix.size()) {
    return absl::DataLossError(absl::StrCat(w->tmp_path_, ": write failed: ", std::strerror(errno)));
  }
  w->position_ = prefix.size();
  return w;
}

absl::Status VqfWriter::WriteTensor(size_t index, const void* data, size_t bytes) {
  if (index != next_ || index >= plans_.size()) {
    return absl::FailedPreconditionError(absl::StrCat("tensor ", index, " written out of order (expected ", next_, ")"));
  }
  if (bytes != sizes_[index]) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", plans_[index].name, "': expected ", sizes_[index],
                                                   " bytes, given ", bytes));
  }
  static const char kZeros[4096] = {};
  while (position_ < offsets_[index]) {
    const size_t pad = static_cast<size_t>(std::min<uint64_t>(sizeof(kZeros), offsets_[index] - position_));
    if (std::fwrite(kZeros, 1, pad, out_) != pad) return absl::DataLossError(absl::StrCat(tmp_path_, ": write failed"));
    position_ += pad;
  }
  if (bytes > 0 && std::fwrite(data, 1, bytes, out_) != bytes) {
    return absl::DataLossError(absl::StrCat(tmp_path_, ": write failed: ", std::strerror(errno)));
  }
  position_ += bytes;
  ++next_;
  return absl::OkStatus();
}

absl::Status VqfWriter::Finish() {
  if (next_ != plans_.size()) {
    return absl::FailedPreconditionError(absl::StrCat("only ", next_, " of ", plans_.size(), " tensors were written"));
  }
  const bool flushed = std::fflush(out_) == 0;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!flushed || !closed) return absl::DataLossError(absl::StrCat(tmp_path_, ": flush failed"));
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(path_, ": cannot rename into place: ", std::strerror(errno)));
  }
  finished_ = true;
  return absl::OkStatus();
}

VqfWriter::~VqfWriter() {
  if (out_ != nullptr) std::fclose(out_);
  if (!finished_ && !tmp_path_.empty()) std::remove(tmp_path_.c_str());
}

}  // namespace kestrel
