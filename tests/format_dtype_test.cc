// Tests of the element types: half-precision conversions against the compiler's _Float16, bf16
// rounding, the Q8_0 / Q4_0 codecs' error bounds, and EncodeRow / DequantizeRow round trips.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "format/dtype.h"

namespace kestrel {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The compiler's IEEE binary16 is the reference: _Float16 on x86-64; on AArch64, where GCC 12's
// C++ lacks _Float16, the ARM __fp16 type (IEEE format, round-to-nearest-even conversions).
#if defined(__aarch64__)
#define KESTREL_HAVE_FLOAT16 1
using ReferenceHalf = __fp16;
#elif defined(__FLT16_MAX__)
#define KESTREL_HAVE_FLOAT16 1
using ReferenceHalf = _Float16;
#endif
#if KESTREL_HAVE_FLOAT16
uint16_t ReferenceFp32ToFp16(float f) {
  const ReferenceHalf h = static_cast<ReferenceHalf>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float ReferenceFp16ToFp32(uint16_t bits) {
  ReferenceHalf h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
#else
#define KESTREL_HAVE_FLOAT16 0
#endif

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// Checks Fp32ToFp16(f) against the reference: identical bits, except that any NaN may map to any
// NaN of the same sign.
void CheckFloatToHalf(float f) {
#if KESTREL_HAVE_FLOAT16
  const uint16_t got = Fp32ToFp16(f);
  const uint16_t want = ReferenceFp32ToFp16(f);
  if (std::isnan(f)) {
    INFO("float bits 0x" << std::hex << FloatBits(f) << " got 0x" << got);
    REQUIRE(IsHalfNaN(got));
    REQUIRE((got & 0x8000) == (want & 0x8000));
    return;
  }
  if (got != want) {
    INFO("float " << f << " bits 0x" << std::hex << FloatBits(f) << " got 0x" << got << " want 0x" << want);
    REQUIRE(got == want);
  }
#else
  (void)f;
#endif
}

TEST_CASE("Fp16ToFp32 is exact for all 65536 half values", "[dtype][fp16]") {
#if KESTREL_HAVE_FLOAT16
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = Fp16ToFp32(static_cast<uint16_t>(h));
    const float want = ReferenceFp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
      REQUIRE(std::signbit(got) == std::signbit(want));
      // The payload travels into the top mantissa bits; the compiler also sets the quiet bit.
      REQUIRE((FloatBits(got) | 0x00400000u) == FloatBits(want));
      continue;
    }
    if (FloatBits(got) != FloatBits(want)) {
      INFO("half 0x" << std::hex << h << " got " << got << " want " << want);
      REQUIRE(FloatBits(got) == FloatBits(want));
    }
  }
#else
  WARN("no _Float16 on this compiler: reference comparison skipped");
#endif
}

TEST_CASE("Fp16 round trip: every non-NaN half survives half->float->half", "[dtype][fp16]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if (IsHalfNaN(bits)) {
      REQUIRE(IsHalfNaN(Fp32ToFp16(Fp16ToFp32(bits))));
      continue;
    }
    REQUIRE(Fp32ToFp16(Fp16ToFp32(bits)) == bits);
  }
}

