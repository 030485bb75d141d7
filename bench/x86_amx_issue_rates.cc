// What the amx_int8 prefill loop's parts cost one core, alone and together: the tile unit's
// TDPBSSD, tile loads and stores, and the AVX-512 scaling of each block's sums (bench/README.md,
// twenty-ninth session); then what TILESTORED does to other work beside it (fused scaling,
// arithmetic on registers, plain loads) and the core's clock beside each kind of work (thirtieth
// session). Standalone (not linked with Kestrel). The unit is compiled with the
// baseline flags and the loops carry their own target attributes, so nothing runs a tile or
// AVX-512 instruction before the CPU check; without AMX-INT8 (or the OS's permission for the tile
// state) it says so and exits. Every figure is nanoseconds per block: one 16-token x 16-row x
// 32-byte product, the unit of work of the kernel (amx_kernels.cc), the best of three rounds.
// Usage: kestrel-x86-amx-issue-rates
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define KESTREL_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-int8")))

namespace {

constexpr int kBlocks = 32;  // one chunk of the kernel: 16 KB of A tiles and 16 KB of B tiles, in L1
using Sums = int32_t[16][16];

alignas(64) int8_t g_a[kBlocks][16][32];  // A: 16 tokens x 32 bytes a block
alignas(64) int8_t g_b[kBlocks][8][64];   // B: 8 rows of 16 weight rows x 4 bytes a block
alignas(64) float g_w_scale[kBlocks][16];
alignas(64) float g_a_scale[16][kBlocks];
// Sums the tile stores write and the scaling reads, and a page of their own for stores nobody reads.
alignas(4096) Sums g_sums[2];
alignas(4096) Sums g_elsewhere[2];
float g_out[256];

// Tile registers: C 0-3 (16 x 64 bytes), A 4-5 (16 x 32), B 6-7 (8 x 64).
template <int kTile>
KESTREL_AMX_TARGET inline void Zero() {
  __asm__ volatile("tilezero %%tmm%c0" ::"i"(kTile));
}
template <int kTile, int kRows, int kRowBytes>
KESTREL_AMX_TARGET inline void Load(const void* p) {
  __asm__ volatile("tileloadd (%1,%2,1), %%tmm%c0" ::"i"(kTile), "r"(p), "r"(static_cast<long>(kRowBytes)),
                   "m"(*static_cast<const int8_t(*)[kRows * kRowBytes]>(p)));
}
template <int kC, int kA, int kB>
KESTREL_AMX_TARGET inline void Multiply() {
  __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB));
}
template <int kTile>
KESTREL_AMX_TARGET inline void Store(Sums* out) {
  __asm__ volatile("tilestored %%tmm%c1, (%2,%3,1)" : "=m"(*out) : "i"(kTile), "r"(*out), "r"(64L));
}

// Block i's product into C tile kC (A and B tiles alternating with kC's parity), as the kernel does.
template <int kC>
KESTREL_AMX_TARGET inline void Product(int i) {
  constexpr int a = 4 + (kC & 1), b = 6 + (kC & 1);
  Zero<kC>();
  Load<a, 16, 32>(g_a[i % kBlocks]);
  Load<b, 8, 64>(g_b[i % kBlocks]);
  Multiply<kC, a, b>();
}

// acc[t] += float(sums[t]) * (d_w * d_a[t]): the kernel's scaling of one block (4 instructions per 16 sums).
// (The conversion in its zero-masked form, the same instruction: GCC 12 warns about the unmasked
// one's undefined source under a target attribute.)
KESTREL_AMX_TARGET inline void Scale(__m512* acc, int i, const Sums& sums) {
  const __m512 ws = _mm512_load_ps(g_w_scale[i % kBlocks]);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(g_a_scale[t][i % kBlocks]));
    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, _mm512_load_si512(sums[t])), scale));
  }
}

