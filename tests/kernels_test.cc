// Kernel conformance. Every compiled backend's kernel table is checked against the generic
// reference (exact for integer block products, a stated tolerance for float math), and the
// generic reference itself against an independent double-precision computation. Backends whose
// ISA this CPU lacks are reported as skipped, never as passed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "backend/faster_path.h"
#include "backend/q8_0_summary.h"
#include "backend/registry.h"
#include "backend/rope_angles.h"
#include "format/dtype.h"
#include "format/layout.h"
#include "platform/huge_page_buffer.h"
#include "platform/uniform_float.h"

namespace kestrel {
namespace {

const Backend& Generic() {
  for (const Backend* b : CompiledBackends()) {
    if (std::string(b->name) == "generic") return *b;
  }
  FAIL("generic backend missing");
  std::abort();
}

// The compiled backends this CPU can run, each one it cannot reported as skipped.
std::vector<const Backend*> RunnableBackends() {
  std::vector<const Backend*> runnable;
  for (const Backend* b : CompiledBackends()) {
    if (b->cpu_supports()) {
      runnable.push_back(b);
    } else {
      WARN("SKIPPED: backend " << b->name << " (this CPU lacks its features)");
    }
  }
  return runnable;
}

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  UniformFloat dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random keys and values for `positions` cached rows `stride` floats apart, as f32 and as f16;
// k() and v() point at the ones of `dtype`.
struct KvRowsFixture {
  std::vector<float> kf, vf;
  std::vector<uint16_t> kh, vh;
  DType dtype;
  KvRowsFixture(int64_t positions, int64_t stride, DType kv, uint32_t seed)
      : kf(RandomVector(static_cast<size_t>(positions * stride), seed)),
        vf(RandomVector(static_cast<size_t>(positions * stride), seed + 1)),
        kh(kf.size()),
        vh(vf.size()),
        dtype(kv) {
    for (size_t i = 0; i < kf.size(); ++i) {
      kh[i] = Fp32ToFp16(kf[i]);
      vh[i] = Fp32ToFp16(vf[i]);
    }
  }
  const void* k() const { return dtype == DType::kF16 ? static_cast<const void*>(kh.data()) : kf.data(); }
  const void* v() const { return dtype == DType::kF16 ? static_cast<const void*>(vh.data()) : vf.data(); }
};

// A weight matrix encoded in dtype + layout, kept with its f32 dequantized values.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;
  MatrixView view;
};

TestMatrix MakeMatrix(DType dtype, Layout layout, int64_t columns, int64_t rows, uint32_t seed) {
  TestMatrix m;
  const auto values = RandomVector(static_cast<size_t>(columns * rows), seed);
  const size_t row_bytes = DTypeRowBytes(dtype, columns);
  std::vector<uint8_t> plain(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) EncodeRow(dtype, values.data() + r * columns, plain.data() + r * row_bytes, columns);
  m.dequantized.resize(values.size());
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(dtype, plain.data() + r * row_bytes, m.dequantized.data() + r * columns, columns);
  if (layout == Layout::kPlain) {
    m.bytes = std::move(plain);
  } else {
    m.bytes.resize(plain.size());
    RepackPlainToTiled(layout, plain.data(), m.bytes.data(), columns, rows);
  }
  m.view = MatrixView{dtype, layout, m.bytes.data(), columns, rows};
  return m;
}

// Row r of m times token t of x (columns values a token), in double precision, with the sum of
// the products' magnitudes (what float rounding bounds are proportional to).
struct ExactDot {
  double value = 0, magnitude = 0;
};
ExactDot Dot(const TestMatrix& m, int64_t r, const std::vector<float>& x, int64_t t, int64_t columns) {
  ExactDot d;
  for (int64_t i = 0; i < columns; ++i) {
    const double p = double{m.dequantized[r * columns + i]} * x[t * columns + i];
    d.value += p;
    d.magnitude += std::fabs(p);
  }
  return d;
}

struct MatmulCase {
  DType dtype;
  Layout layout;
};

const MatmulCase kMatmulCases[] = {
    {DType::kF32, Layout::kPlain},
    {DType::kF16, Layout::kPlain},
    {DType::kBF16, Layout::kPlain},
    {DType::kQ8_0, Layout::kPlain},
    {DType::kQ4_0, Layout::kPlain},
    {DType::kQ8_0, Layout::kQ8_0x8},
    {DType::kQ4_0, Layout::kQ4_0x4},
    // In memory only (the loader regroups q4_0x4 for backends that want it); rows of whole
    // 8-block runs, so the shapes below skip it where it does not fit (CheckLayoutFits).
    {DType::kQ4_0, Layout::kQ4_0x4Lines},
};

// Shape classes: 1..17, tile sizes +-1, large and odd.
std::vector<int64_t> RowCounts(Layout layout) {
  const int tile = LayoutTileRows(layout);
  std::vector<int64_t> rows;
  for (int64_t r = 1; r <= 17; ++r) rows.push_back(r);
  for (int64_t r : {int64_t{tile} * 4 - 1, int64_t{tile} * 4, int64_t{tile} * 4 + 1, int64_t{tile} * 16 + 1, int64_t{301}}) rows.push_back(r);
  // Past a 16-row register group by one tile, for the tiled layouts too.
  for (int64_t r : {int64_t{tile} * 5, int64_t{tile} * 9}) rows.push_back(r);
  std::vector<int64_t> fitting;
  for (int64_t r : rows) {
    if (r % tile == 0) fitting.push_back(r);
  }
  return fitting;
}

std::vector<int64_t> ColumnCounts(DType dtype, Layout layout) {
  if (layout == Layout::kQ4_0x4Lines) return {256, 768};  // one 8-block run a row, and three
  if (IsBlockQuantized(dtype)) return {32, 64, 96, 160, 544};
  return {1, 2, 3, 7, 16, 17, 31, 32, 33, 172, 515};
}

// The inputs of a product as the session prepares them: for quantized weights, the Q8_0 rows and
// each block's sum and f32 scale (kernels.h).
struct Input {
  std::vector<int32_t> sums;
  std::vector<float> scales;
  Activations x;
  Input(const std::vector<float>& xf, const std::vector<BlockQ8_0>& xq, int64_t tokens, int64_t columns)
      : sums(xq.size()), scales(xq.size()), x{xf.data(), xq.empty() ? nullptr : xq.data(), tokens, columns} {
    if (xq.empty()) return;
    SummarizeQ8_0Blocks(xq.data(), static_cast<int64_t>(xq.size()), sums.data(), scales.data());
    x.q8_0_sums = sums.data();
    x.q8_0_scales = scales.data();
  }
  std::vector<int32_t> offsets;  // Q4_0's offsets table, where a test asks for one (WithQ4_0Offsets)
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
};

void RunMatmul(const Backend& b, const MatrixView& w, const Activations& x, std::vector<float>* y, int splits) {
  y->assign(static_cast<size_t>(x.n_tokens * w.rows), std::numeric_limits<float>::quiet_NaN());
  const int tile = LayoutTileRows(w.layout);
  // Row ranges as the thread pool would split them, to exercise row_begin / row_end.
  const int64_t units = (w.rows + tile - 1) / tile;
  for (int s = 0; s < splits; ++s) {
    const int64_t begin = std::min(w.rows, units * s / splits * tile);
    const int64_t end = std::min(w.rows, units * (s + 1) / splits * tile);
    if (begin < end) b.kernels->matmul(w, x, y->data(), w.rows, begin, end);
  }
}

TEST_CASE("generic matmul agrees with a double-precision product of the dequantized weights", "[kernels][generic]") {
  const Backend& ref = Generic();
  for (const MatmulCase& c : kMatmulCases) {
    for (int64_t columns : ColumnCounts(c.dtype, c.layout)) {
      for (int64_t rows : RowCounts(c.layout)) {
        for (int64_t tokens : {1, 3}) {
          INFO(DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << columns << "x" << rows << " tokens " << tokens);
          TestMatrix m = MakeMatrix(c.dtype, c.layout, columns, rows, static_cast<uint32_t>(columns * 131 + rows));
          auto xf = RandomVector(static_cast<size_t>(columns * tokens), 7);
          std::vector<BlockQ8_0> xq;
          std::vector<float> x_used = xf;  // what the kernel really multiplies
          if (IsBlockQuantized(c.dtype)) {
            xq.resize(static_cast<size_t>(columns / 32 * tokens));
            for (int64_t t = 0; t < tokens; ++t) {
              QuantizeRowQ8_0(xf.data() + t * columns, xq.data() + t * columns / 32, columns);
              DequantizeRow(DType::kQ8_0, xq.data() + t * columns / 32, x_used.data() + t * columns, columns);
            }
          }
          const Input input(xf, xq, tokens, columns);
          const Activations& x = input.x;
          std::vector<float> y;
          RunMatmul(ref, m.view, x, &y, 3);
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const ExactDot exact = Dot(m, r, x_used, t, columns);
              // f32 accumulation error bound: columns * eps * sum|products|, plus fp16 scale products.
              const double tolerance = 1e-6 + exact.magnitude * (columns + 8) * 1.2e-7;
              REQUIRE(std::fabs(y[t * rows + r] - exact.value) <= tolerance);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("every backend's matmul matches the generic reference", "[kernels][conformance]") {
  const Backend& ref = Generic();
  for (const Backend* b : RunnableBackends()) {
    for (const MatmulCase& c : kMatmulCases) {
      if (!b->accepts(c.dtype, c.layout)) continue;
      // Float products tile tokens by 2 on x86: odd and even counts, one tile and several.
      const std::vector<int64_t> token_counts =
          IsBlockQuantized(c.dtype) ? std::vector<int64_t>{1, 2, 5} : std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 13};
      for (int64_t columns : ColumnCounts(c.dtype, c.layout)) {
        for (int64_t rows : RowCounts(c.layout)) {
          for (int64_t tokens : token_counts) {
            INFO(b->name << " " << DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << columns << "x" << rows
                         << ", " << tokens << " tokens");
            TestMatrix m = MakeMatrix(c.dtype, c.layout, columns, rows, static_cast<uint32_t>(rows * 17 + columns));
            auto xf = RandomVector(static_cast<size_t>(columns * tokens), 11);
            std::vector<BlockQ8_0> xq;
            if (IsBlockQuantized(c.dtype)) {
              xq.resize(static_cast<size_t>(columns / 32 * tokens));
              for (int64_t t = 0; t < tokens; ++t) ref.kernels->quantize_q8_0(xf.data() + t * columns, xq.data() + t * columns / 32, columns);
            }
            const Input input(xf, xq, tokens, columns);
            const Activations& x = input.x;
            std::vector<float> expected, got;
            RunMatmul(ref, m.view, x, &expected, 1);
            RunMatmul(*b, m.view, x, &got, 2);
            for (size_t i = 0; i < expected.size(); ++i) {
              const float tolerance = IsBlockQuantized(c.dtype) ? 0.0f : 1e-5f * (1.0f + std::fabs(expected[i])) * columns;
              REQUIRE(std::fabs(got[i] - expected[i]) <= tolerance);
            }
          }
        }
      }
    }
  }
}

// Quantized products as prefill and decode call them: every token count from 1 to 17 (past any
// token tile of 8 or 16 plus a remainder), 31 to 33 (two 16-token tiles and one either side) and 300 (past a chunk of tokens), rows past a 16-row group, split into ranges that do not
// start on a multiple of 16, and rows of thousands of blocks (past any per-call stack budget).
TEST_CASE("every backend's quantized matmul is exact for 1 to 17 tokens and for wide rows", "[kernels][conformance]") {
  const Backend& ref = Generic();
  struct Shape {
    int64_t columns;
    std::vector<int64_t> tokens;
  };
  std::vector<int64_t> all_tokens;
  for (int64_t t = 1; t <= 17; ++t) all_tokens.push_back(t);
  for (int64_t t : {31, 32, 33}) all_tokens.push_back(t);  // amx_int8's 16-token tiles: two, and one either side
  const Shape shapes[] = {
      {96, all_tokens},
      // amx_int8's block loop (two blocks a step, the first three before it): one block, an even
      // count, and an odd count past one step.
      {32, {8, 16, 17}},
      {128, {16}},
      {32 * 7, {9}},
      {32 * 2107, {1, 3, 9, 17}},
      {32 * 8193, {1, 3}},  // past avx2's 8192-block stack budget: its fallback path
      {64, {300}},          // past avx512_vnni's 256-token chunk
      // Whole 8-block runs for q4_0x4_lines (the shapes above, but 128, skip it): one run, rows
      // of 9 runs (past a chunk of 32 blocks and a 2048-column row), and past the 256-token chunk.
      // Its decode keeps nothing per row on the stack, so no rows of thousands of blocks: under
      // qemu they doubled this test's time.
      {256, all_tokens},
      {32 * 8 * 9, {1, 3, 9, 17}},
      {512, {300}},
  };
  for (const Backend* b : RunnableBackends()) {
    for (const MatmulCase& c : kMatmulCases) {
      if (!IsBlockQuantized(c.dtype) || !b->accepts(c.dtype, c.layout)) continue;
      for (const Shape& shape : shapes) {
        // Two 16-row groups and one tile more.
        const int64_t columns = shape.columns, rows = 32 + LayoutTileRows(c.layout);
        if (!CheckLayoutFits(c.dtype, c.layout, columns, rows).ok()) continue;
        TestMatrix m = MakeMatrix(c.dtype, c.layout, columns, rows, static_cast<uint32_t>(columns + rows));
        const int64_t max_tokens = shape.tokens.back();
        const auto xf = RandomVector(static_cast<size_t>(columns * max_tokens), 23);
        std::vector<BlockQ8_0> xq(static_cast<size_t>(columns / 32 * max_tokens));
        for (int64_t t = 0; t < max_tokens; ++t) {
          ref.kernels->quantize_q8_0(xf.data() + t * columns, xq.data() + t * columns / 32, columns);
        }
        for (int64_t tokens : shape.tokens) {
          // A backend's bf16 prompt products are not exact: the test below bounds them.
          if (TakesBf16Path(*b->kernels, c.dtype, tokens)) continue;
          INFO(b->name << " " << DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << columns << "x" << rows
                       << " tokens " << tokens);
          Input input(xf, xq, tokens, columns);
          std::vector<float> expected, got;
          RunMatmul(ref, m.view, input.x, &expected, 1);
          // As the session calls it for a prompt's Q4_0 products, also with the offsets table
          // where the backend asks for one.
          const int64_t run = b->kernels->q4_0_offset_run;
          const bool table = run > 0 && c.dtype == DType::kQ4_0 && tokens > 1;
          std::vector<Activations> inputs = {input.x};
          if (table) inputs.push_back(WithQ4_0Offsets(input.x, run, &input.offsets));
          for (const Activations& x : inputs) {
            // One range (whole 16-row groups and a tile after them) and three (ranges of 12 rows);
            // each of the paths a kernel may choose between by speed (FasterPath): three at decode,
            // two in prefill (avx512_vnni's packed and unpacked Q4_0 strips).
            for (int path = 0; path < (tokens == 1 ? FasterPath::kMaxPaths : 2); ++path) {
              FasterPath::ForceForTesting(path);
              for (int splits : {1, 3}) {
                RunMatmul(*b, m.view, x, &got, splits);
                for (size_t i = 0; i < expected.size(); ++i) {
                  if (got[i] == expected[i]) continue;
                  INFO("offsets table " << (x.q4_0_offsets != nullptr) << " path " << path << " splits " << splits << " token "
                                        << static_cast<int64_t>(i) / rows << " row " << static_cast<int64_t>(i) % rows);
                  FasterPath::ForceForTesting(-1);
                  REQUIRE(got[i] == expected[i]);
                }
              }
            }
          }
          FasterPath::ForceForTesting(-1);
        }
      }
    }
  }
}

// Decode over ranges of many tiles, in each path a kernel may choose between: the x86 decode loops
// read a range as regions of tile streams (backend/tile_streams.h: several tiles a stream, a
// shorter region after the whole ones, the rest in adjacent groups), and each step's rows are
// scattered over the region. The weights sit on a cache line, as a mapped file's and the
// huge-page copy's tensors do (64-byte aligned), and 8 bytes past one, with block counts that are
// multiples of 8 (q4_0x4 units then meet a line boundary every 8 blocks: 256 and 768 columns) and
// not (64, 480). Ranges split on tiles as the pool splits them, so regions start anywhere.
TEST_CASE("every backend's decode is exact over ranges of many tiles in each path", "[kernels][conformance]") {
  const Backend& ref = Generic();
  for (const Backend* b : RunnableBackends()) {
    for (const MatmulCase& c : kMatmulCases) {
      if (!IsBlockQuantized(c.dtype) || !b->accepts(c.dtype, c.layout)) continue;
      const int64_t tile = LayoutTileRows(c.layout);
      for (int64_t columns : {int64_t{64}, int64_t{32 * 15}, int64_t{256}, int64_t{768}}) {
        // 101 tiles: whole regions of 5-tile streams (40 tiles for Q4_0's 8 streams, 20 for Q8_0's 4)
        // and shorter ones; 128 tiles split in two: 64 each, a whole region and one of 3 tiles a stream.
        for (int64_t rows : {tile * 101, tile * 128}) {
          if (!CheckLayoutFits(c.dtype, c.layout, columns, rows).ok()) continue;
          TestMatrix m = MakeMatrix(c.dtype, c.layout, columns, rows, static_cast<uint32_t>(columns * 7 + rows));
          // On a 2 MiB boundary, as a huge-page copy of the weights is (a mapped file's on a page).
          auto storage = HugePageBuffer::Allocate(m.bytes.size() + 8, /*advise=*/false);
          REQUIRE(storage.ok());
          const auto xf = RandomVector(static_cast<size_t>(columns), 29);
          std::vector<BlockQ8_0> xq(static_cast<size_t>(columns / 32));
          ref.kernels->quantize_q8_0(xf.data(), xq.data(), columns);
          const Input input(xf, xq, 1, columns);
          std::vector<float> expected, got;
          RunMatmul(ref, m.view, input.x, &expected, 1);
          for (int past_line : {0, 8}) {
            MatrixView view = m.view;
            uint8_t* at = storage->data() + past_line;
            std::memcpy(at, m.bytes.data(), m.bytes.size());
            view.data = at;
            for (int path = 0; path < FasterPath::kMaxPaths; ++path) {
              FasterPath::ForceForTesting(path);
              for (int splits : {1, 2, 3, 7}) {
                RunMatmul(*b, view, input.x, &got, splits);
                int64_t first_wrong = -1;  // NaN (a row left unwritten) counts as wrong
                for (size_t i = 0; i < expected.size() && first_wrong < 0; ++i) {
                  if (!(got[i] == expected[i])) first_wrong = static_cast<int64_t>(i);
                }
                INFO(b->name << " " << DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << columns << "x"
                             << rows << " " << past_line << " bytes past a line, path " << path << " splits " << splits
                             << " first wrong row " << first_wrong);
                if (first_wrong >= 0) FasterPath::ForceForTesting(-1);
                REQUIRE(first_wrong == -1);
              }
            }
            FasterPath::ForceForTesting(-1);
          }
        }
      }
    }
  }
}

// Backends whose prompt products are bf16 (KernelTable::f32_to_bf16_tile): each weight (q * d_w) and
// each activation is rounded to bf16 (relative error at most 2^-9 each), products summed in f32.
// Bound: |y - exact| <= sum|w x| * (2^-8 + (columns + 8) * 1.2e-7), where exact is the
// double-precision product of the dequantized weights and the f32 activations. A wrong scale,
// row, token or block would be off by a sizeable fraction of sum|w x|. With the activations
// rounded by the session (Activations::bf16, tiles of 16 tokens) and by the kernel itself.
TEST_CASE("bf16 prompt products agree with a double-precision product within bf16 rounding", "[kernels][conformance]") {
  const Backend& ref = Generic();
  bool ran = false;
  for (const Backend* b : CompiledBackends()) {
    if (b->kernels->f32_to_bf16_tile == nullptr) continue;
    if (!b->cpu_supports()) {
      WARN("SKIPPED: backend " << b->name << " (this CPU lacks its features)");
      continue;
    }
    ran = true;
    for (const MatmulCase& c : kMatmulCases) {
      if (!IsBlockQuantized(c.dtype) || !b->accepts(c.dtype, c.layout)) continue;
      // The fewest tokens this type takes in bf16 and one more, one and several 16-token tiles, a
      // 64-token chunk and one token either side, and several chunks.
      const int64_t least = Bf16MinTokens(*b->kernels, c.dtype);
      if (least == 0) continue;  // this type never takes the bf16 path
      const int64_t min_tokens = std::max<int64_t>(2, least);
      const std::vector<int64_t> token_counts = {min_tokens, min_tokens + 1, 47, 48, 63, 64, 65, 130};
      for (int64_t columns : {32, 96, 544, 2080}) {
        for (int64_t rows : {int64_t{LayoutTileRows(c.layout)}, int64_t{16}, int64_t{40}, int64_t{72}}) {
          if (!CheckLayoutFits(c.dtype, c.layout, columns, rows).ok()) continue;
          TestMatrix m = MakeMatrix(c.dtype, c.layout, columns, rows, static_cast<uint32_t>(columns * 7 + rows));
          const int64_t max_tokens = token_counts.back();
          const auto xf = RandomVector(static_cast<size_t>(columns * max_tokens), 29, 2.0f);
          std::vector<BlockQ8_0> xq(static_cast<size_t>(columns / 32 * max_tokens));
          for (int64_t t = 0; t < max_tokens; ++t) {
            ref.kernels->quantize_q8_0(xf.data() + t * columns, xq.data() + t * columns / 32, columns);
          }
          // As the session lays them out: tiles of 16 tokens, blocks a stride of one tile more
          // than the tokens need apart (the session's stride is exact; a kernel must not assume it).
          const int64_t tiles = (max_tokens + 15) / 16, block_stride = (tiles + 1) * kBf16TileElements;
          std::vector<uint16_t> rounded(static_cast<size_t>(columns / 32 * block_stride), 0x7fc0);  // NaN padding
          for (int64_t t = 0; t < tiles; ++t) {
            b->kernels->f32_to_bf16_tile(xf.data() + 16 * t * columns, columns,
                                         std::min<int64_t>(16, max_tokens - 16 * t),
                                         rounded.data() + t * kBf16TileElements, block_stride);
          }
          for (int64_t tokens : token_counts) {
            Input input(xf, xq, tokens, columns);
            // As the session passes them: the bf16 rows and no Q8_0 blocks (Activations::bf16), so
            // a kernel that read those would fault here rather than pass on stale ones.
            Activations with_bf16 = input.x;
            with_bf16.bf16 = rounded.data();
            with_bf16.bf16_block_stride = block_stride;
            with_bf16.q8_0 = nullptr;
            with_bf16.q8_0_sums = nullptr;
            with_bf16.q8_0_scales = nullptr;
            for (const Activations& x : {input.x, with_bf16}) {
              for (int splits : {1, 3}) {
                std::vector<float> got;
                RunMatmul(*b, m.view, x, &got, splits);
                double worst = 0;  // the largest error as a share of its bound
                for (int64_t t = 0; t < tokens; ++t) {
                  for (int64_t r = 0; r < rows; ++r) {
                    const ExactDot exact = Dot(m, r, xf, t, columns);
                    const double tolerance = 1e-6 + exact.magnitude * (1.0 / 256 + (columns + 8) * 1.2e-7);
                    const double error = std::fabs(double{got[t * rows + r]} - exact.value);
                    worst = std::max(worst, std::isnan(error) ? 1e30 : error / tolerance);
                    if (error <= tolerance) continue;
                    INFO(b->name << " " << DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << columns << "x"
                                 << rows << " tokens " << tokens << " session-rounded " << (x.bf16 != nullptr)
                                 << " splits " << splits << " token " << t << " row " << r);
                    REQUIRE(error <= tolerance);
                  }
                }
                REQUIRE(worst <= 1.0);
              }
            }
          }
        }
      }
    }
  }
  if (!ran) WARN("SKIPPED: no backend with bf16 prompt products runs on this CPU");
}

// f32_to_bf16_tile against a scalar rounding (nearest even on the top 16 bits; NaN stays NaN),
// each element looked up where Activations::bf16 says it lies, for 1..16 tokens and 1..3 blocks;
// the tile's tokens past n_tokens zero, nothing written between the blocks' tiles.
TEST_CASE("f32_to_bf16_tile rounds to nearest even into the tile layout", "[kernels][conformance]") {
  for (const Backend* b : CompiledBackends()) {
    if (b->kernels->f32_to_bf16_tile == nullptr || !b->cpu_supports()) continue;
    for (int64_t columns : {32, 64, 96}) {
      for (int64_t tokens : {1, 2, 7, 15, 16}) {
        auto x = RandomVector(static_cast<size_t>(columns * tokens), static_cast<uint32_t>(columns + tokens), 100.0f);
        x[0] = std::numeric_limits<float>::quiet_NaN();
        if (x.size() > 2) x[1] = -std::numeric_limits<float>::infinity(), x[2] = 1.0f + 1.0f / 256;  // a tie: to even
        const int64_t block_stride = 2 * kBf16TileElements;  // a gap of one tile between blocks
        std::vector<uint16_t> out(static_cast<size_t>(columns / 32 * block_stride), 0xabcd);
        b->kernels->f32_to_bf16_tile(x.data(), columns, tokens, out.data(), block_stride);
        for (int64_t block = 0; block < columns / 32; ++block) {
          for (int64_t p = 0; p < 16; ++p) {
            for (int64_t n = 0; n < 16; ++n) {
              for (int64_t half = 0; half < 2; ++half) {
                const uint16_t got = out[static_cast<size_t>(block * block_stride + 32 * p + 2 * n + half)];
                const uint16_t gap =
                    out[static_cast<size_t>(block * block_stride + kBf16TileElements + 32 * p + 2 * n + half)];
                INFO(b->name << " columns " << columns << " tokens " << tokens << " block " << block << " pair " << p
                             << " token " << n << " half " << half);
                REQUIRE(gap == 0xabcd);
                if (n >= tokens) {
                  REQUIRE(got == 0);
                  continue;
                }
                const float v = x[static_cast<size_t>(n * columns + 32 * block + 2 * p + half)];
                uint32_t bits;
                std::memcpy(&bits, &v, 4);
                if (std::isnan(v)) {
                  const uint32_t back = uint32_t{got} << 16;
                  float f;
                  std::memcpy(&f, &back, 4);
                  REQUIRE(std::isnan(f));
                  continue;
                }
                const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
                REQUIRE(got == static_cast<uint16_t>(rounded));
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("every backend's elementwise kernels match the generic reference", "[kernels][conformance]") {
  const Backend& ref = Generic();
  for (const Backend* b : RunnableBackends()) {
    const KernelTable& k = *b->kernels;
    for (int64_t n : {1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1001}) {
      INFO(b->name << " n=" << n);
      const auto x = RandomVector(static_cast<size_t>(n), static_cast<uint32_t>(n), 3.0f);
      const auto w = RandomVector(static_cast<size_t>(n), static_cast<uint32_t>(n + 1));
      std::vector<float> a(n), e(n);
      k.rmsnorm(x.data(), w.data(), a.data(), n, 1e-5f);
      ref.kernels->rmsnorm(x.data(), w.data(), e.data(), n, 1e-5f);
      for (int64_t i = 0; i < n; ++i) REQUIRE(a[i] == Approx(e[i]).epsilon(1e-5).margin(1e-6));
      a = x;
      e = x;
      k.softmax(a.data(), n);
      ref.kernels->softmax(e.data(), n);
      for (int64_t i = 0; i < n; ++i) REQUIRE(a[i] == Approx(e[i]).epsilon(1e-5).margin(1e-7));
      a = x;
      e = x;
      k.silu_mul(a.data(), w.data(), n);
      ref.kernels->silu_mul(e.data(), w.data(), n);
      for (int64_t i = 0; i < n; ++i) REQUIRE(a[i] == Approx(e[i]).epsilon(1e-5).margin(1e-6));
      // Elementwise means each element's result does not depend on the call it is in: the same
      // values gated in pieces (a short first call, the rest in one) equal the whole call, bit for
      // bit (the session gates a row at a time, decode one row, prefill many).
      std::vector<float> pieces = x;
      const int64_t first = n < 3 ? n : 3;
      k.silu_mul(pieces.data(), w.data(), first);
      k.silu_mul(pieces.data() + first, w.data() + first, n - first);
      REQUIRE(std::memcmp(pieces.data(), a.data(), static_cast<size_t>(n) * sizeof(float)) == 0);
      if (n % 32 == 0) {
        std::vector<BlockQ8_0> qa(n / 32), qe(n / 32);
        k.quantize_q8_0(x.data(), qa.data(), n);
        ref.kernels->quantize_q8_0(x.data(), qe.data(), n);
        REQUIRE(std::memcmp(qa.data(), qe.data(), qa.size() * sizeof(BlockQ8_0)) == 0);
      }
    }
    // Activation quantization over block counts around the kernels' groups of blocks (8 for
    // avx512_vnni), with blocks that test its arithmetic: all zero (d = 0), halves exactly between
    // two quants of either sign (lround goes away from zero), tiny (subnormal fp16 d) and huge
    // (d beyond fp16: inf) magnitudes, and random ones of varied scale.
    for (int64_t blocks : {1, 2, 7, 8, 9, 15, 16, 17, 33}) {
      INFO(b->name << " quantize_q8_0 blocks=" << blocks);
      auto x = RandomVector(static_cast<size_t>(blocks * 32), static_cast<uint32_t>(blocks), 1.0f);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        float* v = x.data() + blk * 32;
        switch (blk % 6) {
          case 0:
            for (int i = 0; i < 32; ++i) v[i] = 0.0f;
            break;
          case 1:  // amax 127: d = 1, so every x * id is x itself, on a tie
            for (int i = 0; i < 32; ++i) v[i] = (i % 2 == 0 ? 1.0f : -1.0f) * (static_cast<float>(i) + 0.5f);
            v[31] = 127.0f;
            break;
          case 2:
            for (int i = 0; i < 32; ++i) v[i] *= 1e-6f;
            break;
          case 3:
            for (int i = 0; i < 32; ++i) v[i] *= 1e7f;
            break;
          default:
            for (int i = 0; i < 32; ++i) v[i] *= static_cast<float>(blk + 1);
        }
      }
      std::vector<BlockQ8_0> qa(static_cast<size_t>(blocks)), qe(static_cast<size_t>(blocks));
      k.quantize_q8_0(x.data(), qa.data(), blocks * 32);
      ref.kernels->quantize_q8_0(x.data(), qe.data(), blocks * 32);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        INFO("block " << blk);
        REQUIRE(qa[blk].d == qe[blk].d);
        REQUIRE(std::memcmp(qa[blk].qs, qe[blk].qs, 32) == 0);
      }
    }
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalfSplit}) {
      for (int64_t head_dim : {2, 8, 18, 34, 64, 128, 160, 256}) {
        std::vector<float> inv_freq(head_dim / 2);
        for (int64_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = 1.0f / std::pow(10000.0f, 2.0f * i / head_dim);
        for (int64_t pos : {0, 1, 17, 4095}) {
          std::vector<float> cos(head_dim / 2), sin(head_dim / 2);
          RopeAngles(pos, inv_freq.data(), head_dim / 2, cos.data(), sin.data());
          auto a = RandomVector(static_cast<size_t>(3 * head_dim), 5);
          auto e = a;
          k.rope(a.data(), 3, head_dim, cos.data(), sin.data(), style);
          ref.kernels->rope(e.data(), 3, head_dim, cos.data(), sin.data(), style);
          // Same angles, same rounding (no FMA) as the reference: identical.
          for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == e[i]);
        }
      }
    }
    for (DType kv : {DType::kF32, DType::kF16}) {
      // Head sizes around the kernels' 4-, 8- and 16-float vectors and 32/64/128/256-float passes;
      // positions around groups of four or eight and the blocks of 32/64 rows a group of heads
      // shares; groups of 1-4 query heads per KV head.
      struct Case {
        int64_t positions, head_dim, heads;
      };
      for (const Case& c : std::vector<Case>{
               {1, 16, 1},  {2, 16, 1},   {5, 16, 2},   {17, 16, 1}, {100, 16, 3}, {3, 128, 2},  {4, 128, 1},
               {7, 128, 4}, {9, 64, 1},   {33, 72, 2},  {6, 20, 1},  {1, 7, 3},    {13, 136, 1}, {130, 128, 2},
               {65, 32, 1}, {64, 128, 2}, {200, 36, 4}, {8, 128, 1}, {70, 256, 2}, {9, 80, 1},   {11, 48, 3},
               {150, 64, 3}, {257, 128, 1}}) {
        const int64_t positions = c.positions, head_dim = c.head_dim, heads = c.heads;
        const int64_t stride = 3 * head_dim;
        const auto q = RandomVector(static_cast<size_t>(heads * head_dim), 1);
        const KvRowsFixture rows(positions, stride, kv, 2);
        const void* kp = rows.k();
        const void* vp = rows.v();
        std::vector<float> scores(static_cast<size_t>(heads * positions)), a(heads * head_dim), e(heads * head_dim);
        ref.kernels->attention(q.data(), heads, kp, vp, kv, stride, positions, head_dim, 4.0f, scores.data(), e.data(),
                               false);
        for (bool streamed : {false, true}) {  // with and without prefetching
          k.attention(q.data(), heads, kp, vp, kv, stride, positions, head_dim, 4.0f, scores.data(), a.data(),
                      streamed);
          INFO("positions " << positions << ", head_dim " << head_dim << ", heads " << heads << ", streamed "
                            << streamed);
          for (int64_t i = 0; i < heads * head_dim; ++i) REQUIRE(a[i] == Approx(e[i]).epsilon(1e-5).margin(1e-6));
        }
      }
    }
  }
}

TEST_CASE("every backend's multi-token attention matches the reference token by token", "[kernels][conformance]") {
  const Backend& ref = Generic();
  int tested = 0;
  for (const Backend* b : CompiledBackends()) {
    if (!b->cpu_supports() || b->kernels->attention_tokens == nullptr) {
      WARN("SKIPPED: backend " << b->name << (b->cpu_supports() ? " has no attention_tokens" : " (CPU)"));
      continue;
    }
    ++tested;
    for (DType kv : {DType::kF32, DType::kF16}) {
      // Token counts around the kernels' pairs of tokens, the first token seeing one position or
      // more; head sizes of one to sixteen 16-float chunks and ones the AVX-512 kernel hands on
      // (72); 1-4 query heads per KV head; positions around groups of four and blocks of 64.
      struct Case {
        int64_t tokens, positions, head_dim, heads;
      };
      for (const Case& c : std::vector<Case>{{1, 1, 128, 2},
                                             {2, 2, 128, 2},
                                             {2, 3, 16, 1},
                                             {3, 9, 64, 3},
                                             {4, 70, 128, 2},
                                             {5, 130, 128, 4},
                                             {2, 66, 256, 2},
                                             {3, 17, 80, 1},
                                             {2, 5, 72, 2},
                                             {4, 200, 128, 1},
                                             {6, 6, 32, 2}}) {
        INFO(b->name << ": tokens " << c.tokens << ", positions " << c.positions << ", head_dim " << c.head_dim
                     << ", heads " << c.heads << ", kv " << (kv == DType::kF16 ? "f16" : "f32"));
        const int64_t stride = 3 * c.head_dim, width = c.heads * c.head_dim, token_stride = width + 24;
        const auto q = RandomVector(static_cast<size_t>(c.tokens * token_stride), 11);
        const KvRowsFixture rows(c.positions, stride, kv, 12);
        const void* kp = rows.k();
        const void* vp = rows.v();
        std::vector<float> scores(static_cast<size_t>(2 * c.heads * c.positions));
        // Outputs at the same stride as the queries; the gaps between tokens must stay untouched.
        std::vector<float> got(static_cast<size_t>(c.tokens * token_stride), -7.0f), expected(width);
        b->kernels->attention_tokens(q.data(), token_stride, c.tokens, c.heads, kp, vp, kv, stride, c.positions,
                                     c.head_dim, 4.0f, scores.data(), got.data(), token_stride);
        for (int64_t j = 0; j < c.tokens; ++j) {
          const int64_t seen = c.positions - c.tokens + 1 + j;
          ref.kernels->attention(q.data() + j * token_stride, c.heads, kp, vp, kv, stride, seen, c.head_dim, 4.0f,
                                 scores.data(), expected.data(), false);
          INFO("token " << j << " (" << seen << " positions)");
          for (int64_t i = 0; i < width; ++i) {
            REQUIRE(got[j * token_stride + i] == Approx(expected[i]).epsilon(1e-5).margin(1e-6));
          }
          for (int64_t i = width; i < token_stride; ++i) REQUIRE(got[j * token_stride + i] == -7.0f);
        }
      }
    }
  }
  if (tested == 0) WARN("SKIPPED: no backend here has attention_tokens");
}

TEST_CASE("every backend's SiLU and softmax follow the reference over the whole float range", "[kernels][conformance]") {
  // Vectorized exp approximations are checked where they are hardest: near overflow and underflow,
  // at +-inf, and on a dense sweep of ordinary values.
  std::vector<float> x;
  for (float v = -110.0f; v <= 110.0f; v += 0.0137f) x.push_back(v);
  for (float v : {88.0f, 88.5f, 88.72f, 88.73f, 89.0f, -87.0f, -87.33f, -87.34f, -88.0f, -103.0f, -104.0f, 0.0f, -0.0f}) {
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  const std::vector<float> up(x.size(), 0.75f);
  const Backend& ref = Generic();
  for (const Backend* b : CompiledBackends()) {
    if (!b->cpu_supports()) continue;
    INFO(b->name);
    std::vector<float> a = x, e = x;
    b->kernels->silu_mul(a.data(), up.data(), static_cast<int64_t>(a.size()));
    ref.kernels->silu_mul(e.data(), up.data(), static_cast<int64_t>(e.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x=" << x[i]);
      if (std::isnan(e[i])) {
        REQUIRE(std::isnan(a[i]));
      } else {
        REQUIRE(a[i] == Approx(e[i]).epsilon(1e-5).margin(1e-6));
      }
    }
    // Softmax over scores spread across 60 units: tiny probabilities must not turn into garbage.
    std::vector<float> s(1001), t;
    for (size_t i = 0; i < s.size(); ++i) s[i] = -50.0f + 0.06f * static_cast<float>(i);
    t = s;
    b->kernels->softmax(s.data(), static_cast<int64_t>(s.size()));
    ref.kernels->softmax(t.data(), static_cast<int64_t>(t.size()));
    for (size_t i = 0; i < s.size(); ++i) REQUIRE(s[i] == Approx(t[i]).epsilon(1e-5).margin(1e-12));
    // A NaN or an infinity among the scores, in a vector's body or its tail: NaN wherever the
    // reference gives NaN, the reference's value elsewhere.
    for (size_t at : {size_t{3}, size_t{19}}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        std::vector<float> u(21, 0.5f), w;
        u[at] = bad;
        w = u;
        b->kernels->softmax(u.data(), static_cast<int64_t>(u.size()));
        ref.kernels->softmax(w.data(), static_cast<int64_t>(w.size()));
        INFO("bad value " << bad << " at " << at);
        for (size_t i = 0; i < u.size(); ++i) {
          if (std::isnan(w[i])) {
            REQUIRE(std::isnan(u[i]));
          } else {
            REQUIRE(u[i] == Approx(w[i]).epsilon(1e-5).margin(1e-12));
          }
        }
      }
    }
  }
}

TEST_CASE("generic elementwise kernels compute what they document", "[kernels][generic]") {
  const KernelTable& k = *Generic().kernels;
  // RMSNorm of a constant vector is the weight.
  std::vector<float> x(8, 3.0f), w(8, 2.0f), out(8);
  k.rmsnorm(x.data(), w.data(), out.data(), 8, 0.0f);
  for (float v : out) REQUIRE(v == Approx(2.0f));
  // Softmax sums to one and is shift invariant.
  std::vector<float> s = {1, 2, 3, 1000}, t = {-999, -998, -997, 0};
  k.softmax(s.data(), 4);
  k.softmax(t.data(), 4);
  REQUIRE(s[0] + s[1] + s[2] + s[3] == Approx(1.0f));
  for (int i = 0; i < 4; ++i) REQUIRE(s[i] == Approx(t[i]).margin(1e-7));
  // SiLU(0) = 0, SiLU(large) ~ large.
  std::vector<float> g = {0.0f, 20.0f}, u = {5.0f, 1.0f};
  k.silu_mul(g.data(), u.data(), 2);
  REQUIRE(g[0] == 0.0f);
  REQUIRE(g[1] == Approx(20.0f).epsilon(1e-6));
  // RoPE at position 0 is the identity; both styles rotate the documented pairs, by the angles
  // position * inv_freq (RopeAngles).
  std::vector<float> inv = {1.0f, 0.5f}, cos(2), sin(2), v = {1, 2, 3, 4}, v0 = v;
  RopeAngles(0, inv.data(), 2, cos.data(), sin.data());
  k.rope(v.data(), 1, 4, cos.data(), sin.data(), RopeStyle::kInterleaved);
  REQUIRE(v == v0);
  RopeAngles(3, inv.data(), 2, cos.data(), sin.data());
  REQUIRE(cos[1] == Approx(std::cos(1.5f)));
  REQUIRE(sin[1] == Approx(std::sin(1.5f)));
  std::vector<float> h = {1, 0, 0, 0};
  k.rope(h.data(), 1, 4, cos.data(), sin.data(), RopeStyle::kHalfSplit);  // pair (0, 2) by angle 3
  REQUIRE(h[0] == Approx(std::cos(3.0f)));
  REQUIRE(h[2] == Approx(std::sin(3.0f)));
  std::vector<float> i2 = {0, 0, 1, 0};
  k.rope(i2.data(), 1, 4, cos.data(), sin.data(), RopeStyle::kInterleaved);  // pair (2, 3) by angle 1.5
  REQUIRE(i2[2] == Approx(std::cos(1.5f)));
  REQUIRE(i2[3] == Approx(std::sin(1.5f)));
  REQUIRE(i2[0] == 0.0f);
  // Attention with one position returns that position's value row.
  std::vector<float> q = {1, 1}, kk = {0.5f, 0.5f}, vv = {7, 9}, scores(1), o(2);
  k.attention(q.data(), 1, kk.data(), vv.data(), DType::kF32, 2, 1, 2, std::sqrt(2.0f), scores.data(), o.data(), false);
  REQUIRE(o[0] == 7.0f);
  REQUIRE(o[1] == 9.0f);
}

// Every value class the KV cache can meet: normal values of every f16 exponent, ties (which round
// to even), values that become subnormals or zero, the largest finite half and just past it
// (infinity), infinities, NaN, and both zeros; lengths 1-17 and longer reach every vector tail.
TEST_CASE("every backend's f32_to_f16 matches the reference bit for bit", "[kernels][conformance]") {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e-3f, 6.0e-5f,
                               6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-9f, -3.0e-7f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (int e = -26; e <= 16; ++e) {
    // 1 + 2^-11 lies halfway between two halves (ties to the even one); 1 + 3 * 2^-11 rounds up.
    values.push_back(std::ldexp(1.0f + std::ldexp(1.0f, -11), e));
    values.push_back(-std::ldexp(1.0f + 3 * std::ldexp(1.0f, -11), e));
    values.push_back(std::ldexp(1.7f, e));
  }
  for (float v : RandomVector(997, 31, 8.0f)) values.push_back(v);
  const Backend& ref = Generic();
  for (const Backend* b : RunnableBackends()) {
    for (size_t start : {size_t{0}, size_t{5}}) {
      for (size_t n = 1; start + n <= values.size(); n = n < 17 ? n + 1 : n * 3) {
        INFO(b->name << " values " << start << ".." << start + n);
        std::vector<uint16_t> got(n, 0xffff), want(n);
        b->kernels->f32_to_f16(values.data() + start, got.data(), static_cast<int64_t>(n));
        ref.kernels->f32_to_f16(values.data() + start, want.data(), static_cast<int64_t>(n));
        for (size_t i = 0; i < n; ++i) {
          INFO("value " << values[start + i] << " got " << got[i] << " want " << want[i]);
          if (std::isnan(values[start + i])) {
            REQUIRE((got[i] & 0x7c00) == 0x7c00);
            REQUIRE((got[i] & 0x3ff) != 0);
          } else {
            REQUIRE(got[i] == want[i]);
          }
        }
      }
    }
  }
  // The reference against known encodings.
  uint16_t h[6];
  const float known[6] = {1.0f, -2.0f, 65504.0f, 65520.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25)};
  ref.kernels->f32_to_f16(known, h, 6);
  CHECK(h[0] == 0x3c00);
  CHECK(h[1] == 0xc000);
  CHECK(h[2] == 0x7bff);
  CHECK(h[3] == 0x7c00);
  CHECK(h[4] == 0x0001);
  CHECK(h[5] == 0x0000);  // exactly half the smallest subnormal: ties to even, zero
}

TEST_CASE("SummarizeQ8_0Blocks gives each block's quant sum and f32 scale", "[kernels]") {
  BlockQ8_0 blocks[4];
  for (int i = 0; i < 32; ++i) {
    blocks[0].qs[i] = static_cast<int8_t>(i - 16);
    blocks[1].qs[i] = 127;
    blocks[2].qs[i] = -127;
    blocks[3].qs[i] = static_cast<int8_t>(i % 2 == 0 ? 100 : -99);
  }
  blocks[0].d = 0x3c00;  // 1.0
  blocks[1].d = 0xbc00;  // -1.0
  blocks[2].d = 0x0001;  // the smallest subnormal, 2^-24
  blocks[3].d = 0x7bff;  // the largest finite half, 65504
  int32_t sums[4] = {};
  float scales[4] = {};
  SummarizeQ8_0Blocks(blocks, 4, sums, scales);
  CHECK(sums[0] == -16);
  CHECK(sums[1] == 32 * 127);
  CHECK(sums[2] == -32 * 127);
  CHECK(sums[3] == 16);
  CHECK(scales[0] == 1.0f);
  CHECK(scales[1] == -1.0f);
  CHECK(scales[2] == std::ldexp(1.0f, -24));
  CHECK(scales[3] == 65504.0f);
}

TEST_CASE("FillQ4_0Offsets lays out -8 x the sums run by run, token ranges apart", "[kernels]") {
  // 2 tokens x 5 blocks in runs of 2: runs {0,1}, {2,3}, {4, padding}.
  const int32_t sums[10] = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
  REQUIRE(Q4_0OffsetsCount(2, 5, 2) == 12);
  std::vector<int32_t> out(12, 99);
  FillQ4_0Offsets(sums, 5, 2, 2, 1, 2, out.data());  // token 1 only
  FillQ4_0Offsets(sums, 5, 2, 2, 0, 1, out.data());  // then token 0
  const std::vector<int32_t> expected = {-8, -16, 8, 16, -24, -32, 24, 32, -40, 0, 40, 0};
  CHECK(out == expected);
}

TEST_CASE("NaN and Inf inputs propagate instead of vanishing", "[kernels][conformance]") {
  for (const Backend* b : CompiledBackends()) {
    if (!b->cpu_supports()) continue;
    for (const MatmulCase& c : kMatmulCases) {
      if (!b->accepts(c.dtype, c.layout) || IsBlockQuantized(c.dtype)) continue;
      TestMatrix m = MakeMatrix(c.dtype, c.layout, 32, 8, 3);
      auto xf = RandomVector(32, 4);
      xf[5] = std::numeric_limits<float>::quiet_NaN();
      const Activations x{xf.data(), nullptr, 1, 32};
      std::vector<float> y;
      RunMatmul(*b, m.view, x, &y, 1);
      for (float v : y) REQUIRE(std::isnan(v));
    }
    std::vector<float> s = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
    b->kernels->softmax(s.data(), 3);
    REQUIRE(std::isnan(s[1]));
  }
}

}  // namespace
}  // namespace kestrel

namespace kestrel {
namespace {

TEST_CASE("every backend's Q8_0 activation quantizer is bit-identical to the reference, ties included", "[kernels][conformance]") {
  const Backend& ref = Generic();
  std::vector<std::vector<float>> blocks;
  // amax 127 makes the scale exactly 1, so x.5 values are exact ties (lround rounds away from zero).
  std::vector<float> ties(32);
  for (int i = 0; i < 32; ++i) ties[i] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i) + 0.5f);
  ties[31] = 127.0f;
  blocks.push_back(ties);
  blocks.push_back(std::vector<float>(32, 0.0f));                     // all zero: d = 0
  blocks.push_back(std::vector<float>(32, -3.25f));                    // constant negative
  std::vector<float> tiny(32, 1e-30f);
  tiny[3] = -2e-30f;
  blocks.push_back(tiny);                                              // subnormal-range scale
  // Non-finite products: a block so small that 1 / d overflows (x * id is then infinite, or NaN for
  // a zero), and blocks holding a NaN or an infinity. What lround makes of those is the C library's;
  // the kernels hand such blocks to the reference, so they must match it here too.
  std::vector<float> underflow(32, 0.0f);
  underflow[0] = 1e-37f;
  underflow[7] = -3e-38f;
  blocks.push_back(underflow);
  for (float special : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
    for (int at : {0, 17, 31}) {
      std::vector<float> block = RandomVector(32, static_cast<uint32_t>(at + 40), 2.0f);
      block[at] = special;
      blocks.push_back(block);
    }
  }
  // Every quant's rounding boundary: k + 0.5 and the floats either side of it, both signs, for
  // k = 0..126, in blocks whose amax is 127 (d = 1), so x * id is exactly the value. The x86
  // kernels round by adding 0.5 - 2^-25 and truncating, which these decide.
  std::vector<float> boundaries;
  for (int k = 0; k < 127; ++k) {
    const float tie = static_cast<float>(k) + 0.5f;
    for (float v : {std::nextafter(tie, 0.0f), tie, std::nextafter(tie, 200.0f)}) {
      boundaries.push_back(v);
      boundaries.push_back(-v);
    }
  }
  for (size_t i = 0; i < boundaries.size(); i += 31) {
    std::vector<float> block(32, 0.0f);
    for (size_t j = 0; j < 31 && i + j < boundaries.size(); ++j) block[j] = boundaries[i + j];
    block[31] = -127.0f;
    blocks.push_back(block);
  }
  for (uint32_t seed = 0; seed < 200; ++seed) blocks.push_back(RandomVector(32, seed, seed % 2 ? 1e3f : 1e-2f));
  for (const Backend* b : RunnableBackends()) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      BlockQ8_0 got{}, want{};
      b->kernels->quantize_q8_0(blocks[i].data(), &got, 32);
      ref.kernels->quantize_q8_0(blocks[i].data(), &want, 32);
      INFO(b->name << " block " << i);
      REQUIRE(std::memcmp(&got, &want, sizeof(BlockQ8_0)) == 0);
    }
    // Rows of many blocks.
    const auto row = RandomVector(32 * 37, 99, 5.0f);
    std::vector<BlockQ8_0> got(37), want(37);
    b->kernels->quantize_q8_0(row.data(), got.data(), 32 * 37);
    ref.kernels->quantize_q8_0(row.data(), want.data(), 32 * 37);
    REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_0)) == 0);
  }
}

// The optional fused form: the same blocks, and the sums and f32 scales SummarizeQ8_0Blocks gives,
// over every block count up to two of the kernels' groups of 8 and the blocks above end to end
// (the quantizer test's ties, zeros, tiny scales and rounding boundaries), including non-finite
// and underflowing blocks, which the kernels hand to the reference.
TEST_CASE("every backend's fused Q8_0 quantizer gives the reference's blocks, sums and scales", "[kernels][conformance]") {
  const Backend& ref = Generic();
  std::vector<float> values;
  for (int i = 0; i < 32; ++i) values.push_back((i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i) + 0.5f));
  values[31] = 127.0f;
  values.insert(values.end(), 32, 0.0f);
  for (int i = 0; i < 32; ++i) values.push_back(1e-30f * static_cast<float>(i + 1));
  for (int k = 0; k < 127; k += 4) {
    for (int i = 0; i < 31; ++i) values.push_back((i % 2 ? -1.0f : 1.0f) * (static_cast<float>(k + i % 4) + 0.5f));
    values.push_back(127.0f);
  }
  std::vector<float> with_nan = RandomVector(32, 7, 2.0f);
  with_nan[5] = std::numeric_limits<float>::quiet_NaN();
  values.insert(values.end(), with_nan.begin(), with_nan.end());
  std::vector<float> with_inf = RandomVector(32, 8, 2.0f);
  with_inf[30] = -std::numeric_limits<float>::infinity();
  values.insert(values.end(), with_inf.begin(), with_inf.end());
  std::vector<float> underflow(32, 0.0f);
  underflow[9] = -2e-37f;
  values.insert(values.end(), underflow.begin(), underflow.end());
  const auto random = RandomVector(32 * 17, 3, 40.0f);
  values.insert(values.end(), random.begin(), random.end());
  int tested = 0;
  for (const Backend* b : CompiledBackends()) {
    if (!b->cpu_supports() || b->kernels->quantize_q8_0_summarized == nullptr) continue;
    ++tested;
    for (int64_t blocks = 1; blocks <= static_cast<int64_t>(values.size() / 32); blocks += blocks < 17 ? 1 : 9) {
      for (int64_t first : {int64_t{0}, static_cast<int64_t>(values.size() / 32) - blocks}) {
        INFO(b->name << " blocks " << blocks << " from block " << first);
        const float* x = values.data() + first * 32;
        std::vector<BlockQ8_0> got(static_cast<size_t>(blocks)), want(static_cast<size_t>(blocks));
        std::vector<int32_t> got_sums(static_cast<size_t>(blocks), -1), want_sums(static_cast<size_t>(blocks));
        std::vector<float> got_scales(static_cast<size_t>(blocks), -1.0f), want_scales(static_cast<size_t>(blocks));
        b->kernels->quantize_q8_0_summarized(x, got.data(), got_sums.data(), got_scales.data(), blocks * 32);
        ref.kernels->quantize_q8_0(x, want.data(), blocks * 32);
        SummarizeQ8_0Blocks(want.data(), blocks, want_sums.data(), want_scales.data());
        for (int64_t i = 0; i < blocks; ++i) {
          INFO("block " << i);
          REQUIRE(std::memcmp(&got[i], &want[i], sizeof(BlockQ8_0)) == 0);
          REQUIRE(got_sums[i] == want_sums[i]);
          REQUIRE(std::memcmp(&got_scales[i], &want_scales[i], sizeof(float)) == 0);
        }
        // Against the backend's own unfused quantizer and the summary of what it stored.
        std::vector<BlockQ8_0> own(static_cast<size_t>(blocks));
        std::vector<int32_t> own_sums(static_cast<size_t>(blocks));
        std::vector<float> own_scales(static_cast<size_t>(blocks));
        b->kernels->quantize_q8_0(x, own.data(), blocks * 32);
        SummarizeQ8_0Blocks(own.data(), blocks, own_sums.data(), own_scales.data());
        REQUIRE(std::memcmp(got.data(), own.data(), own.size() * sizeof(BlockQ8_0)) == 0);
        REQUIRE(got_sums == own_sums);
        REQUIRE(std::memcmp(got_scales.data(), own_scales.data(), own_scales.size() * sizeof(float)) == 0);
      }
    }
  }
  if (tested == 0) WARN("SKIPPED: no usable backend has a fused Q8_0 quantizer");
}

}  // namespace
}  // namespace kestrel