TEST_CASE("Fp32ToFp16 matches _Float16 on special values, ties, subnormals and overflow", "[dtype][fp16]") {
#if !KESTREL_HAVE_FLOAT16
  WARN("no _Float16 on this compiler: reference comparison skipped");
  return;
#endif
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 65504.0f, -65504.0f, 65519.99f, 65520.0f, -65520.0f,
                            65536.0f, 1e10f, -1e10f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(), BitsFloat(0x7f800001u), BitsFloat(0xffc00001u),
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                            6.103515625e-05f /* smallest normal half */, 5.9604645e-08f /* smallest subnormal half */,
                            2.9802322e-08f /* half of it: tie to zero */, 2.9802326e-08f, 8.940697e-08f,
                            6.097555e-05f /* largest subnormal half */, 6.100535e-05f};
  for (float f : specials) CheckFloatToHalf(f);

  // Every half value, its neighbours in float, and the exact midpoints between consecutive halves
  // (ties go to even) with the floats just either side of each midpoint.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const float v = Fp16ToFp32(static_cast<uint16_t>(h | sign));
      CheckFloatToHalf(v);
      CheckFloatToHalf(std::nextafter(v, inf));
      CheckFloatToHalf(std::nextafter(v, -inf));
      const float next = Fp16ToFp32(static_cast<uint16_t>((h + 1) | sign));  // h+1 = 0x7c00 is Inf
      const double mid = (static_cast<double>(v) + static_cast<double>(next)) / 2;
      const auto midf = static_cast<float>(mid);  // exact: a half midpoint needs 12 significant bits
      REQUIRE(static_cast<double>(midf) == mid);
      CheckFloatToHalf(midf);
      CheckFloatToHalf(std::nextafter(midf, inf));
      CheckFloatToHalf(std::nextafter(midf, -inf));
    }
  }

  // Every float exponent, with random mantissas, including float subnormals and NaN payloads.
  std::mt19937 rng(1234);
  for (uint32_t exp = 0; exp < 256; ++exp) {
    for (int i = 0; i < 2000; ++i) {
      const uint32_t bits = (rng() & 0x80000000u) | exp << 23 | (rng() & 0x7fffffu);
      CheckFloatToHalf(BitsFloat(bits));
    }
  }
}