// The same with the multiply and add fused: 48 instructions instead of 64, but not the reference's
// rounding (so not what the kernel may do); does the loop's time follow the instruction count?
KESTREL_AMX_TARGET inline void ScaleFused(__m512* acc, int i, const Sums& sums) {
  const __m512 ws = _mm512_load_ps(g_w_scale[i % kBlocks]);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(g_a_scale[t][i % kBlocks]));
    acc[t] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, _mm512_load_si512(sums[t])), scale, acc[t]);
  }
}

// 48 AVX-512 multiplies and adds on registers only (no memory operand), one chain per accumulator.
// By 1 and plus 0, hidden from the compiler, so the values stay put (no overflow, no denormals,
// whose assists would time something else); the empty volatile asm keeps each block's arithmetic
// in its place among the tile instructions (with no memory operand GCC would move it).
KESTREL_AMX_TARGET inline void RegisterArithmetic(__m512* acc) {
  __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  __asm__("" : "+v"(one), "+v"(zero));
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    acc[t] = _mm512_mul_ps(_mm512_add_ps(_mm512_mul_ps(acc[t], one), zero), one);
    __asm__ volatile("" : "+v"(acc[t]));
  }
}

// The scaling's 16 64-byte loads of one block's sums and nothing else (kept by the asm).
KESTREL_AMX_TARGET inline void LoadSums(const Sums& sums) {
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) __asm__ volatile("vmovdqa64 %0, %%zmm31" ::"m"(sums[t]) : "xmm31");
}

// A dependent chain of kImuls 64-bit multiplies (3 cycles each on these cores): a clock that runs
// beside the vector and tile work without sharing their ports.
template <int kImuls>
inline void ImulChain(int64_t* x) {
#pragma GCC unroll 64
  for (int j = 0; j < kImuls; ++j) __asm__ volatile("imul %0, %0" : "+r"(*x));
}
int64_t g_chain;

enum class Loop {
  kMultiplyOnly,      // TDPBSSD into two C tiles in turn (with TILEZERO), nothing loaded or stored
  kStoreOnly,         // TILESTORED of one C tile
  kLoadOnly,          // the A and B tile loads of one block
  kScaleOnly,         // the AVX-512 scaling, of sums no tile instruction writes
  kMultiplyAndScale,  // TDPBSSD and the scaling in one loop: do they overlap?
  kLoadAndScale,      // the tile loads and the scaling
  kStoreAndScale,     // the tile stores (to another page) and the scaling
  kTiles,             // the kernel's tile work: zero, load A and B, TDPBSSD, store the sums (two C tiles)
  kTilesFourC,        // the same with four C tiles in rotation (each stored three products after its own)
  kKernel,            // the kernel loop: the tile work, each block's sums scaled one block later
  kKernelElsewhere,   // the same, but the tile stores go to another page and the scaling reads sums no
                      // tile writes: what reading just-stored sums costs
  kScaleFusedOnly,    // the scaling with FMA (48 instructions), alone
  kStoreAndScaleFused,
  kRegistersOnly,     // 48 multiplies and adds on registers, alone
  kStoreAndRegisters, // the tile stores beside them: does TILESTORED overlap arithmetic with no memory?
  kSumLoadsOnly,      // the scaling's 16 loads, alone
  kStoreAndSumLoads,
  // A clock: 32 dependent imuls a block (96 cycles, longer than any loop here takes), alone and
  // beside other work. Beside work that leaves it alone it reads the core's clock during that work;
  // where it reads slower, the work held up the chain's instructions (the clock itself, or their
  // issue, stalled).
  kClockAlone,
  kClockBesideScaling,  // beside the AVX-512 scaling: heavy 512-bit arithmetic, no tile work
  kClockBesideStores,   // beside TILESTORED alone
  kClockBesideKernel,   // beside the kernel loop
};

// Loops of per-block work with no product (optionally beside a tile store), four blocks a step.
template <Loop kLoop>
constexpr bool kSimple = kLoop == Loop::kScaleFusedOnly || kLoop == Loop::kStoreAndScaleFused ||
                         kLoop == Loop::kRegistersOnly || kLoop == Loop::kStoreAndRegisters ||
                         kLoop == Loop::kSumLoadsOnly || kLoop == Loop::kStoreAndSumLoads ||
                         kLoop == Loop::kClockAlone || kLoop == Loop::kClockBesideScaling ||
                         kLoop == Loop::kClockBesideStores;
