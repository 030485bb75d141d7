// Weight layout names, size rules and the pure plain <-> tiled repacking functions.
#include "format/layout.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kestrel {

const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kPlain: return "plain";
    case Layout::kQ4_0x4: return "q4_0x4";
    case Layout::kQ8_0x8: return "q8_0x8";
    case Layout::kQ4_0x4Lines:
      return "q4_0x4_lines";
  }
  return "unknown";
}

std::optional<Layout> LayoutFromName(std::string_view name) {
  for (uint32_t i = 0; i < kLayoutCount; ++i) {
    if (LayoutName(static_cast<Layout>(i)) == name) return static_cast<Layout>(i);
  }
  return std::nullopt;
}

bool IsKnownLayout(uint32_t raw) { return raw < kLayoutCount; }

int LayoutTileRows(Layout l) {
  switch (l) {
    case Layout::kPlain: return 1;
    case Layout::kQ4_0x4: return 4;
    case Layout::kQ8_0x8: return 8;
    case Layout::kQ4_0x4Lines:
      return 4;
  }
  return 1;
}

int LayoutChunkBytes(Layout l) {
  switch (l) {
    case Layout::kPlain: return 0;
    case Layout::kQ4_0x4: return 4;  // 4 bytes = 8 nibbles: one sdot lane group per row
    case Layout::kQ8_0x8: return 8;  // 8 bytes per row per chunk: two sdot lanes
    case Layout::kQ4_0x4Lines:
      return 4;
  }
  return 0;
}

std::optional<DType> LayoutRequiredDType(Layout l) {
  switch (l) {
    case Layout::kPlain: return std::nullopt;
    case Layout::kQ4_0x4: return DType::kQ4_0;
    case Layout::kQ8_0x8: return DType::kQ8_0;
    case Layout::kQ4_0x4Lines:
      return DType::kQ4_0;
  }
  return std::nullopt;
}

absl::Status CheckLayoutFits(DType t, Layout l, int64_t columns, int64_t rows) {
  if (columns <= 0 || rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("empty shape ", columns, "x", rows));
  }
  if (IsBlockQuantized(t) && columns % kQuantBlockSize != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dtype ", DTypeName(t), " needs a row length that is a multiple of ",
                                                   kQuantBlockSize, ", found ", columns));
  }
  if (l == Layout::kPlain) return absl::OkStatus();
  const auto required = LayoutRequiredDType(l);
  if (!required || *required != t) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", LayoutName(l), " cannot hold dtype ", DTypeName(t)));
  }
  if (rows % LayoutTileRows(l) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", LayoutName(l), " needs a row count that is a multiple of ",
                                                   LayoutTileRows(l), ", found ", rows));
  }
  if (l == Layout::kQ4_0x4Lines && columns % (kQuantBlockSize * kLineRunBlocks) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", LayoutName(l),
                                                   " needs a row length that is a multiple of ",
                                                   kQuantBlockSize * kLineRunBlocks, ", found ", columns));
  }
  return absl::OkStatus();
}

size_t MatrixBytes(DType t, int64_t columns, int64_t rows) {
  return DTypeRowBytes(t, columns) * static_cast<size_t>(rows);
}

TiledGroup TiledGroupAt(Layout l, int64_t columns, int64_t tile, int64_t b) {
  const int tile_rows = LayoutTileRows(l);
  const int64_t blocks_per_row = columns / kQuantBlockSize;
  const size_t group_bytes = DTypeBlockBytes(*LayoutRequiredDType(l)) * static_cast<size_t>(tile_rows);
  if (l == Layout::kQ4_0x4Lines) {
    // The run of 8 groups holding block b takes their bytes: 8 groups' scales, then 8 quant lines.
    const int64_t in_run = b % kLineRunBlocks;
    const size_t run = static_cast<size_t>(tile * blocks_per_row + b - in_run) * group_bytes;
    const size_t scale_bytes = 2 * static_cast<size_t>(tile_rows);
    return {run + scale_bytes * static_cast<size_t>(in_run),
            run + scale_bytes * kLineRunBlocks + (group_bytes - scale_bytes) * static_cast<size_t>(in_run)};
  }
  const size_t group = static_cast<size_t>(tile * blocks_per_row + b) * group_bytes;
  return {group, group + 2 * static_cast<size_t>(tile_rows)};
}

