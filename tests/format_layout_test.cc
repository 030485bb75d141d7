// Tests of the weight layouts: plain <-> tiled repacking round trips, per-row dequantization in every
// layout, the documented tiled byte positions, and which (dtype, layout, shape) combinations fit.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "format/layout.h"

namespace kestrel {
namespace {

// A plain quantized matrix of random weights, with a few rows made distinctive (zero, huge).
std::vector<uint8_t> RandomPlainMatrix(DType t, int64_t columns, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint8_t> out(MatrixBytes(t, columns, rows));
  std::vector<float> row(static_cast<size_t>(columns));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng) * static_cast<float>(r + 1);
    if (r == 1) std::fill(row.begin(), row.end(), 0.0f);
    EncodeRow(t, row.data(), out.data() + DTypeRowBytes(t, columns) * static_cast<size_t>(r), columns);
  }
  return out;
}

struct Shape {
  int64_t columns, rows;
};

TEST_CASE("Layout names, tile rows, chunk bytes and flags", "[layout]") {
  REQUIRE(LayoutTileRows(Layout::kPlain) == 1);
  REQUIRE(LayoutTileRows(Layout::kQ4_0x4) == 4);
  REQUIRE(LayoutTileRows(Layout::kQ8_0x8) == 8);
  REQUIRE(LayoutChunkBytes(Layout::kQ4_0x4) == 4);
  REQUIRE(LayoutChunkBytes(Layout::kQ8_0x8) == 8);
  REQUIRE(LayoutRequiredDType(Layout::kQ4_0x4) == DType::kQ4_0);
  REQUIRE(LayoutRequiredDType(Layout::kQ8_0x8) == DType::kQ8_0);
  REQUIRE_FALSE(LayoutRequiredDType(Layout::kPlain).has_value());
  REQUIRE(LayoutFlag(Layout::kPlain) == 1u);
  REQUIRE(LayoutFlag(Layout::kQ4_0x4) == 2u);
  REQUIRE(LayoutFlag(Layout::kQ8_0x8) == 4u);
  REQUIRE(kKnownLayoutFlags == 7u);
  for (uint32_t i = 0; i < kLayoutCount; ++i) {
    REQUIRE(IsKnownLayout(i));
    REQUIRE(LayoutFromName(LayoutName(static_cast<Layout>(i))) == static_cast<Layout>(i));
  }
  REQUIRE_FALSE(IsKnownLayout(kLayoutCount));
  REQUIRE_FALSE(LayoutFromName("q4_0x8").has_value());
}

