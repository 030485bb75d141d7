// Uniform random floats from a standard engine, in place of std::uniform_real_distribution<float>.
// libstdc++'s distribution (generate_canonical) takes two long double logarithms and a long double
// division on every draw. GCC folds them to constants; clang does not, and on aarch64 long double is
// software quad precision: a million draws took 3.0 s against GCC's 0.05 under qemu, and the
// kernels test's large matrices minutes. Used for synthetic weights and test data.
#pragma once

#include <cstdint>

namespace kestrel {

class UniformFloat {
 public:
  // Values in [lo, hi] (hi itself only where float rounding of lo + (hi - lo) * u reaches it).
  UniformFloat(float lo, float hi) : lo_(lo), width_(hi - lo) {}

  // The engine's top 24 bits scaled to [0, 1): every value on a 2^-24 grid equally likely.
  template <typename Engine>
  float operator()(Engine& rng) const {
    static_assert(Engine::min() == 0, "an engine whose outputs start at 0");
    constexpr int kBits = BitWidth(static_cast<uint64_t>(Engine::max()));
    static_assert(kBits >= 24 && (kBits == 64 || static_cast<uint64_t>(Engine::max()) == (uint64_t{1} << kBits) - 1),
                  "an engine whose outputs fill a whole number of bits, 24 or more");
    const auto top = static_cast<uint32_t>(static_cast<uint64_t>(rng()) >> (kBits - 24));
    return lo_ + width_ * (static_cast<float>(top) * 0x1p-24f);
  }

 private:
  static constexpr int BitWidth(uint64_t v) {
    int bits = 0;
    for (; v != 0; v >>= 1) ++bits;
    return bits;
  }

  float lo_, width_;
};

}  // namespace kestrel
