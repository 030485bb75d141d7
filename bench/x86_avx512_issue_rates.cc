// How many of the avx512_vnni kernels' instructions one core issues per cycle, alone and mixed: the
// ceiling the prefill loop is measured against in bench/README.md. Standalone (not linked with
// Kestrel). The loops are inline assembly and the unit is compiled with the baseline flags, so
// nothing runs an AVX-512 instruction before the CPU check; on a CPU without AVX-512 VNNI it says so
// and exits. Each loop runs independent instructions (or reads one cached line), so throughput, not
// latency, is what it times, except the line marked as latency.
// Usage: kestrel-x86-avx512-issue-rates
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

alignas(64) int32_t g_line[160];  // 640 bytes: the loads below read up to 520 bytes in

template <typename Body>
double NanosecondsPerIteration(int64_t iterations, Body body) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) body();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s * 1e9 / static_cast<double>(iterations) < best) best = s * 1e9 / static_cast<double>(iterations);
  }
  return best;
}

// Eight VPDPBUSD into independent accumulators (zmm0-7), then an optional tail of other work.
#define DP(r) "vpdpbusd %%zmm20, %%zmm21, %%zmm" #r "\n"
#define DP_MEM(r, o) "vpdpbusd " #o "(%0)%{1to16%}, %%zmm21, %%zmm" #r "\n"
#define BC(r, o) "vpbroadcastd " #o "(%0), %%zmm" #r "\n"
#define EIGHT_DP DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7)
#define SHUF(r) "vpshufd $0x55, %%zmm20, %%zmm" #r "\n"
#define TWO(op) op " %%zmm20, %%zmm21, %%zmm8\n" op " %%zmm20, %%zmm21, %%zmm9\n"
#define TWELVE_DP EIGHT_DP DP(8) DP(9) DP(10) DP(11)
#define THREE(op) op " %%zmm20, %%zmm21, %%zmm12\n" op " %%zmm20, %%zmm21, %%zmm13\n" op " %%zmm20, %%zmm21, %%zmm14\n"
#define THREE_UNARY(op) op " %%zmm20, %%zmm12\n" op " %%zmm20, %%zmm13\n" op " %%zmm20, %%zmm14\n"
// Three of `op` with an immediate (`op $imm, zmm20, [zmm21,] dst`; `srcs` names the sources).
#define THREE_IMM(op, imm, srcs) \
  op " $" #imm ", " srcs ", %%zmm12\n" op " $" #imm ", " srcs ", %%zmm13\n" op " $" #imm ", " srcs ", %%zmm14\n"
// A mixes-table row: twelve VPDPBUSD chains and three of the two-operand instruction `op`.
#define TWELVE_DP_AND_THREE(op) \
  { "12 vpdpbusd + 3 " op, NanosecondsPerIteration(n, RUN(TWELVE_DP THREE(op))) }
#define DP_FROM(r, b) "vpdpbusd %%zmm" #b ", %%zmm21, %%zmm" #r "\n"
// Eight 64-byte loads, one a line, `skew` bytes past each line's start (8: each crosses a line).
#define LOAD_AT(o, skew, r) "vmovdqu32 " #o "+" #skew "(%0), %%zmm" #r "\n"
#define EIGHT_LOADS(skew)                                                                                           \
  LOAD_AT(0, skew, 12)                                                                                              \
  LOAD_AT(64, skew, 13) LOAD_AT(128, skew, 14) LOAD_AT(192, skew, 15) LOAD_AT(256, skew, 12) LOAD_AT(320, skew, 13) \
      LOAD_AT(384, skew, 14) LOAD_AT(448, skew, 15)
// Only xmm0-15 can be named as clobbers in a unit built without AVX-512; zmm20/21 are read, never written.
#define CLOBBERS                                                                                                      \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", \
      "xmm14", "xmm15"
