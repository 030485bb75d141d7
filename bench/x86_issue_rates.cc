// How many of the AVX2 Q4_0 kernel's instructions one core issues per second, alone and mixed: the
// ceiling that kernel is measured against in bench/README.md. Standalone (not linked with Kestrel);
// x86-64 with AVX2 only. Each loop runs ten independent instructions per iteration on registers
// (or one cached word), so throughput, not latency, is what it times. Then the kernel's block loop,
// whole and with one part taken out at a time, to show what each part costs.
// Usage: kestrel-x86-issue-rates
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

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

// The 8-row block loop of the AVX2 Q4_0 kernel (Q4Tile in src/backend_x86/avx2_kernels.cc, 4
// tokens against one 8-row q4_0x4 block), rewritten here with switches. Prefill ran it until this
// ablation led to the 16-row Q4WideTile; it still runs token tails and plain rows. A copy, so that
// the library's kernel carries no experiment. Without kEpilogue the int16 sums go straight into integer
// accumulators (no widening, offset, scales or float accumulation); without kUnpack the packed
// bytes serve as both nibble registers; without kBroadcast each activation word is read already
// broadcast from a buffer in L1 (what the kernel would save if the 8 broadcasts per token were free,
// at 8x the activation bytes). Each variant still depends on every activation, so the compiler
// cannot share products between tokens.
enum Part : unsigned { kEpilogue = 1, kUnpack = 2, kBroadcast = 4, kAll = 7 };
constexpr int kTokens = 4;
constexpr int64_t kBlocks = 16;  // 2.3 KB of weights, 0.5 KB of activations, 16 KB pre-broadcast

struct BlockLoopData {
  std::vector<uint8_t> weights = std::vector<uint8_t>(kBlocks * 144);  // two 4-row tiles per block
  std::vector<int8_t> quants = std::vector<int8_t>(kTokens * kBlocks * 32);
  std::vector<int32_t> broadcast = std::vector<int32_t>(kTokens * kBlocks * 8 * 8);  // 8 lanes per word
  std::vector<int32_t> offsets = std::vector<int32_t>(kTokens * kBlocks, 8);
  std::vector<float> scales = std::vector<float>(kTokens * kBlocks, 0.01f);
  BlockLoopData() {
    uint32_t seed = 12345;
    auto next = [&seed] { return seed = seed * 1664525u + 1013904223u, static_cast<uint8_t>(seed >> 24); };
    for (uint8_t& w : weights) w = next();
    for (int64_t b = 0; b < kBlocks; ++b) {  // each tile starts with four f16 scales of 1.0
      for (int tile = 0; tile < 2; ++tile) {
        for (int i = 0; i < 4; ++i) weights[b * 144 + tile * 72 + 2 * i] = 0x00, weights[b * 144 + tile * 72 + 2 * i + 1] = 0x3c;
      }
    }
    for (int8_t& q : quants) q = static_cast<int8_t>(next() % 255 - 127);
    for (int64_t w = 0; w < kTokens * kBlocks * 8; ++w) {
      for (int lane = 0; lane < 8; ++lane) std::memcpy(&broadcast[w * 8 + lane], &quants[w * 4], 4);
    }
  }
};

template <unsigned kParts>
__attribute__((noinline)) void BlockLoop(const BlockLoopData& d, __m256* acc_out, __m256i* sums_out) {
  const __m256i nibble = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
  __m256 acc[kTokens];
  __m256i sums[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = acc_out[t], sums[t] = sums_out[t];
  for (int64_t b = 0; b < kBlocks; ++b) {
    const uint8_t* ga = d.weights.data() + b * 144;
    const uint8_t* gb = ga + 72;
    const __m128i packed_scales = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ga)),
                                                     _mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb)));
    __m256i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i chunk = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(gb + 8 + k * 16),
                                                reinterpret_cast<const __m128i*>(ga + 8 + k * 16));
      lo[k] = (kParts & kUnpack) ? _mm256_and_si256(chunk, nibble) : chunk;
      hi[k] = (kParts & kUnpack) ? _mm256_and_si256(_mm256_srli_epi16(chunk, 4), nibble) : chunk;
    }
    const __m256 w_scale = _mm256_cvtph_ps(packed_scales);
    for (int t = 0; t < kTokens; ++t) {
      const int64_t block = t * kBlocks + b;
      const int8_t* q = d.quants.data() + block * 32;
      auto word = [&](int i) {  // activation word i of this token's block, in all 8 lanes
        if constexpr ((kParts & kBroadcast) != 0) {
          int32_t v;
          std::memcpy(&v, q + 4 * i, 4);
          return _mm256_set1_epi32(v);
        } else {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&d.broadcast[(block * 8 + i) * 8]));
        }
      };
      __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], word(0)), _mm256_maddubs_epi16(hi[0], word(4)));
      for (int k = 1; k < 4; ++k) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo[k], word(k)));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[k], word(4 + k)));
      }
      if constexpr ((kParts & kEpilogue) != 0) {
        const __m256i s32 = _mm256_sub_epi32(_mm256_madd_epi16(s16, ones16), _mm256_set1_epi32(d.offsets[block]));
        const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(d.scales[block]));
        acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s32), scale));
      } else {
        sums[t] = _mm256_add_epi16(sums[t], s16);
      }
    }
  }
  for (int t = 0; t < kTokens; ++t) acc_out[t] = acc[t], sums_out[t] = sums[t];
}