TEST_CASE("Repack plain -> tiled -> plain is bit-exact", "[layout]") {
  const Shape shapes[] = {{32, 8}, {64, 8}, {96, 16}, {256, 24}, {32, 64}, {160, 40}, {512, 8}};
  for (Layout l : {Layout::kQ4_0x4, Layout::kQ8_0x8}) {
    const DType t = *LayoutRequiredDType(l);
    for (const Shape& s : shapes) {
      INFO(LayoutName(l) << " " << s.columns << "x" << s.rows);
      REQUIRE(CheckLayoutFits(t, l, s.columns, s.rows).ok());
      const std::vector<uint8_t> plain = RandomPlainMatrix(t, s.columns, s.rows, 17);
      std::vector<uint8_t> tiled(plain.size(), 0xcd), back(plain.size(), 0xcd);
      RepackPlainToTiled(l, plain.data(), tiled.data(), s.columns, s.rows);
      RepackTiledToPlain(l, tiled.data(), back.data(), s.columns, s.rows);
      REQUIRE(back == plain);
      // Tiling really moves bytes (except in the degenerate one-chunk case, which does not exist).
      REQUIRE(tiled != plain);
      // The opposite direction round trips too: tiled -> plain -> tiled.
      std::vector<uint8_t> retiled(plain.size(), 0);
      RepackPlainToTiled(l, back.data(), retiled.data(), s.columns, s.rows);
      REQUIRE(retiled == tiled);
      // Every row decodes to the same floats from either layout.
      std::vector<float> from_plain(static_cast<size_t>(s.columns)), from_tiled(static_cast<size_t>(s.columns));
      for (int64_t r = 0; r < s.rows; ++r) {
        DequantizeMatrixRow(t, Layout::kPlain, plain.data(), s.columns, r, from_plain.data());
        DequantizeMatrixRow(t, l, tiled.data(), s.columns, r, from_tiled.data());
        REQUIRE(std::memcmp(from_plain.data(), from_tiled.data(), from_plain.size() * 4) == 0);
        std::vector<float> direct(static_cast<size_t>(s.columns));
        DequantizeRow(t, plain.data() + DTypeRowBytes(t, s.columns) * static_cast<size_t>(r), direct.data(), s.columns);
        REQUIRE(std::memcmp(direct.data(), from_plain.data(), direct.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("Tiled byte positions follow docs/vqf.md", "[layout]") {
  // Fill the plain matrix with a byte pattern that names (row, block, byte) so every byte can be
  // located in the tiled result by the documented formula.
  for (Layout l : {Layout::kQ4_0x4, Layout::kQ8_0x8}) {
    const DType t = *LayoutRequiredDType(l);
    const int64_t columns = 96, rows = 2 * LayoutTileRows(l);
    const int R = LayoutTileRows(l), C = LayoutChunkBytes(l);
    const size_t block_bytes = DTypeBlockBytes(t);
    const int64_t blocks_per_row = columns / 32;
    std::vector<uint8_t> plain(MatrixBytes(t, columns, rows));
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 131 + 7);
    std::vector<uint8_t> tiled(plain.size());
    RepackPlainToTiled(l, plain.data(), tiled.data(), columns, rows);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        const uint8_t* src = plain.data() + (row * blocks_per_row + b) * block_bytes;
        const int64_t tile = row / R;
        const int r = static_cast<int>(row % R);
        const uint8_t* group = tiled.data() + (tile * blocks_per_row + b) * block_bytes * R;
        INFO(LayoutName(l) << " row " << row << " block " << b);
        // R fp16 scales first, row r's at 2*r.
        REQUIRE(std::memcmp(group + 2 * r, src, 2) == 0);
        // Then the quants: chunk k of row r at offset (k*R + r)*C after the scales.
        const uint8_t* quants = group + 2 * R;
        for (size_t k = 0; k < (block_bytes - 2) / static_cast<size_t>(C); ++k) {
          REQUIRE(std::memcmp(quants + (k * R + r) * C, src + 2 + k * C, C) == 0);
        }
      }
    }
  }
}

// q4_0x4_lines (in memory only): each tile's groups 8 at a time, their scales first and then each
// group's quant bytes in a 64-byte line of its own; regrouping q4_0x4 in place gives what repacking
// plain rows into it gives, and every row decodes to the plain row's values.
TEST_CASE("q4_0x4_lines: byte positions, in-place regrouping, and rows", "[layout]") {
  const Layout l = Layout::kQ4_0x4Lines;
  REQUIRE(LayoutTileRows(l) == 4);
  REQUIRE(LayoutRequiredDType(l) == DType::kQ4_0);
  REQUIRE(std::string(LayoutName(l)) == "q4_0x4_lines");
  // Never in a file: readers refuse its id, and no name maps to it.
  REQUIRE_FALSE(IsKnownLayout(static_cast<uint32_t>(l)));
  REQUIRE_FALSE(LayoutFromName("q4_0x4_lines").has_value());
  REQUIRE(CheckLayoutFits(DType::kQ4_0, l, 256, 4).ok());
  REQUIRE(CheckLayoutFits(DType::kQ4_0, l, 2048, 12).ok());
  REQUIRE_FALSE(CheckLayoutFits(DType::kQ4_0, l, 224, 4).ok());  // 7 blocks: not a whole run
  REQUIRE_FALSE(CheckLayoutFits(DType::kQ4_0, l, 256, 6).ok());
  REQUIRE_FALSE(CheckLayoutFits(DType::kQ8_0, l, 256, 4).ok());
  const int64_t columns = 512, rows = 12, blocks = columns / 32;
  std::vector<uint8_t> plain(MatrixBytes(DType::kQ4_0, columns, rows));
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> x4(plain.size()), lines(plain.size()), regrouped;
  RepackPlainToTiled(Layout::kQ4_0x4, plain.data(), x4.data(), columns, rows);
  RepackPlainToTiled(l, plain.data(), lines.data(), columns, rows);
  regrouped = x4;
  RegroupQ4_0x4ToLines(regrouped.data(), columns, rows);
  REQUIRE(regrouped == lines);
  REQUIRE(lines != x4);
  std::vector<uint8_t> back(plain.size());
  RepackTiledToPlain(l, lines.data(), back.data(), columns, rows);
  REQUIRE(back == plain);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t b = 0; b < blocks; ++b) {
      INFO("row " << row << " block " << b);
      const uint8_t* src = plain.data() + (row * blocks + b) * 18;
      const int64_t tile = row / 4, r = row % 4;
      // The run of 8 groups holding block b: 576 bytes where q4_0x4 has those 8 groups.
      const size_t run = static_cast<size_t>(tile * blocks + b / 8 * 8) * 72;
      const size_t scales = run + 8 * static_cast<size_t>(b % 8), quants = run + 64 + 64 * static_cast<size_t>(b % 8);
      const TiledGroup at = TiledGroupAt(l, columns, tile, b);
      REQUIRE(at.scales == scales);
      REQUIRE(at.quants == quants);
      REQUIRE(quants % 64 == 0);  // a line of its own from an aligned start
      REQUIRE(std::memcmp(lines.data() + scales + 2 * r, src, 2) == 0);
      for (int k = 0; k < 4; ++k)
        REQUIRE(std::memcmp(lines.data() + quants + (k * 4 + r) * 4, src + 2 + 4 * k, 4) == 0);
    }
    std::vector<float> want(columns), got(columns);
    DequantizeMatrixRow(DType::kQ4_0, Layout::kPlain, plain.data(), columns, row, want.data());
    DequantizeMatrixRow(DType::kQ4_0, l, lines.data(), columns, row, got.data());
    REQUIRE(std::memcmp(want.data(), got.data(), want.size() * 4) == 0);
  }
}

TEST_CASE("Plain layout repack is a no-op and plain rows decode for every dtype", "[layout]") {
  const int64_t columns = 64, rows = 5;
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    const auto t = static_cast<DType>(i);
    const std::vector<uint8_t> plain = RandomPlainMatrix(t, columns, rows, 3);
    std::vector<uint8_t> dst(plain.size(), 0xab);
    RepackPlainToTiled(Layout::kPlain, plain.data(), dst.data(), columns, rows);
    REQUIRE(dst == std::vector<uint8_t>(plain.size(), 0xab));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> a(columns), b(columns);
      DequantizeMatrixRow(t, Layout::kPlain, plain.data(), columns, r, a.data());
      DequantizeRow(t, plain.data() + DTypeRowBytes(t, columns) * static_cast<size_t>(r), b.data(), columns);
      REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    }
  }
}

