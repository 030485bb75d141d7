// Microbenchmarks of every kernel of every backend usable on this CPU, generated from the
// registry so that no backend ships unbenchmarked. Matrix-vector products report GB/s of weights
// streamed; matrix-matrix products report GOPS (2 * rows * columns * tokens per call).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/faster_path.h"
#include "backend/q8_0_summary.h"
#include "backend/registry.h"
#include "backend/rope_angles.h"
#include "decoder/row_scheduler.h"
#include "decoder/thread_pool.h"
#include "format/dtype.h"
#include "format/layout.h"
#include "platform/huge_page_buffer.h"
#include "platform/read_streams.h"
#include "platform/uniform_float.h"
#ifdef KESTREL_BENCH_AVX512_STRIP_TILE
#include "avx512_strip_tile_bench.h"
#endif

namespace kestrel {
namespace {

struct MatrixFixture {
  HugePageBuffer bytes;  // weights as the session holds them: on huge pages unless asked not to
  MatrixView view;
  std::vector<float> x;
  std::vector<BlockQ8_0> xq;
  std::vector<int32_t> xq_sums;  // per block, as the session prepares them once per input
  std::vector<float> xq_scales;
  std::vector<int32_t> xq_q4_0_offsets;  // Q4_0 prompts, where the backend asks for them
  // The product's input as the session passes it: with Q4_0's offsets table for a prompt where
  // the backend reads one (KernelTable::q4_0_offset_run).
  Activations Input(const KernelTable& k, DType dtype, int64_t tokens, int64_t columns) {
    const Activations a{x.data(), xq.empty() ? nullptr : xq.data(), tokens, columns, xq_sums.data(), xq_scales.data()};
    if (dtype == DType::kQ4_0 && tokens > 1 && k.q4_0_offset_run > 0) {
      return WithQ4_0Offsets(a, k.q4_0_offset_run, &xq_q4_0_offsets);
    }
    return a;
  }
};

// A buffer of `bytes` on huge pages (where the OS gives them) or on 4 KiB pages; a bench that
// cannot get its memory stops with the reason.
HugePageBuffer AllocateOrAbort(size_t bytes, bool huge_pages) {
  auto buffer = huge_pages ? HugePageBuffer::Allocate(bytes) : HugePageBuffer::AllocateSmallPages(bytes);
  if (!buffer.ok()) {
    std::fprintf(stderr, "kestrel-kernels-bench: %s\n", std::string(buffer.status().message()).c_str());
    std::abort();
  }
  return std::move(*buffer);
}

MatrixFixture MakeFixture(const KernelTable& k, DType dtype, Layout layout, int64_t columns, int64_t rows,
                          int64_t tokens, bool huge_pages) {
  MatrixFixture f;
  std::mt19937 rng(42);
  UniformFloat dist(-1.0f, 1.0f);
  std::vector<float> row(columns);
  const size_t row_bytes = DTypeRowBytes(dtype, columns);
  f.bytes = AllocateOrAbort(row_bytes * rows, huge_pages);
  // Plain rows are encoded in place; tiled ones through a plain copy that is then repacked.
  std::vector<uint8_t> plain(layout == Layout::kPlain ? 0 : f.bytes.size());
  uint8_t* const encoded = layout == Layout::kPlain ? f.bytes.data() : plain.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    EncodeRow(dtype, row.data(), encoded + r * row_bytes, columns);
  }
  if (layout != Layout::kPlain) RepackPlainToTiled(layout, plain.data(), f.bytes.data(), columns, rows);
  f.view = MatrixView{dtype, layout, f.bytes.data(), columns, rows};
  f.x.resize(columns * tokens);
  for (auto& v : f.x) v = dist(rng);
  if (IsBlockQuantized(dtype)) {
    f.xq.resize(columns / 32 * tokens);
    for (int64_t t = 0; t < tokens; ++t)
      k.quantize_q8_0(f.x.data() + t * columns, f.xq.data() + t * columns / 32, columns);
    f.xq_sums.resize(f.xq.size());
    f.xq_scales.resize(f.xq.size());
    SummarizeQ8_0Blocks(f.xq.data(), static_cast<int64_t>(f.xq.size()), f.xq_sums.data(), f.xq_scales.data());
  }
  return f;
}

// forced_path: -1 lets a kernel with several decode paths choose by speed (FasterPath), 0 .. 2 forces one.
// huge_pages: false holds the weights on 4 KiB pages (advised against huge ones, even under THP
// "always"), where streaming them from memory costs a TLB miss per page. With true the OS may still
// decline (THP "never", fragmented memory), so the share it really gave is reported ("huge%").
void BenchMatmul(benchmark::State& state, const Backend* b, DType dtype, Layout layout, int64_t columns, int64_t rows,
                 int64_t tokens, int forced_path, bool huge_pages) {
  MatrixFixture f = MakeFixture(*b->kernels, dtype, layout, columns, rows, tokens, huge_pages);
  FasterPath::ForceForTesting(forced_path);
  const Activations x = f.Input(*b->kernels, dtype, tokens, columns);
  std::vector<float> y(rows * tokens);
  // One untimed pass first: on the CI host the first read of freshly written 4 KiB pages ran at
  // ~0.7 GB/s, and a 300 MB case times a single iteration (bench/README.md, fifth Zen 5 session).
  b->kernels->matmul(f.view, x, y.data(), rows, 0, rows);
  for (auto _ : state) {
    b->kernels->matmul(f.view, x, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = static_cast<double>(state.iterations());
  if (tokens == 1) {
    state.counters["GB/s"] =
        benchmark::Counter(calls * static_cast<double>(f.bytes.size()) / 1e9, benchmark::Counter::kIsRate);
  }
  state.counters["GOPS"] = benchmark::Counter(calls * 2.0 * columns * rows * tokens / 1e9, benchmark::Counter::kIsRate);
  // Only for the from-memory cases, where the TLB matters: smaps counts whole memory areas, which
  // for a small buffer may be neighbours merged with it, hence the size floor.
  if (f.bytes.size() >= (size_t{64} << 20)) {
    const double huge = static_cast<double>(HugePageBytesIn(f.bytes.data(), f.bytes.size()));
    state.counters["huge%"] = 100.0 * huge / static_cast<double>(f.bytes.size());
  }
  FasterPath::ForceForTesting(-1);
}

// One product over rows [first, first + rows) of `w` (all of them by default; x's tokens, y holding
// w.rows outputs a token) with path `path` forced (decode's for one token, prefill's for more),
// timed in seconds: on one thread a single call, on more the rows handed out as the session hands
// out a product's (RowScheduler, 8 chunks a thread on ChunkRowAlign's boundaries).
class ProductTimer {
 public:
  explicit ProductTimer(int threads) : threads_(threads), pool_(threads), rows_(threads) {}
  double operator()(const Backend* b, const MatrixView& w, const Activations& x, float* y, int path, int64_t first = 0,
                    int64_t rows = -1) {
    if (rows < 0) rows = w.rows;
    FasterPath::ForceForTesting(path);
    const auto start = std::chrono::steady_clock::now();
    if (threads_ == 1) {
      b->kernels->matmul(w, x, y, w.rows, first, first + rows);
    } else {
      rows_.Plan(rows, threads_, 8, ChunkRowAlign(w.layout));
      pool_.Run([&](int part, int) {
        RowScheduler::Chunk c{};
        while (rows_.Next(part, &c)) b->kernels->matmul(w, x, y, w.rows, first + c.begin, first + c.end);
      });
    }
    benchmark::DoNotOptimize(y);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // Its threads, for other work paired with the products: a second pool's idle workers would
  // spin on the cores these use.
  ThreadPool& pool() { return pool_; }

 private:
  int threads_;
  ThreadPool pool_;
  RowScheduler rows_;
};

// kPairs calls of time_a and time_b, the order swapped every pair: the median and quartiles of the
// time ratios b / a as counters; each side's times appended to *a_times and *b_times.
template <typename A, typename B>
void PairUp(benchmark::State& state, A time_a, B time_b, std::vector<double>* a_times, std::vector<double>* b_times) {
  constexpr int kPairs = 40;
  std::vector<double> ratios;
  for (auto _ : state) {
    for (int i = 0; i < kPairs; ++i) {
      double ta, tb;
      if (i % 2 == 0) {
        ta = time_a(), tb = time_b();
      } else {
        tb = time_b(), ta = time_a();
      }
      ratios.push_back(tb / ta);
      a_times->push_back(ta);
      b_times->push_back(tb);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["median"] = ratios[ratios.size() / 2];
  state.counters["q1"] = ratios[ratios.size() / 4];
  state.counters["q3"] = ratios[3 * ratios.size() / 4];
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Two forced decode paths over the same 2048 x 151936 matrix in turn (PairUp): the median and
// quartiles of the time ratios path_b / path_a. On the shared host the GB/s of separate cases moved
// by 10-20% between minutes; paired calls share the moment. With more than one thread the rows are
// handed out as the session does (ProductTimer): which walk is faster differs between one and two
// threads on the Zen 5 (bench/README.md, thirty-seventh session).
void BenchPathPairs(benchmark::State& state, const Backend* b, DType dtype, Layout layout, int path_a, int path_b,
                    int threads) {
  constexpr int64_t kOutRows = 151936;
  MatrixFixture f = MakeFixture(*b->kernels, dtype, layout, 2048, kOutRows, 1, true);
  const Activations x = f.Input(*b->kernels, dtype, 1, 2048);
  std::vector<float> y(kOutRows);
  ProductTimer timed(threads);
  timed(b, f.view, x, y.data(), path_a);  // pages the weights in
  std::vector<double> a_times, b_times;
  PairUp(
      state, [&] { return timed(b, f.view, x, y.data(), path_a); },
      [&] { return timed(b, f.view, x, y.data(), path_b); }, &a_times, &b_times);
  FasterPath::ForceForTesting(-1);
}

// Two forced prefill paths (avx512_vnni Q4_0: packed and unpacked strips) over a 64-token product
// of 2048 columns and 6144 rows (the FFN gate's shape) in turn (PairUp): the median and quartiles
// of the time ratios path_b / path_a. Separate gemm cases on the shared host moved by 20-30%
// between runs a minute apart (bench/README.md, fortieth session); paired calls share the moment.
// Weights from memory, as a session's are: 8 stacked copies (57 MB in Q4_0) taken in turn. From
// this L3 (one copy) dropping the prefill's prefetches cost nothing; from memory it does.
void BenchPrefillPairs(benchmark::State& state, const Backend* b, DType dtype, Layout layout, int path_a, int path_b,
                       int threads) {
  constexpr int64_t kColumns = 2048, kRows = 6144, kTokens = 64, kCopies = 8;
  MatrixFixture f = MakeFixture(*b->kernels, dtype, layout, kColumns, kRows * kCopies, kTokens, true);
  const Activations x = f.Input(*b->kernels, dtype, kTokens, kColumns);
  std::vector<float> y(kRows * kCopies * kTokens);
  ProductTimer timed(threads);
  int64_t copy = 0;
  const auto next = [&](int path) { return timed(b, f.view, x, y.data(), path, (copy++ % kCopies) * kRows, kRows); };
  for (int64_t i = 0; i < kCopies; ++i) next(path_a);  // pages every copy in
  std::vector<double> a_times, b_times;
  PairUp(
      state, [&] { return next(path_a); }, [&] { return next(path_b); }, &a_times, &b_times);
  state.counters["GOPS_a"] = 2.0 * kColumns * kRows * kTokens / Median(a_times) / 1e9;
  state.counters["GOPS_b"] = 2.0 * kColumns * kRows * kTokens / Median(b_times) / 1e9;
  FasterPath::ForceForTesting(-1);
}

// Decode's down projection (6144 columns, 2048 rows) as the session runs it: one token, in chunks
// of 128 rows (two threads' share of 8 chunks each), from memory: 16 copies stacked (113 MB in
// Q4_0) taken in turn. The Zen 5's L3 still serves part of such a cycle (16 copies of a 7 MB
// product read 77-84 GB/s at two threads, 96 copies 62-71; bench/README.md, forty-first session),
// so this GB/s sits above memory's. forced_path as in BenchMatmul.
void BenchDownChunks(benchmark::State& state, const Backend* b, DType dtype, Layout layout, int forced_path) {
  constexpr int64_t kColumns = 6144, kRows = 2048, kCopies = 16, kChunk = 128;
  const MatrixFixture f = MakeFixture(*b->kernels, dtype, layout, kColumns, kRows * kCopies, 1, true);
  FasterPath::ForceForTesting(forced_path);
  const Activations x{f.x.data(), f.xq.data(), 1, kColumns, f.xq_sums.data(), f.xq_scales.data()};
  std::vector<float> y(kRows * kCopies);
  int64_t copy = 0;
  for (auto _ : state) {
    const int64_t first = (copy++ % kCopies) * kRows;
    for (int64_t r = first; r < first + kRows; r += kChunk)
      b->kernels->matmul(f.view, x, y.data(), kRows, r, r + kChunk);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(f.bytes.size()) / kCopies;
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes / 1e9, benchmark::Counter::kIsRate);
  FasterPath::ForceForTesting(-1);
}

// A 64-token prefill product as the session meets it: weights from memory, not cache. 8 stacked
// copies of a 2048-column, 6144-row matrix (the FFN gate's shape: 57 MB in Q4_0, more than this
// L3 holds, though it serves part of such a cycle: BenchDownChunks) taken in turn, each in the
// session's chunks of 768 rows (one thread's share cut in 8). Against the cached gemm cases it
// shows what streaming the weights costs a prefill kernel.
void BenchGemmFromMemory(benchmark::State& state, const Backend* b, DType dtype, Layout layout) {
  constexpr int64_t kColumns = 2048, kRows = 6144, kCopies = 8, kChunk = 768, kTokens = 64;
  MatrixFixture f = MakeFixture(*b->kernels, dtype, layout, kColumns, kRows * kCopies, kTokens, true);
  const Activations x = f.Input(*b->kernels, dtype, kTokens, kColumns);
  std::vector<float> y(kRows * kCopies * kTokens);
  int64_t copy = 0;
  for (auto _ : state) {
    const int64_t first = (copy++ % kCopies) * kRows;
    for (int64_t r = first; r < first + kRows; r += kChunk) {
      b->kernels->matmul(f.view, x, y.data(), kRows * kCopies, r, r + kChunk);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * kColumns * kRows * kTokens / 1e9, benchmark::Counter::kIsRate);
}

// A buffer for ReadStreams, on huge pages where the OS gives them, every page touched.
HugePageBuffer ReadBuffer(size_t bytes) {
  HugePageBuffer buffer = AllocateOrAbort(bytes, true);
  auto* words = reinterpret_cast<uint64_t*>(buffer.data());
  for (size_t i = 0; i < bytes / 8; i += 512) words[i] = i;
  return buffer;
}

// What one core reads from memory in the same run as the gemv cases, over as many bytes as the
// 2048 x 151936 Q4_0 matrix (175 MB, huge pages), in kestrel-bench's probe loops (`streams` parts
// side by side, with or without a prefetch 32 KB ahead in each): the decode kernels' GB/s beside it.
void BenchReadStreams(benchmark::State& state, int streams, bool prefetch) {
  const size_t bytes = DTypeRowBytes(DType::kQ4_0, 2048) * 151936;
  HugePageBuffer buffer = ReadBuffer(bytes);
  auto* words = reinterpret_cast<uint64_t*>(buffer.data());
  size_t read = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ReadStreams(words, bytes / 8, streams, prefetch, &read));
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(read) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// Portable code (not a kernel table entry): the session runs it once per quantized input.
void BenchSummarize(benchmark::State& state, int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.1f * i);
  std::vector<BlockQ8_0> q(n / 32);
  QuantizeRowQ8_0(x.data(), q.data(), n);
  std::vector<int32_t> sums(q.size());
  std::vector<float> scales(q.size());
  for (auto _ : state) {
    SummarizeQ8_0Blocks(q.data(), static_cast<int64_t>(q.size()), sums.data(), scales.data());
    benchmark::DoNotOptimize(sums.data());
    benchmark::DoNotOptimize(scales.data());
  }
  state.counters["GB/s"] = benchmark::Counter(state.iterations() * q.size() * 34.0 / 1e9, benchmark::Counter::kIsRate);
}

// Portable code too: the session's Q4_0 offsets table for a prompt (the down projection's input:
// tokens x 192 blocks), in avx512_vnni's runs of 32 blocks.
void BenchFillQ4_0Offsets(benchmark::State& state, int64_t tokens, int64_t blocks) {
  constexpr int64_t kRun = 32;
  std::vector<int32_t> sums(static_cast<size_t>(tokens * blocks));
  for (size_t i = 0; i < sums.size(); ++i) sums[i] = static_cast<int32_t>(i % 255) - 127;
  std::vector<int32_t> table(static_cast<size_t>(Q4_0OffsetsCount(tokens, blocks, kRun)));
  for (auto _ : state) {
    FillQ4_0Offsets(sums.data(), blocks, tokens, kRun, 0, tokens, table.data());
    benchmark::DoNotOptimize(table.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * table.size() * 4.0 / 1e9,
                                              benchmark::Counter::kIsRate);
}

#ifdef KESTREL_BENCH_AVX512_STRIP_TILE
// The avx512_vnni Q4_0 prefill tile alone over one packed strip chunk and a 64-token prompt, the
// strip in L1 and the chunk's 70 KB of activations in L1 and L2 as in the product: the speed of the
// tile's instruction mix. Beside gemm_q4_0_q4_0x4 (the whole product: packing, prefetching, weights
// from L3 or memory) it shows what the product loses around the tile (bench/README.md,
// twenty-first session).
void BenchPackedStripChunk(benchmark::State& state, bool even_tiles) {
  avx512_strip_tile_bench::RunPackedStripChunk(even_tiles);  // warm the buffers
  for (auto _ : state) {
    avx512_strip_tile_bench::RunPackedStripChunk(even_tiles);
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] =
      benchmark::Counter(static_cast<double>(state.iterations()) *
                             static_cast<double>(avx512_strip_tile_bench::PackedStripChunkOps()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// The Q4_0 decode's address pattern alone over the same 2048 x 151936 q4_0x4 matrix as
// gemv_q4_0_q4_0x4/2048x151936/path0 (the kernel with that pattern's prefetch order): what the
// kernel could read from memory if its own arithmetic cost nothing (bench/README.md). by_lines: the
// same pattern and prefetches with aligned loads only; threads: 1, or 2 each reading half the rows.
void BenchDecodePattern(benchmark::State& state, bool by_lines, int threads) {
  constexpr int64_t kColumns = 2048, kRowsTotal = 151936;
  const size_t bytes = DTypeRowBytes(DType::kQ4_0, kColumns) * kRowsTotal;
  HugePageBuffer weights = AllocateOrAbort(bytes, true);
  for (size_t i = 0; i < bytes; ++i) weights.data()[i] = static_cast<uint8_t>(i * 131 + 7);  // paged in, not zero
  ThreadPool pool(threads);
  std::atomic<uint64_t> sink{0};
  const auto read = [&] {
    pool.Run([&](int part, int) {
      // Halves on 32-row steps (the pattern's), so each part starts on a line.
      const int64_t begin = kRowsTotal / 32 * part / threads * 32, end = kRowsTotal / 32 * (part + 1) / threads * 32;
      const uint8_t* at = weights.data() + begin / 4 * (kColumns / 32) * 72;
      sink += avx512_strip_tile_bench::ReadDecodePattern(at, end - begin, kColumns / 32, by_lines);
    });
  };
  read();
  for (auto _ : state) read();
  benchmark::DoNotOptimize(sink.load());
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
}
#endif

// A backend that wants q4_0x4_lines (Backend::wants_q4_0x4_lines): its decode over the 2048 x
// 151936 matrix as the file has it (q4_0x4, forced path `path`) and regrouped as the loader
// regroups a copy (RegroupQ4_0x4ToLines), in turn as BenchPathPairs times two paths: the median
// and quartiles of the time ratios lines / q4_0x4, and each side's median GB/s. Stops with an
// error unless both give the same sums to the bit.
void BenchLinesPairs(benchmark::State& state, const Backend* b, int path, int threads) {
  constexpr int64_t kColumns = 2048, kOutRows = 151936;
  MatrixFixture f = MakeFixture(*b->kernels, DType::kQ4_0, Layout::kQ4_0x4, kColumns, kOutRows, 1, true);
  HugePageBuffer lines = AllocateOrAbort(f.bytes.size(), true);
  std::memcpy(lines.data(), f.bytes.data(), f.bytes.size());
  RegroupQ4_0x4ToLines(lines.data(), kColumns, kOutRows);
  const MatrixView lines_view{DType::kQ4_0, Layout::kQ4_0x4Lines, lines.data(), kColumns, kOutRows};
  const Activations x = f.Input(*b->kernels, DType::kQ4_0, 1, kColumns);
  std::vector<float> y_x4(kOutRows), y_lines(kOutRows);
  ProductTimer timed(threads);
  timed(b, f.view, x, y_x4.data(), path), timed(b, lines_view, x, y_lines.data(), path);  // pages both copies in
  FasterPath::ForceForTesting(-1);
  if (std::memcmp(y_x4.data(), y_lines.data(), sizeof(float) * kOutRows) != 0) {
    state.SkipWithError("the sums over q4_0x4_lines differ from those over q4_0x4");
    return;
  }
  std::vector<double> x4_times, lines_times;
  PairUp(
      state, [&] { return timed(b, f.view, x, y_x4.data(), path); },
      [&] { return timed(b, lines_view, x, y_lines.data(), path); }, &x4_times, &lines_times);
  state.counters["q4_0x4_GB/s"] = static_cast<double>(f.bytes.size()) / Median(x4_times) / 1e9;
  state.counters["lines_GB/s"] = static_cast<double>(f.bytes.size()) / Median(lines_times) / 1e9;
  FasterPath::ForceForTesting(-1);
}

// Decode against a plain read of memory, paired (PairUp): a 2048 x 151936 matrix in `layout`
// (q4_0x4_lines regrouped from q4_0x4, as the loader gives it to the backends that want it), its
// one-token product (the decode path chosen as it runs) in turn with ReadStreams over a buffer of
// the same size, `streams` parts a thread, prefetching or not, each thread reading its share as
// kestrel-bench's bandwidth probe does. "median": read time / product time, i.e. the product's
// read rate as a fraction of the loop's at the same moments. kestrel-bench sets decode against
// the best of many probe passes, each at its own moment; this asks what the kernel leaves on the
// table when the memory is the same for both.
void BenchDecodeAgainstRead(benchmark::State& state, const Backend* b, DType dtype, Layout layout, int threads,
                            int streams, bool prefetch) {
  constexpr int64_t kColumns = 2048, kOutRows = 151936;
  const bool lines = layout == Layout::kQ4_0x4Lines;
  MatrixFixture f = MakeFixture(*b->kernels, dtype, lines ? Layout::kQ4_0x4 : layout, kColumns, kOutRows, 1, true);
  if (lines) RegroupQ4_0x4ToLines(f.bytes.data(), kColumns, kOutRows);
  const MatrixView w{dtype, layout, f.bytes.data(), kColumns, kOutRows};
  const Activations x = f.Input(*b->kernels, dtype, 1, kColumns);
  std::vector<float> y(kOutRows);
  const size_t words = f.bytes.size() / 8;
  HugePageBuffer buffer = ReadBuffer(words * 8);
  const auto* data = reinterpret_cast<const uint64_t*>(buffer.data());
  ProductTimer timed(threads);
  std::atomic<uint64_t> sink{0};
  const auto read = [&] {
    const auto start = std::chrono::steady_clock::now();
    timed.pool().Run([&](int part, int parts) {
      const size_t begin = words * part / parts, end = words * (part + 1) / parts;
      size_t bytes = 0;
      sink += ReadStreams(data + begin, end - begin, streams, prefetch, &bytes);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  timed(b, w, x, y.data(), -1), read();  // pages both in
  std::vector<double> product_times, read_times;
  PairUp(
      state, [&] { return timed(b, w, x, y.data(), -1); }, read, &product_times, &read_times);
  state.counters["product_GB/s"] = static_cast<double>(f.bytes.size()) / Median(product_times) / 1e9;
  state.counters["read_GB/s"] = static_cast<double>(words * 8) / Median(read_times) / 1e9;
  benchmark::DoNotOptimize(sink.load());
}

void BenchQuantize(benchmark::State& state, const Backend* b, int64_t n) {
  std::vector<float> x(n, 0.5f);
  std::vector<BlockQ8_0> q(n / 32);
  for (auto _ : state) {
    b->kernels->quantize_q8_0(x.data(), q.data(), n);
    benchmark::DoNotOptimize(q.data());
  }
  state.counters["GB/s"] = benchmark::Counter(state.iterations() * n * 4.0 / 1e9, benchmark::Counter::kIsRate);
}

// Quantization with each block's quant sum and f32 scale, as every quantized product's input needs:
// the backend's fused kernel where it has one (label "fused"), else quantize_q8_0 and then
// SummarizeQ8_0Blocks over the blocks, as the session does then.
void BenchQuantizeSummarized(benchmark::State& state, const Backend* b, int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 2001 - 1000) * 1e-3f;
  std::vector<BlockQ8_0> q(n / 32);
  std::vector<int32_t> sums(n / 32);
  std::vector<float> scales(n / 32);
  const auto fused = b->kernels->quantize_q8_0_summarized;
  for (auto _ : state) {
    if (fused != nullptr) {
      fused(x.data(), q.data(), sums.data(), scales.data(), n);
    } else {
      b->kernels->quantize_q8_0(x.data(), q.data(), n);
      SummarizeQ8_0Blocks(q.data(), n / 32, sums.data(), scales.data());
    }
    benchmark::DoNotOptimize(q.data());
    benchmark::DoNotOptimize(sums.data());
    benchmark::DoNotOptimize(scales.data());
  }
  state.SetLabel(fused != nullptr ? "fused" : "quantize, then SummarizeQ8_0Blocks");
  state.counters["GB/s"] = benchmark::Counter(state.iterations() * n * 4.0 / 1e9, benchmark::Counter::kIsRate);
}

// 16 prompt rows rounded to bf16 into one token tile, for backends whose prompt products read bf16
// (KernelTable::f32_to_bf16_tile): the session's extra pass per quantized input there, beside the
// quantizing above (GB/s of f32 read).
void BenchF32ToBf16Tile(benchmark::State& state, const Backend* b, int64_t columns) {
  std::vector<float> x(16 * columns);
  for (int64_t i = 0; i < 16 * columns; ++i) x[i] = static_cast<float>((i * 7919) % 2001 - 1000) * 1e-3f;
  std::vector<uint16_t> out(16 * columns);
  for (auto _ : state) {
    b->kernels->f32_to_bf16_tile(x.data(), columns, 16, out.data(), kBf16TileElements);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(state.iterations() * 16 * columns * 4.0 / 1e9, benchmark::Counter::kIsRate);
}

// One token's keys of the Qwen3-1.7B shape (8 heads of 128) into the f16 KV cache.
void BenchF32ToF16(benchmark::State& state, const Backend* b, int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.01f * i);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    b->kernels->f32_to_f16(x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(state.iterations() * n * 6.0 / 1e9, benchmark::Counter::kIsRate);
}

void BenchRmsnorm(benchmark::State& state, const Backend* b, int64_t n) {
  std::vector<float> x(n, 0.5f), w(n, 1.0f), out(n);
  for (auto _ : state) {
    b->kernels->rmsnorm(x.data(), w.data(), out.data(), n, 1e-6f);
    benchmark::DoNotOptimize(out.data());
  }
}

// RoPE on a decode step's query heads (Qwen3-1.7B: 16 heads of 128).
void BenchRope(benchmark::State& state, const Backend* b) {
  const int64_t heads = 16, head_dim = 128;
  const int64_t half = head_dim / 2, positions = 1024;
  std::vector<float> x(heads * head_dim, 0.5f), inv_freq(half), cos(positions * half), sin(positions * half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = 1.0f / std::pow(1e6f, 2.0f * i / head_dim);
  // The angles are the session's, once per token (RopeAngles); the kernel only rotates.
  for (int64_t p = 0; p < positions; ++p) RopeAngles(1000 + p, inv_freq.data(), half, &cos[p * half], &sin[p * half]);
  int64_t pos = 0;
  for (auto _ : state) {
    const int64_t p = pos++ & (positions - 1);
    b->kernels->rope(x.data(), heads, head_dim, &cos[p * half], &sin[p * half], RopeStyle::kHalfSplit);
    benchmark::DoNotOptimize(x.data());
  }
}

// A group of 2 query heads over one KV head (Qwen3-1.7B: 16 query heads, 8 KV heads, head dim 128),
// keys and values contiguous as the session stores them: f32, or f16 (the session's default cache).
// The rows stay in cache here, so the case is the kernel's arithmetic; `streamed` (decode's hint,
// which turns on prefetching) shows what the prefetch instructions cost when nothing is missed.
void BenchAttention(benchmark::State& state, const Backend* b, DType kv, int64_t positions, bool streamed) {
  const int64_t head_dim = 128, heads = 2;
  std::vector<float> q(heads * head_dim, 0.1f), kf(positions * head_dim, 0.01f), vf(positions * head_dim, 0.02f);
  std::vector<uint16_t> kh(kf.size(), Fp32ToFp16(0.01f)), vh(vf.size(), Fp32ToFp16(0.02f));
  const void* k = kv == DType::kF16 ? static_cast<const void*>(kh.data()) : kf.data();
  const void* v = kv == DType::kF16 ? static_cast<const void*>(vh.data()) : vf.data();
  std::vector<float> scores(heads * positions), out(heads * head_dim);
  for (auto _ : state) {
    b->kernels->attention(q.data(), heads, k, v, kv, head_dim, positions, head_dim, 11.3f, scores.data(), out.data(),
                          streamed);
    benchmark::DoNotOptimize(out.data());
  }
  const double row_bytes = static_cast<double>(head_dim) * (kv == DType::kF16 ? 2 : 4);
  state.counters["GB/s"] =
      benchmark::Counter(state.iterations() * 2.0 * positions * row_bytes / 1e9, benchmark::Counter::kIsRate);
}

// A prompt's case: two consecutive tokens over the same cached rows (the second sees one more),
// through attention_tokens where the backend has it, else two `attention` calls as the session
// would make. GB/s counts each token's reads, so it compares with the one-token case above.
void BenchAttentionTwoTokens(benchmark::State& state, const Backend* b, int64_t positions) {
  const int64_t head_dim = 128, heads = 2;
  std::vector<float> q(2 * heads * head_dim, 0.1f), scores(2 * heads * positions), out(2 * heads * head_dim);
  std::vector<uint16_t> kh(positions * head_dim, Fp32ToFp16(0.01f)), vh(kh.size(), Fp32ToFp16(0.02f));
  const int64_t width = heads * head_dim;
  for (auto _ : state) {
    if (b->kernels->attention_tokens != nullptr) {
      b->kernels->attention_tokens(q.data(), width, 2, heads, kh.data(), vh.data(), DType::kF16, head_dim, positions,
                                   head_dim, 11.3f, scores.data(), out.data(), width);
    } else {
      for (int64_t j = 0; j < 2; ++j) {
        b->kernels->attention(q.data() + j * width, heads, kh.data(), vh.data(), DType::kF16, head_dim,
                              positions - 1 + j, head_dim, 11.3f, scores.data(), out.data() + j * width, false);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(state.iterations() * 2.0 * (2 * positions - 1) * head_dim * 2 / 1e9,
                                              benchmark::Counter::kIsRate);
}

// Decode's case: the keys and values come from memory. 2048 positions of one f16 KV head (1 MB of
// keys and values), as many copies as fill 256 MB on huge pages (the session's cache is on them),
// each call taking the next copy, so the rows are never in cache (a Qwen3-1.7B decode at depth 2048
// reads 224 such heads a token).
void BenchAttentionFromMemory(benchmark::State& state, const Backend* b, bool streamed) {
  const int64_t head_dim = 128, heads = 2, positions = 2048;
  const size_t head_bytes = static_cast<size_t>(positions * head_dim) * 2,
               copies = (size_t{256} << 20) / (2 * head_bytes);
  const HugePageBuffer kv = AllocateOrAbort(copies * 2 * head_bytes, true);
  std::mt19937 rng(7);
  UniformFloat dist(-1.0f, 1.0f);
  auto* halves = reinterpret_cast<uint16_t*>(kv.data());
  for (size_t i = 0; i < kv.size() / 2; ++i) halves[i] = Fp32ToFp16(dist(rng));
  std::vector<float> q(heads * head_dim, 0.1f), scores(heads * positions), out(heads * head_dim);
  size_t next = 0;
  for (auto _ : state) {
    const uint8_t* k = kv.data() + next * 2 * head_bytes;
    b->kernels->attention(q.data(), heads, k, k + head_bytes, DType::kF16, head_dim, positions, head_dim, 11.3f,
                          scores.data(), out.data(), streamed);
    benchmark::DoNotOptimize(out.data());
    next = next + 1 == copies ? 0 : next + 1;
  }
  state.counters["GB/s"] =
      benchmark::Counter(state.iterations() * 2.0 * static_cast<double>(head_bytes) / 1e9, benchmark::Counter::kIsRate);
}

void BenchSoftmaxSilu(benchmark::State& state, const Backend* b, int64_t n) {
  std::vector<float> x(n, 0.3f), up(n, 1.0f);
  for (auto _ : state) {
    b->kernels->silu_mul(x.data(), up.data(), n);
    b->kernels->softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
}

// Cost of one dispatch of the decoder's thread pool (an empty job on every thread): a decoded
// token of a 28-layer model dispatches about 200 jobs.
void BenchThreadPoolDispatch(benchmark::State& state, int threads) {
  ThreadPool pool(threads);
  std::atomic<int> sink{0};
  for (auto _ : state) {
    pool.Run([&](int i, int) { sink.fetch_add(i, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}

void RegisterAll() {
  for (int threads : {1, 2, 4}) {
    benchmark::RegisterBenchmark(("thread_pool_dispatch/" + std::to_string(threads)).c_str(), BenchThreadPoolDispatch,
                                 threads)
        ->Unit(benchmark::kMicrosecond);
  }
  // One 64-token prefill input of the Qwen3-1.7B shape's FFN down projection (6144 columns).
  benchmark::RegisterBenchmark("summarize_q8_0/64x6144", BenchSummarize, int64_t{64} * 6144)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("fill_q4_0_offsets/64x192", BenchFillQ4_0Offsets, int64_t{64}, int64_t{192})
      ->Unit(benchmark::kMicrosecond);
  for (int streams : {1, 2, 4}) {
    for (bool prefetch : {false, true}) {
      benchmark::RegisterBenchmark(
          ("memory_read/175MB/streams" + std::to_string(streams) + (prefetch ? "/prefetch" : "")).c_str(),
          BenchReadStreams, streams, prefetch)
          ->Unit(benchmark::kMillisecond);
    }
  }
  struct Case {
    DType dtype;
    Layout layout;
  };
  // q4_0x4_lines: only in memory, regrouped by the loader for backends that want it.
  const Case cases[] = {{DType::kQ4_0, Layout::kPlain},       {DType::kQ4_0, Layout::kQ4_0x4},
                        {DType::kQ4_0, Layout::kQ4_0x4Lines}, {DType::kQ8_0, Layout::kPlain},
                        {DType::kQ8_0, Layout::kQ8_0x8},      {DType::kF16, Layout::kPlain},
                        {DType::kBF16, Layout::kPlain},       {DType::kF32, Layout::kPlain}};
  // The backend a session would choose here: the paired cases below run only on it.
  const auto auto_backend = SelectBackend("auto");
  const Backend* chosen = auto_backend.ok() ? *auto_backend : nullptr;
  for (const Backend* b : CompiledBackends()) {
    if (!b->cpu_supports()) continue;
    const std::string prefix = std::string(b->name) + "/";
    for (const Case& c : cases) {
      if (!b->accepts(c.dtype, c.layout)) continue;
      const std::string name = std::string(DTypeName(c.dtype)) + "_" + LayoutName(c.layout);
      // Qwen3-1.7B shapes: attention projections and the FFN down projection.
      benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/2048x2048").c_str(), BenchMatmul, b, c.dtype, c.layout,
                                   2048, 2048, 1, -1, true)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/6144x2048").c_str(), BenchMatmul, b, c.dtype, c.layout,
                                   6144, 2048, 1, -1, true)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((prefix + "gemm_" + name + "/2048x2048x64").c_str(), BenchMatmul, b, c.dtype,
                                   c.layout, 2048, 2048, 64, -1, true)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((prefix + "gemm_" + name + "/6144x2048x64").c_str(), BenchMatmul, b, c.dtype,
                                   c.layout, 6144, 2048, 64, -1, true)
          ->Unit(benchmark::kMillisecond);
      if (IsBlockQuantized(c.dtype)) {
        benchmark::RegisterBenchmark((prefix + "gemm_" + name + "/2048x6144x64/from_memory").c_str(),
                                     BenchGemmFromMemory, b, c.dtype, c.layout)
            ->Unit(benchmark::kMillisecond);
        // The decode paths paired against path 0 (path 0 against itself: the method's null), on one
        // thread and on two.
        for (int threads = 1; threads <= 2; ++threads) {
          for (int path = 0; path < FasterPath::kMaxPaths; ++path) {
            benchmark::RegisterBenchmark(
                (prefix + "gemv_" + name + "/2048x151936/" + (threads == 1 ? "pairs" : "pairs2t") + "/path" +
                 std::to_string(path) + "_vs_path0")
                    .c_str(),
                BenchPathPairs, b, c.dtype, c.layout, 0, path, threads)
                ->Iterations(1)
                ->Unit(benchmark::kMillisecond);
          }
        }
        // Decode paired against the read loops kestrel-bench's probe runs, on the chosen backend:
        // over q4_0x4_lines where it wants them (regrouped from this q4_0x4), and over q8_0x8.
        const bool lines = b->wants_q4_0x4_lines && c.layout == Layout::kQ4_0x4;
        if (b == chosen && (lines || c.layout == Layout::kQ8_0x8)) {
          const Layout read_layout = lines ? Layout::kQ4_0x4Lines : c.layout;
          for (int threads = 1; threads <= 2; ++threads) {
            for (int streams : {1, 2}) {
              for (bool prefetch : {true, false}) {
                benchmark::RegisterBenchmark(
                    (prefix + "gemv_" + DTypeName(c.dtype) + "_" + LayoutName(read_layout) + "/2048x151936/" +
                     (threads == 1 ? "pairs" : "pairs2t") + "/against_read_streams" + std::to_string(streams) +
                     (prefetch ? "_prefetch" : ""))
                        .c_str(),
                    BenchDecodeAgainstRead, b, c.dtype, read_layout, threads, streams, prefetch)
                    ->Iterations(1)
                    ->Unit(benchmark::kMillisecond);
              }
            }
          }
        }
        // Decode over the same bytes regrouped as q4_0x4_lines, paired against q4_0x4's paths 0 and 1.
        if (b->wants_q4_0x4_lines && c.layout == Layout::kQ4_0x4) {
          for (int threads = 1; threads <= 2; ++threads) {
            for (int path = 0; path < 2; ++path) {
              benchmark::RegisterBenchmark(
                  (prefix + "gemv_" + name + "/2048x151936/" + (threads == 1 ? "pairs" : "pairs2t") + "/lines_vs_path" +
                   std::to_string(path))
                      .c_str(),
                  BenchLinesPairs, b, path, threads)
                  ->Iterations(1)
                  ->Unit(benchmark::kMillisecond);
            }
          }
        }
#ifdef KESTREL_BENCH_AVX512_STRIP_TILE
        if (std::string(b->name) == "avx512_vnni" && c.dtype == DType::kQ4_0 && c.layout == Layout::kQ4_0x4) {
          for (bool even_tiles : {true, false}) {
            benchmark::RegisterBenchmark(
                (prefix + "strip_tile_q4_0_packed/32x64x32/cached" + (even_tiles ? "" : "/tiles_6x10_4x1")).c_str(),
                BenchPackedStripChunk, even_tiles)
                ->Unit(benchmark::kMicrosecond);
          }
        }
#endif
        // Each of the prefill paths a kernel chooses between by speed (avx512_vnni Q4_0: packed and
        // unpacked strips; the same kernel twice where there is no choice), forced.
        for (int path = 0; path < 2; ++path) {
          benchmark::RegisterBenchmark((prefix + "gemm_" + name + "/2048x2048x64/path" + std::to_string(path)).c_str(),
                                       BenchMatmul, b, c.dtype, c.layout, 2048, 2048, 64, path, true)
              ->Unit(benchmark::kMillisecond);
        }
        // The same paths paired in one process, on one thread and on two: Q4_0 (the type with two
        // paths) on the chosen backend.
        for (int threads = 1; b == chosen && c.dtype == DType::kQ4_0 && threads <= 2; ++threads) {
          benchmark::RegisterBenchmark(
              (prefix + "gemm_" + name + "/2048x6144x64/" + (threads == 1 ? "pairs" : "pairs2t") + "/path1_vs_path0")
                  .c_str(),
              BenchPrefillPairs, b, c.dtype, c.layout, 0, 1, threads)
              ->Iterations(1)
              ->Unit(benchmark::kMillisecond);
        }
        // The output projection (vocabulary 151936): 175-330 MB, far beyond the caches, so this one
        // measures how well the kernel streams weights from memory, as decode does.
        benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/2048x151936").c_str(), BenchMatmul, b, c.dtype,
                                     c.layout, 2048, 151936, 1, -1, true)
            ->Unit(benchmark::kMillisecond);
        // The same bytes in rows three times as long and half as long: how much a 16-row group's
        // fixed cost weighs (at one thread on the Intel Xeon CI host, Q4_0 read 5-6% faster in
        // 6144-column rows than in 2048, and 1024-column ones 20-40% slower; bench/README.md).
        benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/6144x50656").c_str(), BenchMatmul, b, c.dtype,
                                     c.layout, 6144, 50656, 1, -1, true)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/1024x303872").c_str(), BenchMatmul, b, c.dtype,
                                     c.layout, 1024, 303872, 1, -1, true)
            ->Unit(benchmark::kMillisecond);
        // Each of the prefetch orders the tiled x86 decode chooses between, forced (the same kernel
        // more than once where there is less choice).
        for (int path = 0; path < FasterPath::kMaxPaths; ++path) {
          benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/2048x151936/path" + std::to_string(path)).c_str(),
                                       BenchMatmul, b, c.dtype, c.layout, 2048, 151936, 1, path, true)
              ->Unit(benchmark::kMillisecond);
        }
#ifdef KESTREL_BENCH_AVX512_STRIP_TILE
        if (std::string(b->name) == "avx512_vnni" && c.dtype == DType::kQ4_0 && c.layout == Layout::kQ4_0x4) {
          for (int threads = 1; threads <= 2; ++threads) {
            for (bool by_lines : {false, true}) {
              benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/2048x151936/address_pattern" +
                                            (threads == 2 ? "/2t" : "") + (by_lines ? "/by_lines" : ""))
                                               .c_str(),
                                           BenchDecodePattern, by_lines, threads)
                  ->Unit(benchmark::kMillisecond);
            }
          }
        }
#endif
        for (int path = -1; path < FasterPath::kMaxPaths; ++path) {
          benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/6144x2048/chunks_from_memory" +
                                        (path < 0 ? "" : "/path" + std::to_string(path)))
                                           .c_str(),
                                       BenchDownChunks, b, c.dtype, c.layout, path)
              ->Unit(benchmark::kMicrosecond);
        }
        // The same bytes on 4 KiB pages, beside the huge-page case (bench/README.md, fifth Zen 5 session).
        benchmark::RegisterBenchmark((prefix + "gemv_" + name + "/2048x151936/small-pages").c_str(), BenchMatmul, b,
                                     c.dtype, c.layout, 2048, 151936, 1, -1, false)
            ->Unit(benchmark::kMillisecond);
      }
    }
    benchmark::RegisterBenchmark((prefix + "quantize_q8_0/2048").c_str(), BenchQuantize, b, 2048);
    benchmark::RegisterBenchmark((prefix + "quantize_q8_0_summarized/2048").c_str(), BenchQuantizeSummarized, b, 2048);
    if (b->kernels->f32_to_bf16_tile != nullptr) {
      benchmark::RegisterBenchmark((prefix + "f32_to_bf16_tile/16x2048").c_str(), BenchF32ToBf16Tile, b, 2048);
    }
    benchmark::RegisterBenchmark((prefix + "rmsnorm/2048").c_str(), BenchRmsnorm, b, 2048);
    benchmark::RegisterBenchmark((prefix + "f32_to_f16/1024").c_str(), BenchF32ToF16, b, 1024);
    benchmark::RegisterBenchmark((prefix + "rope/16x128").c_str(), BenchRope, b)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((prefix + "silu_mul_softmax/6144").c_str(), BenchSoftmaxSilu, b, 6144);
    for (DType kv : {DType::kF32, DType::kF16}) {
      for (int64_t positions : {64, 512, 4096}) {
        for (bool streamed : {false, true}) {
          const std::string name = prefix + "attention_" + (kv == DType::kF16 ? "f16" : "f32") + "_2heads/" +
                                   std::to_string(positions) + (streamed ? "/streamed" : "");
          benchmark::RegisterBenchmark(name.c_str(), BenchAttention, b, kv, positions, streamed)
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
    for (int64_t positions : {512, 4096}) {
      benchmark::RegisterBenchmark((prefix + "attention_f16_2heads_2tokens/" + std::to_string(positions)).c_str(),
                                   BenchAttentionTwoTokens, b, positions)
          ->Unit(benchmark::kMicrosecond);
    }
    for (bool streamed : {false, true}) {
      benchmark::RegisterBenchmark(
          (prefix + "attention_f16_2heads/2048/from_memory" + (streamed ? "/streamed" : "")).c_str(),
          BenchAttentionFromMemory, b, streamed)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace kestrel

int main(int argc, char** argv) {
  kestrel::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