TEST_CASE("Bf16 conversion rounds to nearest even and keeps NaN", "[dtype][bf16]") {
  // Every bf16 value converts to float and back unchanged (NaNs stay NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = Bf16ToFp32(bits);
    REQUIRE(FloatBits(f) == h << 16);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(Bf16ToFp32(Fp32ToBf16(f))));
    } else {
      REQUIRE(Fp32ToBf16(f) == bits);
    }
  }
  // Ties: the low 16 bits exactly 0x8000 round to the even neighbour.
  REQUIRE(Fp32ToBf16(BitsFloat(0x3f808000u)) == 0x3f80);  // tie, 0x3f80 even: down
  REQUIRE(Fp32ToBf16(BitsFloat(0x3f818000u)) == 0x3f82);  // tie, 0x3f81 odd: up
  REQUIRE(Fp32ToBf16(BitsFloat(0x3f808001u)) == 0x3f81);  // above the tie: up
  REQUIRE(Fp32ToBf16(BitsFloat(0x3f807fffu)) == 0x3f80);  // below the tie: down
  REQUIRE(Fp32ToBf16(BitsFloat(0xbf818000u)) == 0xbf82);  // sign does not matter
  // Overflow past the largest bf16 rounds to infinity; Inf stays Inf.
  REQUIRE(Fp32ToBf16(std::numeric_limits<float>::max()) == 0x7f80);
  REQUIRE(Fp32ToBf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  REQUIRE(Fp32ToBf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  // A NaN whose payload lies only in the low 16 bits must not become Inf.
  const uint16_t nan = Fp32ToBf16(BitsFloat(0x7f800001u));
  REQUIRE(std::isnan(Bf16ToFp32(nan)));
  REQUIRE(std::isnan(Bf16ToFp32(Fp32ToBf16(BitsFloat(0xff800001u)))));
  REQUIRE(std::signbit(Bf16ToFp32(Fp32ToBf16(BitsFloat(0xff800001u)))));

  // Random floats: the result is the nearest bf16 (ties to even), checked by its definition.
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float f = BitsFloat(bits);
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint16_t got = Fp32ToBf16(f);
    const double down = Bf16ToFp32(static_cast<uint16_t>(bits >> 16));
    double up = Bf16ToFp32(static_cast<uint16_t>((bits >> 16) + 1));
    // Past the largest bf16, IEEE rounding treats Inf as the value 2^128 one step further on.
    if (std::isinf(up)) up = std::copysign(std::ldexp(1.0, 128), up);
    const double distance_down = std::fabs(static_cast<double>(f) - down);
    const double distance_up = std::fabs(up - static_cast<double>(f));
    uint16_t want;
    if (distance_down < distance_up) want = static_cast<uint16_t>(bits >> 16);
    else if (distance_up < distance_down) want = static_cast<uint16_t>((bits >> 16) + 1);
    else want = static_cast<uint16_t>(((bits >> 16) & 1) ? (bits >> 16) + 1 : bits >> 16);
    if (got != want) {
      INFO("float bits 0x" << std::hex << bits);
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("DType names, sizes and row bytes", "[dtype]") {
  REQUIRE(DTypeBlockBytes(DType::kF32) == 4);
  REQUIRE(DTypeBlockBytes(DType::kF16) == 2);
  REQUIRE(DTypeBlockBytes(DType::kBF16) == 2);
  REQUIRE(DTypeBlockBytes(DType::kQ8_0) == 34);
  REQUIRE(DTypeBlockBytes(DType::kQ4_0) == 18);
  REQUIRE(DTypeRowBytes(DType::kQ8_0, 64) == 68);
  REQUIRE(DTypeRowBytes(DType::kQ4_0, 96) == 54);
  REQUIRE(DTypeRowBytes(DType::kF16, 7) == 14);
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    REQUIRE(IsKnownDType(i));
    const auto t = static_cast<DType>(i);
    REQUIRE(DTypeFromName(DTypeName(t)) == t);
  }
  REQUIRE_FALSE(IsKnownDType(kDTypeCount));
  REQUIRE_FALSE(DTypeFromName("q4_1").has_value());
  // The numbering is stored in files and must never change.
  REQUIRE(static_cast<uint32_t>(DType::kQ8_0) == 3);
  REQUIRE(static_cast<uint32_t>(DType::kQ4_0) == 4);
}

std::vector<float> RandomRow(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST_CASE("Q8_0 quantization error is at most half a step", "[dtype][q8_0]") {
  std::mt19937 rng(7);
  for (float scale : {1e-3f, 0.02f, 1.0f, 300.0f}) {
    for (int64_t n : {32, 64, 256}) {
      std::vector<float> x = RandomRow(rng, n, scale);
      if (n == 64) x[5] = -40.0f * scale;  // a dominant negative value
      std::vector<BlockQ8_0> q(static_cast<size_t>(n / 32));
      QuantizeRowQ8_0(x.data(), q.data(), n);
      std::vector<float> y(static_cast<size_t>(n));
      DequantizeRow(DType::kQ8_0, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
        const float d = amax / 127.0f;
        const float d16 = Fp16ToFp32(q[b].d);
        REQUIRE(d16 == Fp16ToFp32(Fp32ToFp16(d)));
        // Rounding to the nearest step costs d/2; the fp16 scale adds at most 127 * |d - d16|.
        const float bound = d / 2 + 127.0f * std::fabs(d - d16) + 1e-6f * amax;
        for (int i = 0; i < 32; ++i) {
          const float err = std::fabs(x[b * 32 + i] - y[b * 32 + i]);
          INFO("scale " << scale << " n " << n << " block " << b << " i " << i);
          REQUIRE(err <= bound);
          REQUIRE(std::abs(static_cast<int>(q[b].qs[i])) <= 127);
        }
      }
    }
  }
}

TEST_CASE("Q4_0 quantization error is at most one step", "[dtype][q4_0]") {
  std::mt19937 rng(8);
  for (float scale : {1e-3f, 0.02f, 1.0f, 300.0f}) {
    for (int64_t n : {32, 64, 256}) {
      std::vector<float> x = RandomRow(rng, n, scale);
      if (n == 64) x[40] = 25.0f * scale;  // a dominant positive value: d becomes negative
      std::vector<BlockQ4_0> q(static_cast<size_t>(n / 32));
      QuantizeRowQ4_0(x.data(), q.data(), n);
      std::vector<float> y(static_cast<size_t>(n));
      DequantizeRow(DType::kQ4_0, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < 32; ++i) {
          if (std::fabs(x[b * 32 + i]) > amax) {
            amax = std::fabs(x[b * 32 + i]);
            max = x[b * 32 + i];
          }
        }
        const float d = std::fabs(max / 8.0f);
        const float d16 = std::fabs(Fp16ToFp32(q[b].d));
        const float bound = d + 8.0f * std::fabs(d - d16) + 1e-6f * amax;
        for (int i = 0; i < 32; ++i) {
          const float err = std::fabs(x[b * 32 + i] - y[b * 32 + i]);
          INFO("scale " << scale << " n " << n << " block " << b << " i " << i);
          REQUIRE(err <= bound);
        }
      }
    }
  }
}

TEST_CASE("Q4_0 byte layout: low nibble is weight j, high nibble is weight j+16", "[dtype][q4_0]") {
  // Values chosen so each weight is an exact step: d = -1 (the largest magnitude is 8 -> nibble 0).
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i % 16) - 7);  // -7..8
  BlockQ4_0 q;
  QuantizeRowQ4_0(x, &q, 32);
  REQUIRE(Fp16ToFp32(q.d) == -1.0f);
  for (int j = 0; j < 16; ++j) {
    const int low = q.qs[j] & 0x0f, high = q.qs[j] >> 4;
    REQUIRE(static_cast<float>(low - 8) * -1.0f == x[j]);
    REQUIRE(static_cast<float>(high - 8) * -1.0f == x[j + 16]);
  }
  float y[32];
  DequantizeRow(DType::kQ4_0, &q, y, 32);
  for (int i = 0; i < 32; ++i) REQUIRE(y[i] == x[i]);

  // A hand-made block decodes by the documented formula (nibble - 8) * d.
  BlockQ4_0 h;
  h.d = Fp32ToFp16(0.5f);
  for (int j = 0; j < 16; ++j) h.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  DequantizeRow(DType::kQ4_0, &h, y, 32);
  for (int j = 0; j < 16; ++j) {
    REQUIRE(y[j] == (j - 8) * 0.5f);
    REQUIRE(y[j + 16] == ((15 - j) - 8) * 0.5f);
  }
}

