#include "decoder/read_ahead.h"

#include <algorithm>

#include "format/layout.h"

namespace kestrel {

ReadAhead ReadAhead::ShareStart(const MatrixView* const* matrices, int count, int part, int parts, int64_t bytes) {
  if (count < 1 || parts < 1 || part < 0 || part >= parts || bytes <= 0) return {};
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += matrices[i]->rows;
  if (total <= 0) return {};
  int64_t row = total * part / parts;  // < total, so it falls in one of the matrices
  int i = 0;
  while (i + 1 < count && row >= matrices[i]->rows) row -= matrices[i++]->rows;
  const MatrixView& m = *matrices[i];
  // Tiles follow one another, so a tile's first row starts at the bytes of the rows before it.
  const auto* base = static_cast<const uint8_t*>(m.data);
  const uint8_t* from = base + MatrixBytes(m.dtype, m.columns, row / 16 * 16);
  const uint8_t* end = base + MatrixBytes(m.dtype, m.columns, m.rows);
  return {from, from + std::min<int64_t>(end - from, bytes)};
}

}  // namespace kestrel
