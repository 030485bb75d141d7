// Converts a SourceModel into a VQF file one tensor at a time.
#include "convert/converter.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "format/vqf_writer.h"

namespace kestrel::convert {

TensorEncoding ChooseEncoding(const SourceTensor& tensor, const ConvertOptions& options) {
  if (tensor.dims.size() < 2) return {DType::kF32, Layout::kPlain, ""};
  TensorEncoding e{options.type.value_or(tensor.source_dtype), Layout::kPlain, ""};
  if (IsBlockQuantized(e.dtype) && tensor.columns() % kQuantBlockSize != 0) {
    e.reason = absl::StrCat("row length ", tensor.columns(), " is not a multiple of ", kQuantBlockSize, ": ",
                            DTypeName(e.dtype), " -> f16");
    e.dtype = DType::kF16;
  }
  if (options.layout != LayoutChoice::kPlain) {
    const bool asked = options.layout == LayoutChoice::kTiled;
    const Layout tiled = e.dtype == DType::kQ4_0 ? Layout::kQ4_0x4
                         : e.dtype == DType::kQ8_0 ? Layout::kQ8_0x8
                                                   : Layout::kPlain;
    if (tiled == Layout::kPlain) {
      if (asked && e.reason.empty()) e.reason = absl::StrCat(DTypeName(e.dtype), " has no tiled layout: plain");
    } else if (tensor.rows() % LayoutTileRows(tiled) != 0) {
      if (asked) e.reason = absl::StrCat(tensor.rows(), " rows do not fill ", LayoutTileRows(tiled), "-row tiles: plain");
    } else {
      e.layout = tiled;
    }
  }
  return e;
}

absl::Status ConvertModel(const SourceModel& model, const std::string& output_path, const ConvertOptions& options,
                          ConvertSummary* summary) {
  const auto start = std::chrono::steady_clock::now();
  if (auto s = model.config.Validate(); !s.ok()) return s;
  if (auto s = model.tokenizer.Validate(); !s.ok()) return s;
  Metadata metadata;
  model.config.ToMetadata(&metadata);
  model.tokenizer.ToMetadata(&metadata);
  metadata.Set("general.source", model.description);
  metadata.Set("general.converter", std::string("kestrel-convert"));
  // What was asked for, so kestrel-inspect can show where a tensor's encoding differs and why.
  metadata.Set("general.requested_type", std::string(options.type ? DTypeName(*options.type) : "source"));
  metadata.Set("general.requested_layout", std::string(options.layout == LayoutChoice::kTiled   ? "tiled"
                                                       : options.layout == LayoutChoice::kPlain ? "plain"
                                                                                                : "auto"));

  std::vector<TensorPlan> plans;
  std::vector<TensorEncoding> encodings;
  for (const SourceTensor& t : model.tensors) {
    encodings.push_back(ChooseEncoding(t, options));
    plans.push_back(TensorPlan{t.name, encodings.back().dtype, encodings.back().layout, t.dims});
  }
  auto writer = VqfWriter::Create(output_path, metadata, std::move(plans));
  if (!writer.ok()) return absl::Status(writer.status().code(), absl::StrCat(output_path, ": ", writer.status().message()));

  std::vector<float> f32;
  std::vector<uint8_t> encoded, tiled;
  uint64_t written = 0;
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const SourceTensor& t = model.tensors[i];
    const TensorEncoding& e = encodings[i];
    const int64_t columns = t.columns(), rows = t.rows();
    const size_t bytes = MatrixBytes(e.dtype, columns, rows);
    const void* payload = nullptr;
    if (t.raw != nullptr && t.source_dtype == e.dtype) {
      payload = t.raw;  // same dtype: copy the exact bytes (lossless for quantized sources)
    } else {
      f32.resize(static_cast<size_t>(columns * rows));
      if (auto s = t.read_f32(f32.data()); !s.ok()) return s;
      encoded.resize(bytes);
      for (int64_t r = 0; r < rows; ++r) {
        EncodeRow(e.dtype, f32.data() + r * columns, encoded.data() + DTypeRowBytes(e.dtype, columns) * r, columns);
      }
      payload = encoded.data();
    }
    if (e.layout != Layout::kPlain) {
      tiled.resize(bytes);
      RepackPlainToTiled(e.layout, payload, tiled.data(), columns, rows);
      payload = tiled.data();
    }
    if (auto s = (*writer)->WriteTensor(i, payload, bytes); !s.ok()) return s;
    written += bytes;
    if (options.progress) options.progress(i + 1, model.tensors.size(), written);
  }
  if (auto s = (*writer)->Finish(); !s.ok()) return s;
  if (summary != nullptr) {
    summary->deviations.clear();
    for (size_t i = 0; i < model.tensors.size(); ++i) {
      if (!encodings[i].reason.empty()) summary->deviations.push_back(model.tensors[i].name + ": " + encodings[i].reason);
    }
    summary->tensors = model.tensors.size();
    summary->bytes = (*writer)->file_bytes();
    summary->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return absl::OkStatus();
}

}  // namespace kestrel::convert
