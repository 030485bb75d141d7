// Element type helpers and the reference Q8_0 / Q4_0 codecs.
#include "format/dtype.h"

#include <cmath>
#include <cstring>

namespace kestrel {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
  }
  return "unknown";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    if (DTypeName(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

bool IsKnownDType(uint32_t raw) { return raw < kDTypeCount; }

bool IsBlockQuantized(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_0; }

int DTypeBlockElements(DType t) { return IsBlockQuantized(t) ? kQuantBlockSize : 1; }

size_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
  }
  return 0;
}

size_t DTypeRowBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElements(t)) * DTypeBlockBytes(t);
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: overflow to Inf
  if (abs < 0x38800000u) {                      // result is subnormal or zero
    if (abs < 0x33000000u) return sign;         // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1fff;
  r >>= 13;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | static_cast<uint16_t>(r);
}

float Bf16ToFp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t Fp32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlockSize; ++b) {
    const float* v = x + b * kQuantBlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kQuantBlockSize; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int i = 0; i < kQuantBlockSize; ++i) {
      out[b].qs[i] = static_cast<int8_t>(std::lround(v[i] * id));
    }
  }
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlockSize; ++b) {
    const float* v = x + b * kQuantBlockSize;
    // The value of largest magnitude maps to -8 so the full signed range is used.
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kQuantBlockSize; ++i) {
      if (std::fabs(v[i]) > amax) {
        amax = std::fabs(v[i]);
        max = v[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQuantBlockSize / 2; ++j) {
      const auto q = [&](float value) {
        const int r = static_cast<int>(value * id + 8.5f);
        return static_cast<uint8_t>(r < 0 ? 0 : (r > 15 ? 15 : r));
      };
      out[b].qs[j] = q(v[j]) | static_cast<uint8_t>(q(v[j + 16]) << 4);
    }
  }
}

void DequantizeRow(DType t, const void* row, float* out, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, row, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = Fp16ToFp32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFp32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(row);
      for (int64_t b = 0; b < n / kQuantBlockSize; ++b) {
        const float d = Fp16ToFp32(blocks[b].d);
        for (int i = 0; i < kQuantBlockSize; ++i) out[b * kQuantBlockSize + i] = d * blocks[b].qs[i];
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(row);
      for (int64_t b = 0; b < n / kQuantBlockSize; ++b) {
        const float d = Fp16ToFp32(blocks[b].d);
        float* o = out + b * kQuantBlockSize;
        for (int j = 0; j < kQuantBlockSize / 2; ++j) {
          o[j] = d * static_cast<float>((blocks[b].qs[j] & 0x0f) - 8);
          o[j + 16] = d * static_cast<float>((blocks[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
  }
}

void EncodeRow(DType t, const float* x, void* out, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(x[i]);
      return;
    }
    case DType::kBF16: {
      auto* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(x[i]);
      return;
    }
    case DType::kQ8_0:
      QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(out), n);
      return;
    case DType::kQ4_0:
      QuantizeRowQ4_0(x, static_cast<BlockQ4_0*>(out), n);
      return;
  }
}

}  // namespace kestrel