TEST_CASE("Q8_0 byte layout: fp16 scale then 32 int8", "[dtype][q8_0]") {
  uint8_t raw[34];
  const uint16_t d = Fp32ToFp16(0.25f);
  std::memcpy(raw, &d, 2);
  for (int i = 0; i < 32; ++i) raw[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i * 8 - 128));
  float y[32];
  DequantizeRow(DType::kQ8_0, raw, y, 32);
  for (int i = 0; i < 32; ++i) REQUIRE(y[i] == static_cast<float>(i * 8 - 128) * 0.25f);
}

TEST_CASE("Zero blocks quantize to zero scale and decode to zeros", "[dtype][q8_0][q4_0]") {
  const std::vector<float> zeros(64, 0.0f);
  std::vector<BlockQ8_0> q8(2);
  std::vector<BlockQ4_0> q4(2);
  QuantizeRowQ8_0(zeros.data(), q8.data(), 64);
  QuantizeRowQ4_0(zeros.data(), q4.data(), 64);
  std::vector<float> y(64, 1.0f);
  DequantizeRow(DType::kQ8_0, q8.data(), y.data(), 64);
  for (float v : y) REQUIRE(v == 0.0f);
  for (const auto& b : q8) {
    REQUIRE(Fp16ToFp32(b.d) == 0.0f);
    for (int8_t v : b.qs) REQUIRE(v == 0);
  }
  std::fill(y.begin(), y.end(), 1.0f);
  DequantizeRow(DType::kQ4_0, q4.data(), y.data(), 64);
  for (float v : y) REQUIRE(v == 0.0f);
  for (const auto& b : q4) REQUIRE(Fp16ToFp32(b.d) == 0.0f);

  // A zero block next to a non-zero one: each block has its own scale.
  std::vector<float> mixed(64, 0.0f);
  for (int i = 32; i < 64; ++i) mixed[i] = static_cast<float>(i - 48);
  QuantizeRowQ8_0(mixed.data(), q8.data(), 64);
  DequantizeRow(DType::kQ8_0, q8.data(), y.data(), 64);
  for (int i = 0; i < 32; ++i) REQUIRE(y[i] == 0.0f);
  REQUIRE(Fp16ToFp32(q8[1].d) != 0.0f);
}