constexpr int kClockImuls = 32;

template <Loop kLoop>
KESTREL_AMX_TARGET __attribute__((noinline)) void Run(int64_t rounds) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) acc[t] = _mm512_set1_ps(static_cast<float>(t));  // distinct: never merged
  int64_t chain = g_chain;
  const bool elsewhere = kLoop == Loop::kKernelElsewhere;
  Sums* stored = elsewhere ? g_elsewhere : g_sums;
  for (int64_t r = 0; r < rounds; ++r) {
    for (int i = 0; i < kBlocks; i += 4) {
      if constexpr (kSimple<kLoop>) {
        constexpr bool kStore = kLoop == Loop::kStoreAndScaleFused || kLoop == Loop::kStoreAndRegisters ||
                                kLoop == Loop::kStoreAndSumLoads || kLoop == Loop::kClockBesideStores;
        constexpr bool kClock = kLoop == Loop::kClockAlone || kLoop == Loop::kClockBesideScaling ||
                                kLoop == Loop::kClockBesideStores;
        for (int k = 0; k < 4; ++k) {
          if (kStore) Store<0>(&g_elsewhere[k & 1]);
          if (kLoop == Loop::kScaleFusedOnly || kLoop == Loop::kStoreAndScaleFused) ScaleFused(acc, i + k, g_sums[k & 1]);
          if (kLoop == Loop::kRegistersOnly || kLoop == Loop::kStoreAndRegisters) RegisterArithmetic(acc);
          if (kLoop == Loop::kSumLoadsOnly || kLoop == Loop::kStoreAndSumLoads) LoadSums(g_sums[k & 1]);
          if (kLoop == Loop::kClockBesideScaling) Scale(acc, i + k, g_sums[k & 1]);
          if (kClock) ImulChain<kClockImuls>(&chain);
        }
      } else if constexpr (kLoop == Loop::kMultiplyOnly || kLoop == Loop::kMultiplyAndScale) {
        Zero<0>();
        Multiply<0, 4, 6>();
        if (kLoop == Loop::kMultiplyAndScale) Scale(acc, i, g_sums[0]);
        Zero<1>();
        Multiply<1, 5, 7>();
        if (kLoop == Loop::kMultiplyAndScale) Scale(acc, i + 1, g_sums[1]);
        Zero<0>();
        Multiply<0, 4, 6>();
        if (kLoop == Loop::kMultiplyAndScale) Scale(acc, i + 2, g_sums[0]);
        Zero<1>();
        Multiply<1, 5, 7>();
        if (kLoop == Loop::kMultiplyAndScale) Scale(acc, i + 3, g_sums[1]);
      } else if constexpr (kLoop == Loop::kStoreOnly || kLoop == Loop::kStoreAndScale) {
        for (int k = 0; k < 4; ++k) {
          Store<0>(&g_elsewhere[k & 1]);
          if (kLoop == Loop::kStoreAndScale) Scale(acc, i + k, g_sums[k & 1]);
        }
      } else if constexpr (kLoop == Loop::kLoadOnly || kLoop == Loop::kLoadAndScale) {
        for (int k = 0; k < 4; k += 2) {
          Load<4, 16, 32>(g_a[i + k]);
          Load<6, 8, 64>(g_b[i + k]);
          if (kLoop == Loop::kLoadAndScale) Scale(acc, i + k, g_sums[0]);
          Load<5, 16, 32>(g_a[i + k + 1]);
          Load<7, 8, 64>(g_b[i + k + 1]);
          if (kLoop == Loop::kLoadAndScale) Scale(acc, i + k + 1, g_sums[1]);
        }
      } else if constexpr (kLoop == Loop::kScaleOnly) {
        for (int k = 0; k < 4; ++k) Scale(acc, i + k, g_sums[k & 1]);
      } else if constexpr (kLoop == Loop::kTilesFourC) {
        // Products run three blocks ahead of their stores.
        Product<3>(i + 3);
        Store<0>(&g_elsewhere[0]);
        Product<0>(i + 4);
        Store<1>(&g_elsewhere[1]);
        Product<1>(i + 5);
        Store<2>(&g_elsewhere[0]);
        Product<2>(i + 6);
        Store<3>(&g_elsewhere[1]);
      } else {
        // kTiles, kKernel, kKernelElsewhere, kClockBesideKernel: the kernel's order (amx_kernels.cc
        // TokenTile), block i + 1's product issued, block i's sums stored, block i - 1's scaled.
        const bool scale = kLoop != Loop::kTiles;
        const bool clock = kLoop == Loop::kClockBesideKernel;
        const Sums& even = elsewhere ? g_sums[0] : stored[0];
        const Sums& odd = elsewhere ? g_sums[1] : stored[1];
        for (int k = 0; k < 4; k += 2) {
          Product<1>(i + k + 1);
          Store<0>(&stored[0]);
          if (scale) Scale(acc, i + k + kBlocks - 1, odd);
          if (clock) ImulChain<kClockImuls>(&chain);
          Product<0>(i + k + 2);
          Store<1>(&stored[1]);
          if (scale) Scale(acc, i + k, even);
          if (clock) ImulChain<kClockImuls>(&chain);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) _mm512_storeu_ps(g_out + 16 * t, acc[t]);
  g_chain = chain;
}

template <Loop kLoop>
KESTREL_AMX_TARGET double NanosecondsPerBlock() {
  constexpr int64_t kRounds = 20000;
  if constexpr (kLoop == Loop::kTilesFourC) {
    Product<0>(0);
    Product<1>(1);
    Product<2>(2);
  } else {
    Product<0>(0);  // the kernel loop's first product
  }
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    Run<kLoop>(kRounds);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns / (kRounds * kBlocks) < best) best = ns / (kRounds * kBlocks);
  }
  return best;
}