TEST_CASE("CheckLayoutFits accepts and refuses the right combinations", "[layout]") {
  const auto fits = [](DType t, Layout l, int64_t c, int64_t r) { return CheckLayoutFits(t, l, c, r).ok(); };
  // Plain: any positive shape for scalar types; block types need whole blocks per row.
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    REQUIRE(fits(t, Layout::kPlain, 1, 1));
    REQUIRE(fits(t, Layout::kPlain, 7, 3));
    REQUIRE_FALSE(fits(t, Layout::kQ4_0x4, 32, 4));
    REQUIRE_FALSE(fits(t, Layout::kQ8_0x8, 32, 8));
  }
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    REQUIRE(fits(t, Layout::kPlain, 32, 1));
    REQUIRE(fits(t, Layout::kPlain, 64, 3));
    REQUIRE_FALSE(fits(t, Layout::kPlain, 33, 1));
    REQUIRE_FALSE(fits(t, Layout::kPlain, 16, 4));
  }
  // Tiled: only with its own dtype, whole blocks and whole tiles.
  REQUIRE(fits(DType::kQ4_0, Layout::kQ4_0x4, 32, 4));
  REQUIRE(fits(DType::kQ4_0, Layout::kQ4_0x4, 64, 12));
  REQUIRE_FALSE(fits(DType::kQ4_0, Layout::kQ4_0x4, 64, 6));
  REQUIRE_FALSE(fits(DType::kQ4_0, Layout::kQ4_0x4, 48, 4));
  REQUIRE_FALSE(fits(DType::kQ4_0, Layout::kQ8_0x8, 32, 8));
  REQUIRE(fits(DType::kQ8_0, Layout::kQ8_0x8, 32, 8));
  REQUIRE(fits(DType::kQ8_0, Layout::kQ8_0x8, 128, 64));
  REQUIRE_FALSE(fits(DType::kQ8_0, Layout::kQ8_0x8, 128, 4));
  REQUIRE_FALSE(fits(DType::kQ8_0, Layout::kQ8_0x8, 40, 8));
  REQUIRE_FALSE(fits(DType::kQ8_0, Layout::kQ4_0x4, 32, 4));
  // Empty or negative shapes are refused everywhere.
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    REQUIRE_FALSE(fits(static_cast<DType>(i), Layout::kPlain, 0, 1));
    REQUIRE_FALSE(fits(static_cast<DType>(i), Layout::kPlain, 32, 0));
    REQUIRE_FALSE(fits(static_cast<DType>(i), Layout::kPlain, -32, 1));
    REQUIRE_FALSE(fits(static_cast<DType>(i), Layout::kPlain, 32, -1));
  }
  // The messages say what is wrong.
  const std::string rows_msg(CheckLayoutFits(DType::kQ8_0, Layout::kQ8_0x8, 32, 12).message());
  REQUIRE(rows_msg.find("multiple of 8") != std::string::npos);
  const std::string cols_msg(CheckLayoutFits(DType::kQ4_0, Layout::kPlain, 40, 1).message());
  REQUIRE(cols_msg.find("multiple of 32") != std::string::npos);
  const std::string dtype_msg(CheckLayoutFits(DType::kF16, Layout::kQ4_0x4, 32, 4).message());
  REQUIRE(dtype_msg.find("cannot hold dtype f16") != std::string::npos);
}

TEST_CASE("MatrixBytes is the same for every layout", "[layout]") {
  REQUIRE(MatrixBytes(DType::kQ4_0, 64, 8) == 2 * 18 * 8);
  REQUIRE(MatrixBytes(DType::kQ8_0, 96, 16) == 3 * 34 * 16);
  REQUIRE(MatrixBytes(DType::kF32, 7, 3) == 84);
  REQUIRE(MatrixBytes(DType::kBF16, 7, 3) == 42);
}

}  // namespace
}  // namespace kestrel
