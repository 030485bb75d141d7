// Element types of VQF tensors: sizes, half-precision conversion and the Q8_0 / Q4_0 block codecs.
// The block layouts match the widely used GGML ones byte for byte, so GGUF files import losslessly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kestrel {

// Values are stored in files: never renumber, only append.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
};
inline constexpr uint32_t kDTypeCount = 5;

inline constexpr int kQuantBlockSize = 32;

// Q8_0: 32 weights share one fp16 scale d; w[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // IEEE fp16 bits
  int8_t qs[kQuantBlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: 32 weights share one fp16 scale d; byte j holds weight j in its low nibble and weight j+16 in
// its high nibble; w = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQuantBlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

const char* DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
bool IsKnownDType(uint32_t raw);
bool IsBlockQuantized(DType t);
// Elements per block (1 for scalar types) and bytes per block.
int DTypeBlockElements(DType t);
size_t DTypeBlockBytes(DType t);
// Bytes of one row of `n` elements; n must be a multiple of the block size (checked by callers).
size_t DTypeRowBytes(DType t, int64_t n);

float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);  // round to nearest even
float Bf16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);  // round to nearest even, NaN kept NaN

// Quantize / dequantize rows. n must be a multiple of 32 for the block types.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* out, int64_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* out, int64_t n);
// Converts one row of any dtype (plain layout) to f32.
void DequantizeRow(DType t, const void* row, float* out, int64_t n);
// Converts one f32 row into dtype t (plain layout). out must hold DTypeRowBytes(t, n).
void EncodeRow(DType t, const float* x, void* out, int64_t n);

}  // namespace kestrel