#define RUN(text) [] { __asm__ volatile(text ::"r"(g_line) : CLOBBERS); }

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni")) {
    std::printf("this CPU lacks AVX-512 VNNI: nothing to measure\n");
    return 0;
  }
  constexpr int64_t n = 20'000'000;
  // Ten dependent scalar adds per iteration, one chain across iterations: one per cycle, so this is
  // the clock.
  uint64_t x = 0;
  const double add_ns = NanosecondsPerIteration(n, [&x] {
    __asm__ volatile(
        "add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n"
        "add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n"
        : "+r"(x));
  });
  const double ghz = 10.0 / add_ns;
  const auto cycles = [ghz](double ns) { return ns * ghz; };
  std::printf("clock (dependent adds)                       %6.2f GHz\n", ghz);
  const struct {
    const char* name;
    int count;  // instructions per iteration
    double ns;
  } rows[] = {
      // Twelve chains: eight are latency-bound (~1.83 per cycle on a Zen 5).
      {"vpdpbusd zmm, registers", 12, NanosecondsPerIteration(n, RUN(TWELVE_DP))},
      {"vpdpbusd zmm, m32{1to16}", 12,
       NanosecondsPerIteration(
           n, RUN(DP_MEM(0, 0) DP_MEM(1, 4) DP_MEM(2, 8) DP_MEM(3, 12) DP_MEM(4, 16) DP_MEM(5, 20) DP_MEM(6, 24)
                      DP_MEM(7, 28) DP_MEM(8, 32) DP_MEM(9, 36) DP_MEM(10, 40) DP_MEM(11, 44)))},
      {"vpbroadcastd zmm, m32", 8,
       NanosecondsPerIteration(n, RUN(BC(0, 0) BC(1, 4) BC(2, 8) BC(3, 12) BC(4, 16) BC(5, 20) BC(6, 24) BC(7, 28)))},
      {"vmovdqa64 zmm, m512", 8,
       NanosecondsPerIteration(n, RUN("vmovdqa64 (%0), %%zmm0\n vmovdqa64 64(%0), %%zmm1\n vmovdqa64 128(%0), %%zmm2\n"
                                      "vmovdqa64 192(%0), %%zmm3\n vmovdqa64 (%0), %%zmm4\n vmovdqa64 64(%0), %%zmm5\n"
                                      "vmovdqa64 128(%0), %%zmm6\n vmovdqa64 192(%0), %%zmm7\n"))},
      {"vpdpbusd latency (one chain)", 4, NanosecondsPerIteration(n, RUN(DP(0) DP(0) DP(0) DP(0)))},
  };
  for (const auto& r : rows) {
    const double c = cycles(r.ns);
    if (r.count == 4) {
      std::printf("%-44s %6.2f cycles\n", r.name, c / r.count);
    } else {
      std::printf("%-44s %6.2f per cycle\n", r.name, r.count / c);
    }
  }
  // Cycles per iteration of each mix. First, which instructions share the VPDPBUSD pipes: twelve
  // independent chains (three times the latency over the issue interval, so the chains never wait
  // on themselves; eight ran at ~1.83 per cycle, latency-bound, and made the float additions look
  // as if they cost a slot too), plus three of the instruction named. On a Zen 5: 6.0 cycles alone;
  // +1.5 for multiplies of any kind (vmulps, vfmadd231ps, vpmulld, vpmullw) and for vpermt2d and
  // vpsadbw, +0 for additions, conversions, vscalefps and variable shifts (bench/README.md).
  const struct {
    const char* name;
    double ns;
  } mixes[] = {
      {"12 vpdpbusd", NanosecondsPerIteration(n, RUN(TWELVE_DP))},
      TWELVE_DP_AND_THREE("vpaddd"),
      TWELVE_DP_AND_THREE("vaddps"),
      {"12 vpdpbusd + 3 vcvtdq2ps", NanosecondsPerIteration(n, RUN(TWELVE_DP THREE_UNARY("vcvtdq2ps")))},
      TWELVE_DP_AND_THREE("vscalefps"),
      TWELVE_DP_AND_THREE("vmulps"),
      TWELVE_DP_AND_THREE("vfmadd231ps"),
      TWELVE_DP_AND_THREE("vpmulld"),
      TWELVE_DP_AND_THREE("vpmullw"),
      TWELVE_DP_AND_THREE("vpermt2d"),
      TWELVE_DP_AND_THREE("vpsadbw"),
      TWELVE_DP_AND_THREE("vpshufb"),
      TWELVE_DP_AND_THREE("vpsllvd"),
      // What the packed Q4_0 prefill tiles add (the nibble split) against a cross-lane shuffle.
      TWELVE_DP_AND_THREE("vpandd"),
      {"12 vpdpbusd + 3 vpsrlw $4", NanosecondsPerIteration(n, RUN(TWELVE_DP THREE_IMM("vpsrlw", 4, "%%zmm20")))},
      {"12 vpdpbusd + 3 vshufi32x4",
       NanosecondsPerIteration(n, RUN(TWELVE_DP THREE_IMM("vshufi32x4", 0x44, "%%zmm20, %%zmm21")))},
      // 512-bit loads: aligned ones issue beside VPDPBUSD; each that crosses a cache line (as a
      // 72-byte q4_0x4 group's 64 bytes of quants nearly always do) takes about 1.2 cycles.
      {"12 vpdpbusd + 8 vmovdqu32 m512, aligned", NanosecondsPerIteration(n, RUN(TWELVE_DP EIGHT_LOADS(0)))},
      {"12 vpdpbusd + 8 vmovdqu32 m512, crossing", NanosecondsPerIteration(n, RUN(TWELVE_DP EIGHT_LOADS(8)))},
      // The prefill loop's mix: per token and 16-row block, 8 VPDPBUSD and a float epilogue whose
      // two multiplies share the VPDPBUSD pipes; 8 VPDPBUSD plus the work named.
      {"8 vpdpbusd", NanosecondsPerIteration(n, RUN(EIGHT_DP))},
      {"8 vpdpbusd + 2 vpaddd", NanosecondsPerIteration(n, RUN(EIGHT_DP TWO("vpaddd")))},
      {"8 vpdpbusd + 2 vmulps", NanosecondsPerIteration(n, RUN(EIGHT_DP TWO("vmulps")))},
      {"8 vpdpbusd + 2 vaddps", NanosecondsPerIteration(n, RUN(EIGHT_DP TWO("vaddps")))},
      // Each broadcast word feeding one VPDPBUSD (a 16-row tile) or two (a 32-row tile).
      {"8 vpdpbusd fed by 8 vpbroadcastd m32",
       NanosecondsPerIteration(n, RUN(BC(8, 0) BC(9, 4) BC(10, 8) BC(11, 12) BC(12, 16) BC(13, 20) BC(14, 24) BC(15, 28)
                                          DP_FROM(0, 8) DP_FROM(1, 9) DP_FROM(2, 10) DP_FROM(3, 11) DP_FROM(4, 12)
                                              DP_FROM(5, 13) DP_FROM(6, 14) DP_FROM(7, 15)))},
      {"8 vpdpbusd fed by 4 vpbroadcastd m32",
       NanosecondsPerIteration(n, RUN(BC(8, 0) BC(9, 4) BC(10, 8) BC(11, 12) DP_FROM(0, 8) DP_FROM(1, 8) DP_FROM(2, 9)
                                          DP_FROM(3, 9) DP_FROM(4, 10) DP_FROM(5, 10) DP_FROM(6, 11) DP_FROM(7, 11)))},
      {"8 vpdpbusd + 8 vpshufd (in-register splat)",
       NanosecondsPerIteration(n, RUN(EIGHT_DP SHUF(8) SHUF(9) SHUF(10) SHUF(8) SHUF(9) SHUF(10) SHUF(8) SHUF(9)))},
  };
  for (const auto& m : mixes) std::printf("%-44s %6.2f cycles\n", m.name, cycles(m.ns));
  return 0;
}
