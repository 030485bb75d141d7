// UniformFloat (platform/uniform_float.h), which draws the synthetic models' weights and the tests'
// random data: the engine's top 24 bits map onto [lo, hi) exactly, the draws cover the range
// evenly, and 32- and 64-bit engines both work.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "platform/uniform_float.h"

namespace kestrel {
namespace {

// An engine that returns one fixed value, to pin the mapping down.
template <typename T>
struct FixedEngine {
  using result_type = T;
  static constexpr T min() { return 0; }
  static constexpr T max() { return ~T{0}; }
  T value;
  T operator()() { return value; }
};

TEST_CASE("UniformFloat maps the engine's top 24 bits onto [lo, hi)", "[uniform_float]") {
  const UniformFloat unit(0.0f, 1.0f);
  FixedEngine<uint32_t> zero{0}, half{0x80000000u}, top{0xFFFFFFFFu}, low_bits{0x000000FFu};
  CHECK(unit(zero) == 0.0f);
  CHECK(unit(half) == 0.5f);
  CHECK(unit(top) == 1.0f - 0x1p-24f);
  CHECK(unit(low_bits) == 0.0f);  // bits below the top 24 are dropped
  FixedEngine<uint64_t> half64{uint64_t{1} << 63}, step64{uint64_t{1} << 40};
  CHECK(unit(half64) == 0.5f);
  CHECK(unit(step64) == 0x1p-24f);
  const UniformFloat wide(-2.0f, 2.0f);
  CHECK(wide(zero) == -2.0f);
  CHECK(wide(half) == 0.0f);
  CHECK(wide(top) == 2.0f - 0x1p-22f);
}

template <typename Engine>
void CheckEvenCoverage(Engine rng) {
  constexpr int kDraws = 100000, kBins = 10;
  const float lo = -2.0f, hi = 3.0f;
  const UniformFloat dist(lo, hi);
  std::vector<int> bins(kBins, 0);
  std::set<float> distinct;
  double sum = 0;
  float smallest = hi, largest = lo;
  for (int i = 0; i < kDraws; ++i) {
    const float v = dist(rng);
    REQUIRE(v >= lo);
    REQUIRE(v < hi);
    smallest = std::min(smallest, v);
    largest = std::max(largest, v);
    sum += v;
    distinct.insert(v);
    ++bins[std::min<size_t>(kBins - 1, static_cast<size_t>((v - lo) / (hi - lo) * kBins))];
  }
  // Each bin expects 10000 draws (standard deviation ~95); the mean 0.5 (~0.005).
  for (int count : bins) CHECK(std::abs(count - kDraws / kBins) < 600);
  CHECK(std::abs(sum / kDraws - 0.5) < 0.03);
  CHECK(smallest < lo + 0.001f);
  CHECK(largest > hi - 0.001f);
  // On a 2^-24 grid 100000 draws collide a few hundred times at most.
  CHECK(distinct.size() > 99000);
}

TEST_CASE("UniformFloat covers its range evenly from 32- and 64-bit engines", "[uniform_float]") {
  SECTION("mt19937") { CheckEvenCoverage(std::mt19937(5)); }
  SECTION("mt19937_64") { CheckEvenCoverage(std::mt19937_64(5)); }
}

}  // namespace
}  // namespace kestrel