// The 64-byte operand of LDTILECFG (palette 1).
struct TileConfig {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

KESTREL_AMX_TARGET void ConfigureTiles() {
  alignas(64) TileConfig config;
  std::memset(&config, 0, sizeof(config));
  config.palette_id = 1;
  for (int c = 0; c < 4; ++c) config.colsb[c] = 64, config.rows[c] = 16;
  for (int a = 4; a < 6; ++a) config.colsb[a] = 32, config.rows[a] = 16;
  for (int b = 6; b < 8; ++b) config.colsb[b] = 64, config.rows[b] = 8;
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

KESTREL_AMX_TARGET void ReleaseTiles() { __asm__ volatile("tilerelease"); }

bool CpuHasAmxInt8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 30)) && (ebx & (1u << 31));  // F, BW, VL
  const bool amx = (edx & (1u << 24)) && (edx & (1u << 25));                           // AMX-TILE, AMX-INT8
  if (!avx512 || !amx) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kState = 0xe6u | (1u << 17) | (1u << 18);  // SSE/AVX/AVX-512 and the tile state
  if ((xcr0_lo & kState) != kState) return false;
#if defined(__linux__)
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
  return false;
#endif
}

}  // namespace

int main() {
  if (!CpuHasAmxInt8()) {
    std::printf("kestrel-x86-amx-issue-rates: this CPU (or OS) offers no AMX-INT8 with AVX-512; nothing measured\n");
    return 0;
  }
  for (int i = 0; i < kBlocks; ++i) {
    for (int j = 0; j < 512; ++j) {
      g_a[i][j / 32][j % 32] = static_cast<int8_t>((j * 7 + i) % 13 - 6);
      g_b[i][j / 64][j % 64] = static_cast<int8_t>((j * 5 + i) % 11 - 5);
    }
    for (int t = 0; t < 16; ++t)
      g_w_scale[i][t] = 0.01f * static_cast<float>(t + 1), g_a_scale[t][i] = 0.02f * static_cast<float>(i + 1);
  }
  ConfigureTiles();
  struct Row {
    const char* name;
    double (*measure)();
  };
  const Row rows[] = {
      {"TDPBSSD (with TILEZERO), alone", NanosecondsPerBlock<Loop::kMultiplyOnly>},
      {"TILESTORED of the sums, alone", NanosecondsPerBlock<Loop::kStoreOnly>},
      {"tile loads of A and B, alone", NanosecondsPerBlock<Loop::kLoadOnly>},
      {"AVX-512 scaling, alone", NanosecondsPerBlock<Loop::kScaleOnly>},
      {"TDPBSSD and scaling together", NanosecondsPerBlock<Loop::kMultiplyAndScale>},
      {"tile loads and scaling together", NanosecondsPerBlock<Loop::kLoadAndScale>},
      {"TILESTORED and scaling together", NanosecondsPerBlock<Loop::kStoreAndScale>},
      {"tile work of the kernel loop, 2 C tiles", NanosecondsPerBlock<Loop::kTiles>},
      {"tile work, 4 C tiles in rotation", NanosecondsPerBlock<Loop::kTilesFourC>},
      {"kernel loop (tiles + scaling)", NanosecondsPerBlock<Loop::kKernel>},
      {"kernel loop, sums read not just stored", NanosecondsPerBlock<Loop::kKernelElsewhere>},
      {"scaling with FMA (48 instructions), alone", NanosecondsPerBlock<Loop::kScaleFusedOnly>},
      {"TILESTORED and FMA scaling together", NanosecondsPerBlock<Loop::kStoreAndScaleFused>},
      {"48 AVX-512 ops on registers, alone", NanosecondsPerBlock<Loop::kRegistersOnly>},
      {"TILESTORED and those 48 together", NanosecondsPerBlock<Loop::kStoreAndRegisters>},
      {"the scaling's 16 loads, alone", NanosecondsPerBlock<Loop::kSumLoadsOnly>},
      {"TILESTORED and the 16 loads together", NanosecondsPerBlock<Loop::kStoreAndSumLoads>},
  };
  // The clock rows: 96 cycles a block of the imul chain, so GHz = 96 / ns.
  const Row clocks[] = {
      {"imul chain alone", NanosecondsPerBlock<Loop::kClockAlone>},
      {"imul chain beside the AVX-512 scaling", NanosecondsPerBlock<Loop::kClockBesideScaling>},
      {"imul chain beside TILESTORED", NanosecondsPerBlock<Loop::kClockBesideStores>},
      {"imul chain beside the kernel loop", NanosecondsPerBlock<Loop::kClockBesideKernel>},
  };
  // The best of three rounds over the whole list: on a shared host a neighbour's work (the tile unit
  // may be shared with another hardware thread) doubled single figures for whole seconds at a time.
  constexpr int kRows = sizeof(rows) / sizeof(rows[0]);
  constexpr int kClocks = sizeof(clocks) / sizeof(clocks[0]);
  double best[kRows], best_clock[kClocks];
  for (double& b : best) b = 1e30;
  for (double& b : best_clock) b = 1e30;
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < kRows; ++r) best[r] = std::min(best[r], rows[r].measure());
    for (int r = 0; r < kClocks; ++r) best_clock[r] = std::min(best_clock[r], clocks[r].measure());
  }
  std::printf("%-42s %8s %8s\n", "loop", "ns/block", "GOPS");
  for (int r = 0; r < kRows; ++r) {
    std::printf("%-42s %8.2f %8.0f\n", rows[r].name, best[r], 2.0 * 16 * 16 * 32 / best[r]);
  }
  std::printf("\n%-42s %8s %8s\n", "clock (96 imul cycles a block)", "ns/block", "GHz");
  for (int r = 0; r < kClocks; ++r) {
    std::printf("%-42s %8.2f %8.2f\n", clocks[r].name, best_clock[r], 3.0 * kClockImuls / best_clock[r]);
  }
  ReleaseTiles();
  std::printf("(checksum %g)\n", static_cast<double>(g_out[5]));
  return 0;
}
