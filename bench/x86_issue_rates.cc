// How many of the AVX2 Q4_0 kernel's instructions one core issues per second, alone and mixed: the
// ceiling that kernel is measured against in bench/README.md. Standalone (not linked with Kestrel);
// x86-64 with AVX2 only. Each loop runs ten independent instructions per iteration on registers
// (or one cached word), so throughput, not latency, is what it times.
// Usage: kestrel-x86-issue-rates
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

alignas(64) int8_t g_words[64];

template <typename Body>
double PerSecond(int64_t iterations, int64_t per_iteration, Body body) {
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) body();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = static_cast<double>(iterations * per_iteration) / s;
    if (rate > best) best = rate;
  }
  return best;
}

#define TEN(INSN) INSN(0) INSN(1) INSN(2) INSN(3) INSN(4) INSN(5) INSN(6) INSN(7) INSN(8) INSN(9)
#define CLOBBER_YMM0_9 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9"

}  // namespace

int main() {
  const int64_t n = 50'000'000;
  // A chain of dependent scalar adds runs one per cycle: its rate is the clock.
  int64_t x = 0;
  const double clock = PerSecond(n, 8, [&] {
    __asm__ volatile("add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n"
                     "add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n" : "+r"(x));
  });
#define MADDUBS(i) "vpmaddubsw %%ymm15, %%ymm" #i ", %%ymm" #i "\n"
  const double maddubs = PerSecond(n, 10, [] { __asm__ volatile(TEN(MADDUBS) ::: CLOBBER_YMM0_9); });
#define BROADCAST(i) "vpbroadcastd " #i "*4(%0), %%ymm" #i "\n"
  const double broadcast = PerSecond(n, 10, [] { __asm__ volatile(TEN(BROADCAST) :: "r"(g_words) : CLOBBER_YMM0_9); });
  // The kernel's inner step: broadcast an activation word, multiply it with a weight register,
  // add the int16 products into a token's sum (two sums per accumulator register here).
  // ymm10 is the weights; ymm11-ymm14 collect the sums.
  const double step = PerSecond(n, 8, [] {
    __asm__ volatile(
        "vpbroadcastd 0(%0), %%ymm0\n vpmaddubsw %%ymm0, %%ymm10, %%ymm0\n vpaddw %%ymm0, %%ymm11, %%ymm11\n"
        "vpbroadcastd 4(%0), %%ymm1\n vpmaddubsw %%ymm1, %%ymm10, %%ymm1\n vpaddw %%ymm1, %%ymm12, %%ymm12\n"
        "vpbroadcastd 8(%0), %%ymm2\n vpmaddubsw %%ymm2, %%ymm10, %%ymm2\n vpaddw %%ymm2, %%ymm13, %%ymm13\n"
        "vpbroadcastd 12(%0), %%ymm3\n vpmaddubsw %%ymm3, %%ymm10, %%ymm3\n vpaddw %%ymm3, %%ymm14, %%ymm14\n"
        "vpbroadcastd 16(%0), %%ymm4\n vpmaddubsw %%ymm4, %%ymm10, %%ymm4\n vpaddw %%ymm4, %%ymm11, %%ymm11\n"
        "vpbroadcastd 20(%0), %%ymm5\n vpmaddubsw %%ymm5, %%ymm10, %%ymm5\n vpaddw %%ymm5, %%ymm12, %%ymm12\n"
        "vpbroadcastd 24(%0), %%ymm6\n vpmaddubsw %%ymm6, %%ymm10, %%ymm6\n vpaddw %%ymm6, %%ymm13, %%ymm13\n"
        "vpbroadcastd 28(%0), %%ymm7\n vpmaddubsw %%ymm7, %%ymm10, %%ymm7\n vpaddw %%ymm7, %%ymm14, %%ymm14\n"
        :: "r"(g_words) : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm11", "xmm12",
                          "xmm13", "xmm14");
  });
  // One vpmaddubsw on 32 byte pairs is 32 multiply-adds, 64 operations.
  std::printf("clock (dependent adds)              %6.2f GHz\n", clock / 1e9);
  std::printf("vpmaddubsw ymm                      %6.2f G/s  %5.2f per cycle  %4.0f GOPS\n", maddubs / 1e9,
              maddubs / clock, maddubs * 64 / 1e9);
  std::printf("vpbroadcastd ymm, m32               %6.2f G/s  %5.2f per cycle\n", broadcast / 1e9, broadcast / clock);
  std::printf("broadcast + vpmaddubsw + vpaddw     %6.2f G/s  %5.2f per cycle  %4.0f GOPS\n", step / 1e9,
              step / clock, step * 64 / 1e9);
  return 0;
}
