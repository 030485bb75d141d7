// kestrel-inspect: prints a VQF file's header, metadata, layout flags and tensor table.
#include <cstdio>
#include <string>

#include "format/layout.h"
#include "format/vqf_reader.h"

int main(int argc, char** argv) {
  using namespace kestrel;
  if (argc != 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(argc == 2 ? stdout : stderr, "usage: kestrel-inspect FILE.vqf\n");
    return argc == 2 ? 0 : 1;
  }
  auto file = VqfFile::Open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "kestrel-inspect: %s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  const VqfFile& f = **file;
  std::printf("file: %s\nformat: VQF %u.%u, %llu bytes\nlayout flags: 0x%x (", argv[1], f.version_major(),
              f.version_minor(), static_cast<unsigned long long>(f.file_bytes()), f.layout_flags());
  bool first = true;
  for (uint32_t l = 0; l < kLayoutCount; ++l) {
    if (f.layout_flags() & (1u << l)) {
      std::printf("%s%s", first ? "" : ", ", LayoutName(static_cast<Layout>(l)));
      first = false;
    }
  }
  std::printf(")\n\nmetadata (%zu entries):\n", f.metadata().entries().size());
  for (const auto& [key, value] : f.metadata().entries()) {
    std::printf("  %-28s %s\n", key.c_str(), MetaValueToString(value).c_str());
  }
  // The converter's request, to mark tensors stored otherwise (docs/vqf.md, "Conversion rule").
  const auto requested_type = f.metadata().GetString("general.requested_type");
  const auto requested_layout = f.metadata().GetString("general.requested_layout");
  std::printf("\ntensors (%zu):\n  %-32s %-6s %-7s %-18s %12s %12s  %s\n", f.tensors().size(), "name", "dtype", "layout",
              "shape", "offset", "bytes", "choice");
  for (const TensorInfo& t : f.tensors()) {
    std::string shape;
    for (size_t i = 0; i < t.dims.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.dims[i]);
    std::string choice;
    if (t.dims.size() < 2) {
      choice = "1-D: f32";
    } else if (requested_type.ok()) {
      // "source": every matrix kept its source dtype (a quantized source always has whole blocks).
      const bool type_differs = *requested_type != "source" && *requested_type != DTypeName(t.dtype);
      const bool layout_differs = requested_layout.ok() && *requested_layout == "tiled" && t.layout == Layout::kPlain &&
                                  IsBlockQuantized(t.dtype);
      if (type_differs) {
        choice = t.columns() % kQuantBlockSize != 0 ? "row length not a multiple of 32: " : "";
        choice += std::string(*requested_type) + " -> " + DTypeName(t.dtype);
      }
      if (layout_differs) choice += std::string(choice.empty() ? "" : "; ") + "no full tiles: plain";
      if (choice.empty()) choice = "as requested";
    }
    std::printf("  %-32s %-6s %-7s %-18s %12llu %12llu  %s\n", t.name.c_str(), DTypeName(t.dtype), LayoutName(t.layout),
                shape.c_str(), static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(t.bytes),
                choice.c_str());
  }
  return 0;
}
