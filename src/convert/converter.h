// Writes a SourceModel into a VQF file, choosing each tensor's dtype and layout by the rule in
// docs/vqf.md ("Conversion rule"), streaming one tensor at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "convert/source_model.h"
#include "format/dtype.h"
#include "format/layout.h"

namespace kestrel::convert {

// kAuto: the tiled layout wherever the dtype has one and the rows fill whole tiles (the layout the
// x86 and dotprod kernels read fastest, see bench/README.md), plain elsewhere without a note;
// kTiled asks for tiles and notes every tensor that cannot have them.
enum class LayoutChoice { kAuto, kPlain, kTiled };

struct ConvertOptions {
  // Requested dtype for matrices; unset keeps each matrix's source dtype (a Q4_0 GGUF stays Q4_0,
  // byte for byte; a llama2.c checkpoint stays f32).
  std::optional<DType> type;
  LayoutChoice layout = LayoutChoice::kAuto;
  // Called after each tensor with (tensors done, tensor count, bytes written so far).
  std::function<void(size_t, size_t, uint64_t)> progress;
};

struct TensorEncoding {
  DType dtype;
  Layout layout;
  std::string reason;  // why it differs from what was requested, empty when it does not
};

// The documented rule: 1-D tensors (norms, biases) stay f32; a matrix whose row length is not a
// multiple of 32 falls back from q8_0/q4_0 to f16; a tiled layout is used only when the dtype has
// one and the row count fills whole tiles, else plain.
TensorEncoding ChooseEncoding(const SourceTensor& tensor, const ConvertOptions& options);

struct ConvertSummary {
  // "name: reason" for every tensor stored differently from what was requested.
  std::vector<std::string> deviations;
  size_t tensors = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

absl::Status ConvertModel(const SourceModel& model, const std::string& output_path, const ConvertOptions& options,
                          ConvertSummary* summary);

}  // namespace kestrel::convert