void RegroupQ4_0x4ToLines(void* data, int64_t columns, int64_t rows) {
  auto* bytes = static_cast<uint8_t*>(data);
  constexpr int kTileRows = 4;                                         // LayoutTileRows(kQ4_0x4)
  constexpr size_t kScales = 2 * kTileRows, kQuants = 16 * kTileRows;  // a group: 4 f16 scales, 4 rows' 16 quant bytes
  constexpr size_t kGroup = kScales + kQuants;
  uint8_t run[kGroup * kLineRunBlocks];
  const int64_t runs = rows / kTileRows * (columns / kQuantBlockSize / kLineRunBlocks);
  for (int64_t i = 0; i < runs; ++i) {
    uint8_t* at = bytes + static_cast<size_t>(i) * sizeof(run);
    std::memcpy(run, at, sizeof(run));
    for (size_t j = 0; j < kLineRunBlocks; ++j) {
      std::memcpy(at + kScales * j, run + kGroup * j, kScales);
      std::memcpy(at + kScales * kLineRunBlocks + kQuants * j, run + kGroup * j + kScales, kQuants);
    }
  }
}

namespace {

// Walks every (tile, block column, row in tile) and calls fn(plain_block, tiled_scale, tiled_quants,
// row_in_tile, quant_bytes, tile_rows).
template <typename Fn>
void ForEachTiledBlock(Layout l, int64_t columns, int64_t rows, Fn&& fn) {
  const int tile_rows = LayoutTileRows(l);
  const DType t = *LayoutRequiredDType(l);
  const size_t block_bytes = DTypeBlockBytes(t);
  const size_t quant_bytes = block_bytes - 2;
  const int64_t blocks_per_row = columns / kQuantBlockSize;
  for (int64_t tile = 0; tile < rows / tile_rows; ++tile) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const TiledGroup group = TiledGroupAt(l, columns, tile, b);
      for (int r = 0; r < tile_rows; ++r) {
        const int64_t row = tile * tile_rows + r;
        const size_t plain = static_cast<size_t>(row * blocks_per_row + b) * block_bytes;
        fn(plain, group.scales + 2 * r, group.quants, r, quant_bytes, tile_rows);
      }
    }
  }
}

}  // namespace

void RepackPlainToTiled(Layout l, const void* plain, void* tiled, int64_t columns, int64_t rows) {
  if (l == Layout::kPlain) return;  // callers pass a tiled layout; plain needs no repacking
  const auto* src = static_cast<const uint8_t*>(plain);
  auto* dst = static_cast<uint8_t*>(tiled);
  const int chunk = LayoutChunkBytes(l);
  ForEachTiledBlock(l, columns, rows,
                    [&](size_t p, size_t scale, size_t quants, int r, size_t quant_bytes, int tile_rows) {
                      std::memcpy(dst + scale, src + p, 2);
                      for (size_t k = 0; k < quant_bytes / chunk; ++k) {
                        std::memcpy(dst + quants + (k * tile_rows + r) * chunk, src + p + 2 + k * chunk, chunk);
                      }
                    });
}

void RepackTiledToPlain(Layout l, const void* tiled, void* plain, int64_t columns, int64_t rows) {
  if (l == Layout::kPlain) return;
  const auto* src = static_cast<const uint8_t*>(tiled);
  auto* dst = static_cast<uint8_t*>(plain);
  const int chunk = LayoutChunkBytes(l);
  ForEachTiledBlock(l, columns, rows,
                    [&](size_t p, size_t scale, size_t quants, int r, size_t quant_bytes, int tile_rows) {
                      std::memcpy(dst + p, src + scale, 2);
                      for (size_t k = 0; k < quant_bytes / chunk; ++k) {
                        std::memcpy(dst + p + 2 + k * chunk, src + quants + (k * tile_rows + r) * chunk, chunk);
                      }
                    });
}

void DequantizeMatrixRow(DType t, Layout l, const void* data, int64_t columns, int64_t row, float* out) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (l == Layout::kPlain) {
    DequantizeRow(t, bytes + DTypeRowBytes(t, columns) * static_cast<size_t>(row), out, columns);
    return;
  }
  // Gather the row's blocks back into plain form, then decode.
  const int tile_rows = LayoutTileRows(l);
  const size_t block_bytes = DTypeBlockBytes(t);
  const int chunk = LayoutChunkBytes(l);
  const int64_t blocks_per_row = columns / kQuantBlockSize;
  const int64_t tile = row / tile_rows;
  const int r = static_cast<int>(row % tile_rows);
  uint8_t block[64];  // largest block is 34 bytes; no heap use on the per-token path
  for (int64_t b = 0; b < blocks_per_row; ++b) {
    const TiledGroup group = TiledGroupAt(l, columns, tile, b);
    std::memcpy(block, bytes + group.scales + 2 * r, 2);
    const size_t quants = group.quants;
    for (size_t k = 0; k < (block_bytes - 2) / chunk; ++k) {
      std::memcpy(block + 2 + k * chunk, bytes + quants + (k * tile_rows + r) * chunk, chunk);
    }
    DequantizeRow(t, block, out + b * kQuantBlockSize, kQuantBlockSize);
  }
}

}  // namespace kestrel
