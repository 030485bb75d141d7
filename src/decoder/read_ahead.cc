#include "decoder/read_ahead.h"

#include <algorithm>

#include "decoder/row_scheduler.h"
#include "format/layout.h"

namespace kestrel {

ReadAhead ReadAhead::ShareStart(const MatrixView* const* matrices, int count, int part, int parts, int64_t bytes) {
  if (count < 1 || parts < 1 || part < 0 || part >= parts || bytes <= 0) return {};
  const SharePoint s = FindShareStart(
      count, part, parts, [&](int i) { return matrices[i]->rows; },
      [&](int i) { return ChunkRowAlign(matrices[i]->layout); });
  if (s.matrix >= count) return {};  // no rows
  const MatrixView& m = *matrices[s.matrix];
  // Tiles follow one another, so a tile's first row starts at the bytes of the rows before it.
  const auto* base = static_cast<const uint8_t*>(m.data);
  const uint8_t* from = base + MatrixBytes(m.dtype, m.columns, s.row);
  const uint8_t* end = base + MatrixBytes(m.dtype, m.columns, m.rows);
  return {from, from + std::min<int64_t>(end - from, bytes)};
}

}  // namespace kestrel
