// The generic backend: plain, portable C++ that defines every kernel's exact semantics.
// Every other backend is tested against these functions.
#include <cmath>
#include <cstring>

#include "backend/registry.h"
#include "format/layout.h"

namespace kestrel::generic {
namespace {

void quantize_q8_0__ref(const float* x, BlockQ8_0* out, int64_t n) { QuantizeRowQ8_0(x, out, n); }

// Integer dot product of one weight block with one activation block.
inline int32_t DotBlock(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int i = 0; i < kQuantBlockSize; ++i) sum += int32_t{w.qs[i]} * int32_t{a.qs[i]};
  return sum;
}

inline int32_t DotBlock(const BlockQ4_0& w, const BlockQ8_0& a) {
  int32_t sum = 0;
  for (int j = 0; j < kQuantBlockSize / 2; ++j) {
    sum += ((w.qs[j] & 0x0f) - 8) * int32_t{a.qs[j]};
    sum += ((w.qs[j] >> 4) - 8) * int32_t{a.qs[j + 16]};
  }
  return sum;
}

// Fetches block b of row r from a matrix in any layout into a plain block.
template <typename Block>
inline Block LoadBlock(const MatrixView& w, int64_t r, int64_t b) {
  const int64_t blocks_per_row = w.columns / kQuantBlockSize;
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  Block block;
  if (w.layout == Layout::kPlain) {
    std::memcpy(&block, bytes + (r * blocks_per_row + b) * sizeof(Block), sizeof(Block));
    return block;
  }
  const int tile_rows = LayoutTileRows(w.layout);
  const int chunk = LayoutChunkBytes(w.layout);
  const int in_tile = static_cast<int>(r % tile_rows);
  const TiledGroup group = TiledGroupAt(w.layout, w.columns, r / tile_rows, b);
  std::memcpy(&block.d, bytes + group.scales + 2 * in_tile, 2);
  const uint8_t* quants = bytes + group.quants;
  auto* out = reinterpret_cast<uint8_t*>(&block.qs);
  for (size_t k = 0; k < sizeof(block.qs) / chunk; ++k) {
    std::memcpy(out + k * chunk, quants + (k * tile_rows + in_tile) * chunk, chunk);
  }
  return block;
}

template <typename Block>
void MatmulQuantized(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const int64_t blocks = w.columns / kQuantBlockSize;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const BlockQ8_0* a = x.q8_0 + t * blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const Block wb = LoadBlock<Block>(w, r, b);
        const float scale = Fp16ToFp32(wb.d) * Fp16ToFp32(a[b].d);
        acc += static_cast<float>(DotBlock(wb, a[b])) * scale;
      }
      y[t * y_stride + r] = acc;
    }
  }
}

template <typename Decode>
void MatmulFloat(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end, size_t element_bytes, Decode decode) {
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = bytes + r * w.columns * static_cast<int64_t>(element_bytes);
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const float* a = x.f32 + t * x.columns;
      float acc = 0.0f;
      for (int64_t c = 0; c < w.columns; ++c) acc += decode(row, c) * a[c];
      y[t * y_stride + r] = acc;
    }
  }
}

void matmul__ref(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end) {
  switch (w.dtype) {
    case DType::kQ8_0: return MatmulQuantized<BlockQ8_0>(w, x, y, y_stride, row_begin, row_end);
    case DType::kQ4_0: return MatmulQuantized<BlockQ4_0>(w, x, y, y_stride, row_begin, row_end);
    case DType::kF32:
      return MatmulFloat(w, x, y, y_stride, row_begin, row_end, 4, [](const uint8_t* row, int64_t c) {
        float v;
        std::memcpy(&v, row + c * 4, 4);
        return v;
      });
    case DType::kF16:
      return MatmulFloat(w, x, y, y_stride, row_begin, row_end, 2, [](const uint8_t* row, int64_t c) {
        uint16_t h;
        std::memcpy(&h, row + c * 2, 2);
        return Fp16ToFp32(h);
      });
    case DType::kBF16:
      return MatmulFloat(w, x, y, y_stride, row_begin, row_end, 2, [](const uint8_t* row, int64_t c) {
        uint16_t h;
        std::memcpy(&h, row + c * 2, 2);
        return Bf16ToFp32(h);
      });
  }
}

void rmsnorm__ref(const float* x, const float* weight, float* out, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

void rope__ref(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos[i], s = sin[i];
      const int64_t a = style == RopeStyle::kInterleaved ? 2 * i : i;
      const int64_t b = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * c - v1 * s;
      v[b] = v0 * s + v1 * c;
    }
  }
}

void softmax__ref(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

void silu_mul__ref(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

inline float LoadKv(const void* base, DType dtype, int64_t index) {
  if (dtype == DType::kF16) return Fp16ToFp32(static_cast<const uint16_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

void attention__ref(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
                    int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out,
                    bool /*streamed*/) {
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* qh = q + h * head_dim;
    float* oh = out + h * head_dim;
    float* sh = scores + h * n_positions;
    for (int64_t t = 0; t < n_positions; ++t) {
      float dot = 0.0f;
      for (int64_t i = 0; i < head_dim; ++i) dot += qh[i] * LoadKv(k, kv_dtype, t * kv_stride + i);
      sh[t] = dot / score_divisor;
    }
    softmax__ref(sh, n_positions);
    for (int64_t i = 0; i < head_dim; ++i) oh[i] = 0.0f;
    for (int64_t t = 0; t < n_positions; ++t) {
      const float p = sh[t];
      for (int64_t i = 0; i < head_dim; ++i) oh[i] += p * LoadKv(v, kv_dtype, t * kv_stride + i);
    }
  }
}

void embedding_row__ref(const MatrixView& w, int64_t row, float* out) {
  DequantizeMatrixRow(w.dtype, w.layout, w.data, w.columns, row, out);
}

bool AlwaysSupported() { return true; }
bool AcceptsEverything(DType, Layout) { return true; }

void f32_to_f16__ref(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}

constexpr KernelTable kKernels = {
    quantize_q8_0__ref,
    matmul__ref,
    rmsnorm__ref,
    rope__ref,
    softmax__ref,
    silu_mul__ref,
    attention__ref,
    /*attention_tokens=*/nullptr,
    embedding_row__ref,
    f32_to_f16__ref,
};
constexpr Backend kBackend = {"generic", 0, AlwaysSupported, AcceptsEverything, &kKernels, false};

}  // namespace

const Backend& GetBackend() { return kBackend; }

}  // namespace kestrel::generic