TEST_CASE("EncodeRow / DequantizeRow round trips", "[dtype]") {
  std::mt19937 rng(5);
  const int64_t n = 96;
  std::vector<float> x = RandomRow(rng, n, 3.0f);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = 1e-7f;  // a half subnormal
  x[3] = 70000.0f;  // overflows half
  x[4] = std::numeric_limits<float>::infinity();
  std::vector<float> y(static_cast<size_t>(n));

  SECTION("f32 is bit-exact") {
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[6] = std::numeric_limits<float>::denorm_min();
    std::vector<uint8_t> enc(DTypeRowBytes(DType::kF32, n));
    EncodeRow(DType::kF32, x.data(), enc.data(), n);
    DequantizeRow(DType::kF32, enc.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(FloatBits(x[i]) == FloatBits(y[i]));
  }
  SECTION("f16 equals one rounding and is stable") {
    std::vector<uint8_t> enc(DTypeRowBytes(DType::kF16, n));
    REQUIRE(enc.size() == static_cast<size_t>(n) * 2);
    EncodeRow(DType::kF16, x.data(), enc.data(), n);
    DequantizeRow(DType::kF16, enc.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(FloatBits(y[i]) == FloatBits(Fp16ToFp32(Fp32ToFp16(x[i]))));
#if KESTREL_HAVE_FLOAT16
      REQUIRE(FloatBits(y[i]) == FloatBits(static_cast<float>(static_cast<ReferenceHalf>(x[i]))));
#endif
    }
    REQUIRE(std::isinf(y[3]));
    // Encoding the decoded row again changes nothing.
    std::vector<uint8_t> again(enc.size());
    EncodeRow(DType::kF16, y.data(), again.data(), n);
    REQUIRE(again == enc);
  }
  SECTION("bf16 equals one rounding and is stable") {
    std::vector<uint8_t> enc(DTypeRowBytes(DType::kBF16, n));
    EncodeRow(DType::kBF16, x.data(), enc.data(), n);
    DequantizeRow(DType::kBF16, enc.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(FloatBits(y[i]) == FloatBits(Bf16ToFp32(Fp32ToBf16(x[i]))));
      if (std::isfinite(x[i]) && x[i] != 0.0f) REQUIRE(std::fabs(y[i] - x[i]) <= std::fabs(x[i]) * (1.0f / 256));
    }
    std::vector<uint8_t> again(enc.size());
    EncodeRow(DType::kBF16, y.data(), again.data(), n);
    REQUIRE(again == enc);
  }
  SECTION("q8_0 and q4_0 through EncodeRow match the block quantizers") {
    x[3] = 7.0f;
    x[4] = -2.0f;
    std::vector<uint8_t> enc8(DTypeRowBytes(DType::kQ8_0, n)), enc4(DTypeRowBytes(DType::kQ4_0, n));
    std::vector<BlockQ8_0> q8(static_cast<size_t>(n / 32));
    std::vector<BlockQ4_0> q4(static_cast<size_t>(n / 32));
    EncodeRow(DType::kQ8_0, x.data(), enc8.data(), n);
    EncodeRow(DType::kQ4_0, x.data(), enc4.data(), n);
    QuantizeRowQ8_0(x.data(), q8.data(), n);
    QuantizeRowQ4_0(x.data(), q4.data(), n);
    REQUIRE(std::memcmp(enc8.data(), q8.data(), enc8.size()) == 0);
    REQUIRE(std::memcmp(enc4.data(), q4.data(), enc4.size()) == 0);
    // Quantizing a dequantized q8_0 row reproduces it (the grid is a fixed point).
    DequantizeRow(DType::kQ8_0, enc8.data(), y.data(), n);
    std::vector<uint8_t> again(enc8.size());
    EncodeRow(DType::kQ8_0, y.data(), again.data(), n);
    std::vector<float> y2(static_cast<size_t>(n));
    DequantizeRow(DType::kQ8_0, again.data(), y2.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(std::fabs(y2[i] - y[i]) <= 1e-3f * std::fabs(y[i]) + 1e-6f);
  }
}

}  // namespace
}  // namespace kestrel