// Cycles per block iteration (8 rows x 32 columns x 4 tokens: 1024 multiply-adds), best of 3.
template <unsigned kParts>
double BlockLoopCycles(const BlockLoopData& d, double clock) {
  __m256 acc[kTokens] = {};
  __m256i sums[kTokens] = {};
  const int64_t calls = 400'000;
  const double per_second = PerSecond(calls, kBlocks, [&] { BlockLoop<kParts>(d, acc, sums); });
  float sink = 0.0f;  // keeps the results observable
  for (int t = 0; t < kTokens; ++t) sink += acc[t][0] + static_cast<float>(_mm256_extract_epi32(sums[t], 0));
  if (sink == 1.0f) std::printf(" ");
  return clock / per_second;
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
  // vpmaddubsw paired one to one with another vector instruction (six independent chains of each):
  // how many of the two this core issues together, which bounds a loop that mixes them.
#define PAIRED(i, j, OTHER) "vpmaddubsw %%ymm15, %%ymm" #i ", %%ymm" #i "\n" OTHER(j)
#define SIX_PAIRS(OTHER) PAIRED(0, 6, OTHER) PAIRED(1, 7, OTHER) PAIRED(2, 8, OTHER) PAIRED(3, 9, OTHER) \
  PAIRED(4, 10, OTHER) PAIRED(5, 11, OTHER)
#define WITH_PADDW(j) "vpaddw %%ymm14, %%ymm" #j ", %%ymm" #j "\n"
#define WITH_PAND(j) "vpand %%ymm14, %%ymm" #j ", %%ymm" #j "\n"
#define WITH_ADDPS(j) "vaddps %%ymm14, %%ymm" #j ", %%ymm" #j "\n"
#define WITH_PMADDWD(j) "vpmaddwd %%ymm14, %%ymm" #j ", %%ymm" #j "\n"
#define CLOBBER_YMM0_11 CLOBBER_YMM0_9, "xmm10", "xmm11"
  const struct {
    const char* name;
    double rate;
  } paired[] = {
      {"vpaddw", PerSecond(n / 2, 6, [] { __asm__ volatile(SIX_PAIRS(WITH_PADDW) ::: CLOBBER_YMM0_11); })},
      {"vpand", PerSecond(n / 2, 6, [] { __asm__ volatile(SIX_PAIRS(WITH_PAND) ::: CLOBBER_YMM0_11); })},
      {"vaddps", PerSecond(n / 2, 6, [] { __asm__ volatile(SIX_PAIRS(WITH_ADDPS) ::: CLOBBER_YMM0_11); })},
      {"vpmaddwd", PerSecond(n / 2, 6, [] { __asm__ volatile(SIX_PAIRS(WITH_PMADDWD) ::: CLOBBER_YMM0_11); })},
  };
  // One vpmaddubsw on 32 byte pairs is 32 multiply-adds, 64 operations.
  std::printf("clock (dependent adds)              %6.2f GHz\n", clock / 1e9);
  std::printf("vpmaddubsw ymm                      %6.2f G/s  %5.2f per cycle  %4.0f GOPS\n", maddubs / 1e9,
              maddubs / clock, maddubs * 64 / 1e9);
  std::printf("vpbroadcastd ymm, m32               %6.2f G/s  %5.2f per cycle\n", broadcast / 1e9, broadcast / clock);
  std::printf("broadcast + vpmaddubsw + vpaddw     %6.2f G/s  %5.2f per cycle  %4.0f GOPS\n", step / 1e9,
              step / clock, step * 64 / 1e9);
  for (const auto& p : paired) {
    std::printf("vpmaddubsw + %-9s (one to one)    %5.2f pairs per cycle (%.1f instructions)\n", p.name, p.rate / clock,
                2 * p.rate / clock);
  }
  const BlockLoopData data;
  const double whole = BlockLoopCycles<kAll>(data, clock);
  std::printf("Q4_0 8-row loop, 4 tokens x 8 rows    %6.1f cycles per block  %4.0f GOPS\n", whole, 2048 * clock / whole / 1e9);
  const struct {
    const char* name;
    double cycles;
  } parts[] = {{"without the float epilogue", BlockLoopCycles<kAll & ~kEpilogue>(data, clock)},
               {"without the nibble unpacking", BlockLoopCycles<kAll & ~kUnpack>(data, clock)},
               {"without the broadcasts (L1 buffer)", BlockLoopCycles<kAll & ~kBroadcast>(data, clock)},
               {"products and int16 sums only", BlockLoopCycles<kAll & ~kEpilogue & ~kUnpack & ~kBroadcast>(data, clock)}};
  for (const auto& p : parts) std::printf("  %-35s %6.1f cycles (%+.1f)\n", p.name, p.cycles, p.cycles - whole);
  return 0;
}
