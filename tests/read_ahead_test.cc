// Decode's read-ahead (decoder/read_ahead.h) and the L2 size it is sized from
// (platform/cache_size.h): each thread's span starts where RowScheduler will hand it its first
// chunk of the next product and stays within that matrix; steps walk it 4 KB at a time; sysfs's
// cache sizes and CPU lists parse, and malformed ones are refused; a made-up sysfs tree gives the
// smallest per-core share of L2; where sysfs says nothing, CPUID's cache reports (made-up ones, and
// the running CPU's) give it.
#include "decoder/read_ahead.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "decoder/row_scheduler.h"
#include "format/layout.h"
#include "platform/cache_size.h"
#include "platform/cpu_cache.h"
#include "test_support.h"

namespace kestrel {
namespace {

struct Case {
  DType dtype;
  Layout layout;
  int64_t columns;
  std::vector<int64_t> rows;  // one entry a matrix, sharing one input
};

TEST_CASE("ReadAhead: each thread's span is the front of the share RowScheduler gives it", "[read_ahead]") {
  const Case cases[] = {
      {DType::kQ4_0, Layout::kQ4_0x4, 2048, {2048, 1024, 1024}},  // Qwen3-1.7B's Q, K and V
      {DType::kQ8_0, Layout::kQ8_0x8, 2048, {6144, 6144}},        // gate and up
      {DType::kQ4_0, Layout::kQ4_0x4, 6144, {2048}},              // down
      {DType::kQ8_0, Layout::kPlain, 64, {48, 16, 16}},           // a matrix shorter than a share
      {DType::kF32, Layout::kPlain, 96, {80}},
  };
  for (const Case& c : cases) {
    std::vector<MatrixView> views;
    std::vector<std::vector<uint8_t>> storage;
    for (int64_t rows : c.rows) {
      storage.emplace_back(MatrixBytes(c.dtype, c.columns, rows));
      views.push_back({c.dtype, c.layout, storage.back().data(), c.columns, rows});
    }
    std::vector<const MatrixView*> matrices;
    std::vector<int64_t> rows, align;
    for (const MatrixView& v : views) {
      matrices.push_back(&v);
      rows.push_back(v.rows);
      align.push_back(ChunkRowAlign(v.layout));  // as Session::Linear plans a product
    }
    const int count = static_cast<int>(views.size());
    for (int parts : {2, 3, 4}) {
      RowScheduler scheduler(parts);
      scheduler.Plan(rows.data(), align.data(), count, parts, 8);
      for (int part = 0; part < parts; ++part) {
        RowScheduler::Chunk first{};
        REQUIRE(scheduler.Next(part, &first));  // each owner's first chunk is the front of its share
        const MatrixView& m = views[static_cast<size_t>(first.matrix)];
        const auto* base = static_cast<const uint8_t*>(m.data);
        const uint8_t* share = base + MatrixBytes(m.dtype, m.columns, first.begin);
        const uint8_t* matrix_end = base + MatrixBytes(m.dtype, m.columns, m.rows);
        for (int64_t bytes : {int64_t{1}, int64_t{4096}, int64_t{512} << 10, int64_t{64} << 20}) {
          INFO("columns " << c.columns << ", parts " << parts << ", part " << part << ", bytes " << bytes);
          ReadAhead a = ReadAhead::ShareStart(matrices.data(), count, part, parts, bytes);
          CHECK(a.next == share);
          CHECK(a.end == (matrix_end - share > bytes ? share + bytes : matrix_end));
          const int64_t length = a.end - a.next;
          int64_t steps = 0;
          while (a.Step()) ++steps;
          CHECK(steps + 1 == (length + ReadAhead::kStepBytes - 1) / ReadAhead::kStepBytes);
          CHECK(a.next == a.end);
          CHECK_FALSE(a.Step());
        }
      }
    }
  }
}

TEST_CASE("Share starts: 16-row groups of whole tiles, split points moved down within their matrix", "[read_ahead]") {
  // Every layout's tiles (1, 4 or 8 rows) divide the kernels' 16-row group.
  CHECK(ChunkRowAlign(Layout::kPlain) == 16);
  CHECK(ChunkRowAlign(Layout::kQ4_0x4) == 16);
  CHECK(ChunkRowAlign(Layout::kQ8_0x8) == 16);
  const int64_t rows[] = {100, 40, 60};  // 200 rows in all
  const auto row_count = [&](int i) { return rows[i]; };
  const auto align = [](int i) { return int64_t{i == 1 ? 1 : 16}; };
  struct Expect {
    int part, parts, matrix;
    int64_t offset, row;
  };
  for (const Expect& e : {Expect{0, 2, 0, 0, 0}, Expect{1, 2, 1, 100, 0},    // 100 is matrix 1's first row
                          Expect{1, 3, 0, 0, 64},                            // 66 -> 64
                          Expect{2, 3, 1, 100, 33},                          // 133: row 33 of align 1
                          Expect{1, 4, 0, 0, 48}, Expect{3, 4, 2, 140, 0},   // 150 -> row 10 -> 0
                          Expect{2, 5, 0, 0, 80}, Expect{3, 5, 1, 100, 20},  // 120: row 20 of align 1
                          Expect{2, 2, 3, 200, 0}}) {                        // past the last share
    INFO("part " << e.part << " of " << e.parts);
    const SharePoint s = FindShareStart(3, e.part, e.parts, row_count, align);
    CHECK(s.matrix == e.matrix);
    CHECK(s.offset == e.offset);
    CHECK(s.row == e.row);
  }
  const SharePoint none = FindShareStart(0, 0, 2, row_count, align);
  CHECK(none.matrix == 0);
  CHECK(none.offset == 0);
}

TEST_CASE("ReadAhead: nothing to read for no bytes, no matrices or a thread outside the pool", "[read_ahead]") {
  std::vector<uint8_t> data(MatrixBytes(DType::kQ8_0, 64, 32));
  const MatrixView m{DType::kQ8_0, Layout::kPlain, data.data(), 64, 32};
  const MatrixView* matrices[] = {&m};
  for (const ReadAhead& a :
       {ReadAhead::ShareStart(matrices, 1, 0, 2, 0), ReadAhead::ShareStart(matrices, 0, 0, 2, 4096),
        ReadAhead::ShareStart(matrices, 1, 2, 2, 4096), ReadAhead::ShareStart(matrices, 1, -1, 2, 4096)}) {
    ReadAhead copy = a;
    CHECK(copy.next == copy.end);
    CHECK_FALSE(copy.Step());
  }
  ReadAhead empty;
  CHECK_FALSE(empty.Step());
  // Matrices without rows (none in a valid model) give nothing rather than a span past them.
  const MatrixView none{DType::kQ8_0, Layout::kPlain, data.data(), 64, 0};
  const MatrixView* no_rows[] = {&none, &none};
  ReadAhead a = ReadAhead::ShareStart(no_rows, 2, 1, 2, 4096);
  CHECK(a.next == a.end);
}

TEST_CASE("sysfs cache sizes and CPU lists parse; malformed ones are refused", "[read_ahead]") {
  CHECK(ParseCacheSize("2048K\n") == 2048 * 1024);
  CHECK(ParseCacheSize("1M") == 1 << 20);
  CHECK(ParseCacheSize("1G") == int64_t{1} << 30);
  CHECK(ParseCacheSize("512") == 512);
  CHECK(ParseCacheSize(" 48K ") == 48 * 1024);
  for (const char* bad : {"", "K", "12Q", "-1K", "1.5M", "99999999999999K"}) {
    INFO(bad);
    CHECK(ParseCacheSize(bad) == -1);
  }
  CHECK(CountCpuList("0\n") == 1);
  CHECK(CountCpuList("0-1") == 2);
  CHECK(CountCpuList("0-3,6") == 5);
  CHECK(CountCpuList("0,2,4-7") == 6);
  for (const char* bad : {"", "3-1", "0-", "-2", "0,,1", "0,", "a", "0-3;6"}) {
    INFO(bad);
    CHECK(CountCpuList(bad) == -1);
  }
  // Whatever this machine's sysfs says, a size is never negative, and where it is known it is a
  // plausible L2 share (4 KB to 1 GB).
  const int64_t l2 = L2BytesPerCore();
  CHECK(l2 >= 0);
  if (l2 > 0) {
    CHECK(l2 >= 4096);
    CHECK(l2 <= int64_t{1} << 30);
  }
  CHECK(L2BytesPerCore() == l2);  // read once and kept
}

// Writes `text` to `path`, making the folders on the way.
void WriteSysfsFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

void WriteCache(const std::filesystem::path& cpu, int index, int level, const std::string& type,
                const std::string& size, const std::string& shared) {
  const std::filesystem::path at = cpu / "cache" / ("index" + std::to_string(index));
  WriteSysfsFile(at / "level", std::to_string(level));
  WriteSysfsFile(at / "type", type);
  WriteSysfsFile(at / "size", size);
  WriteSysfsFile(at / "shared_cpu_list", shared);
}

TEST_CASE("L2 share per core from a sysfs tree: the smallest over the CPUs, shared caches divided", "[read_ahead]") {
  const std::filesystem::path root = std::filesystem::path(testing::TempDir()) / "sysfs-cpu";
  std::filesystem::remove_all(root);
  // A big.LITTLE-like layout: cpu0-1 share a 512K L2 (256K each), cpu2 has 2048K alone, cpu3 is
  // offline (no cache folder), and each CPU's L1 caches come first, as on Linux.
  WriteSysfsFile(root / "present", "0-3");
  for (int cpu = 0; cpu < 3; ++cpu) {
    const std::filesystem::path dir = root / ("cpu" + std::to_string(cpu));
    WriteCache(dir, 0, 1, "Data", "32K", std::to_string(cpu));
    WriteCache(dir, 1, 1, "Instruction", "32K", std::to_string(cpu));
    WriteCache(dir, 2, 2, "Unified", cpu < 2 ? "512K" : "2048K", cpu < 2 ? "0-1" : "2");
    WriteCache(dir, 3, 3, "Unified", "8192K", "0-3");
  }
  CHECK(L2BytesPerCoreIn(root.string()) == 256 * 1024);
  // Without the little cores' L2 entries only the big core's counts.
  for (int cpu = 0; cpu < 2; ++cpu) std::filesystem::remove_all(root / ("cpu" + std::to_string(cpu)) / "cache" / "index2");
  CHECK(L2BytesPerCoreIn(root.string()) == 2048 * 1024);
  // A malformed size, or no list of CPUs present: unknown.
  WriteCache(root / "cpu2", 2, 2, "Unified", "lots", "2");
  CHECK(L2BytesPerCoreIn(root.string()) == 0);
  std::filesystem::remove(root / "present");
  CHECK(L2BytesPerCoreIn(root.string()) == 0);
  CHECK(L2BytesPerCoreIn((root / "absent").string()) == 0);
  std::filesystem::remove_all(root);
}

// A deterministic cache parameters sub-leaf (CPUID leaf 4 or 0x8000001D): type 1 data, 2
// instruction, 3 unified; `sharers` logical CPUs share it.
CpuidRegisters CacheLeaf(uint32_t type, uint32_t level, uint32_t ways, uint32_t sets, uint32_t sharers) {
  CpuidRegisters r;
  r.eax = type | level << 5 | (sharers - 1) << 14;
  r.ebx = (64 - 1) | (1 - 1) << 12 | (ways - 1) << 22;  // 64-byte lines, one partition
  r.ecx = sets - 1;
  return r;
}

TEST_CASE("L2 share per CPU from CPUID's reports, for where sysfs says nothing", "[read_ahead]") {
  // An Intel core's leaf 4: L1d 48K, L1i 32K, a 2 MiB L2 (16 ways x 2048 sets) shared by its two
  // hyperthreads, then a 105 MiB L3; leaf 0x80000006 also says 2048 KiB, per core.
  CpuidCacheReport intel;
  intel.caches = {CacheLeaf(1, 1, 12, 64, 2), CacheLeaf(2, 1, 8, 64, 2), CacheLeaf(3, 2, 16, 2048, 2),
                  CacheLeaf(3, 3, 15, 114688, 128)};
  intel.l2_ecx = 2048u << 16 | 0x7040;
  CHECK(L2BytesPerCpu(intel) == 1024 * 1024);
  // The Zen 5 CI machine: no leaf 4 entries, no TOPOEXT (so no 0x8000001D), no leaf 0xB; leaf
  // 0x80000006's ECX as that machine gives it, 1024 KiB.
  CpuidCacheReport zen5;
  zen5.l2_ecx = 0x04006140;
  CHECK(L2BytesPerCpu(zen5) == 1024 * 1024);
  zen5.smt_threads = 2;  // the same core with SMT reported: half each
  CHECK(L2BytesPerCpu(zen5) == 512 * 1024);
  // Descriptors without a level-2 data or unified cache fall back to leaf 0x80000006; an
  // instruction-only L2 does not count, nor anything after a type-0 entry.
  CpuidCacheReport l1_only;
  l1_only.caches = {CacheLeaf(1, 1, 12, 64, 1), CacheLeaf(2, 2, 8, 1024, 1), CpuidRegisters{},
                    CacheLeaf(3, 2, 16, 1024, 1)};
  l1_only.l2_ecx = 256u << 16;
  CHECK(L2BytesPerCpu(l1_only) == 256 * 1024);
  CHECK(L2BytesPerCpu(CpuidCacheReport{}) == 0);  // nothing reported: unknown

  // The running CPU: nothing (off x86) or a plausible share; and where this machine's sysfs gives
  // no L2 (as on the Zen 5 CI machine), L2BytesPerCore is CPUID's figure, so the read-ahead is on.
  const int64_t reported = L2BytesPerCpu(ReadCpuidCacheReport());
  CHECK(reported >= 0);
  if (reported > 0) {
    CHECK(reported >= 16 * 1024);
    CHECK(reported <= int64_t{1} << 30);
  }
  if (L2BytesPerCoreIn("/sys/devices/system/cpu") == 0) CHECK(L2BytesPerCore() == reported);
}

}  // namespace
}  // namespace kestrel
