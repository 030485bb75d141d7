// The constants of the vectorized exp that the AVX2 and AVX-512 kernels share (each unit applies
// them with its own vectors): x = n * ln2 + r with n = round(x * log2(e)), r taken in two parts so
// that n * ln2 loses no bits, then e^r = 1 + r + r^2 * P(r) with P of degree 5, within 2 ulp of
// expf. Constants only, with internal linkage (not `inline`): nothing a unit compiled with ISA flags
// could share with other units.
#pragma once

namespace kestrel::exp_polynomial {

constexpr float kLog2E = 1.44269504088896341f;
constexpr float kLn2High = 0.693359375f;    // exact in a few bits, so n * kLn2High is exact
constexpr float kLn2Low = -2.12194440e-4f;  // ln2 - kLn2High
// P(r), highest degree first.
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace kestrel::exp_polynomial
