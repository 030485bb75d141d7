// Weight layouts: how the blocks of a quantized matrix are arranged in the file.
// A tensor states its layout; readers never guess it. Repacking functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "format/dtype.h"
#include "format/layout_types.h"

namespace kestrel {


const char* LayoutName(Layout l);
std::optional<Layout> LayoutFromName(std::string_view name);
bool IsKnownLayout(uint32_t raw);

// Rows interleaved in one tile (1 for plain), and the dtype a tiled layout requires.
int LayoutTileRows(Layout l);
// Bytes of interleaved quant data each row contributes per chunk within a tile's block group.
int LayoutChunkBytes(Layout l);
std::optional<DType> LayoutRequiredDType(Layout l);

// Checks that a (dtype, layout, shape) combination is representable; shape is
// {columns, rows, ...} with columns the contiguous dimension (GGUF order).
absl::Status CheckLayoutFits(DType t, Layout l, int64_t columns, int64_t rows);

// Byte size of a 2-D matrix of `rows` x `columns` in the given dtype and layout (same for every layout).
size_t MatrixBytes(DType t, int64_t columns, int64_t rows);

// Tiled layouts. In a tile of R rows (R = LayoutTileRows), block column b is stored as a group:
// the R fp16 scales of the rows' blocks, then their quant bytes interleaved in chunks of
// C = LayoutChunkBytes bytes: chunk k of row r lands at offset (k * R + r) * C.
// Tiles follow one another; within a tile, block columns ascend.
void RepackPlainToTiled(Layout l, const void* plain, void* tiled, int64_t columns, int64_t rows);
void RepackTiledToPlain(Layout l, const void* tiled, void* plain, int64_t columns, int64_t rows);

// Where block column b of tile `tile` keeps its R scales and its interleaved quants (byte offsets
// from the matrix's start), for any tiled layout. In q4_0x4_lines (in memory only) each tile's
// groups are taken 8 at a time (kLineRunBlocks): their 576 bytes, 9 cache lines, hold the 8 groups'
// scales (8 bytes each) and then each group's 64 quant bytes, so from a 64-byte aligned start every
// group's quants fill one line; the quants themselves are interleaved as in q4_0x4.
struct TiledGroup {
  size_t scales, quants;
};
inline constexpr int64_t kLineRunBlocks = 8;
TiledGroup TiledGroupAt(Layout l, int64_t columns, int64_t tile, int64_t b);

// Turns a q4_0x4 matrix into q4_0x4_lines in place (a permutation inside each run of 8 groups);
// CheckLayoutFits(kQ4_0, kQ4_0x4Lines, columns, rows) must hold.
void RegroupQ4_0x4ToLines(void* data, int64_t columns, int64_t rows);

// Dequantizes row `row` of a matrix in any layout into f32 (used for embeddings and checks).
void DequantizeMatrixRow(DType t, Layout l, const void* data, int64_t columns, int64_t row,
                         float* out);

}  // namespace kestrel
