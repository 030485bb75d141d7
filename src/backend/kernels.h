// The kernel table every backend fills. The decoder calls kernels only through this table, so it
// never knows which ISA runs; backends compute and never parse files.
// ISA-specific files include only this header (and intrinsics): it pulls in no inline library
// code, which the linker could otherwise keep in its ISA-compiled copy (a SIGILL on older CPUs).
#pragma once

#include <cstdint>

#include "format/dtype.h"
#include "format/layout_types.h"
#include "format/model_types.h"

namespace kestrel {

// A weight matrix as stored: `rows` output features of `columns` inputs each.
struct MatrixView {
  DType dtype = DType::kF32;
  Layout layout = Layout::kPlain;
  const void* data = nullptr;
  int64_t columns = 0;
  int64_t rows = 0;
};

// Activations for one product: n_tokens rows of `columns` f32 values (stride `columns`), and, when
// the weights are block-quantized, the same rows quantized to Q8_0 (columns / 32 blocks per row)
// with, per block, the sum of its quants and its scale as f32 (SummarizeQ8_0Blocks), all three
// required together: kernels read whichever they need.
struct Activations {
  const float* f32 = nullptr;
  const BlockQ8_0* q8_0 = nullptr;
  int64_t n_tokens = 0;
  int64_t columns = 0;
  const int32_t* q8_0_sums = nullptr;
  const float* q8_0_scales = nullptr;
  // Optional (nullptr: a kernel works them out from q8_0_sums itself): -8 * q8_0_sums, Q4_0's
  // zero-point corrections, in runs of q4_0_offset_run blocks as FillQ4_0Offsets lays them out
  // (backend/q8_0_summary.h) for these n_tokens tokens. A kernel reads them only where that run
  // is the one it asked for (KernelTable::q4_0_offset_run).
  const int32_t* q4_0_offsets = nullptr;
  int64_t q4_0_offset_run = 0;
  // Optional (nullptr: a kernel that wants them rounds f32 itself): f32 rounded to bf16 by
  // KernelTable::f32_to_bf16_tile, in tiles of 16 tokens by one 32-column block: the tile of
  // tokens 16T .. 16T + 15 and block b starts at bf16 + T * kBf16TileElements + b *
  // bf16_block_stride and holds, at [32 p + 2 n] and [32 p + 2 n + 1], elements 2p and 2p + 1 of
  // the block for token n (AMX's order for TDPBF16PS's B operand); tokens past n_tokens are zero.
  // A product that takes that path (TakesBf16Path) reads them and not q8_0: where every quantized
  // product of the model does, the session quantizes only the last row (the one a later product
  // may take alone, through the integer kernels).
  const uint16_t* bf16 = nullptr;
  int64_t bf16_block_stride = 0;
};

// Elements in one Activations::bf16 tile: 16 tokens x 32 columns.
inline constexpr int64_t kBf16TileElements = 16 * 32;

struct KernelTable {
  // Quantizes n values (a multiple of 32) to Q8_0 blocks, as QuantizeRowQ8_0 does.
  void (*quantize_q8_0)(const float* x, BlockQ8_0* out, int64_t n);
  // y[t * y_stride + r] = dot(W row r, x row t) for r in [row_begin, row_end) and every token t.
  // Quantized weights use x.q8_0 with integer block dot products: per block,
  // sum_i(w_i * a_i) in int32, then acc += float(sum) * (d_w * d_a), blocks in ascending order.
  // Float weights use x.f32, accumulating in f32 in ascending column order.
  // row_begin and row_end must be multiples of the layout's tile rows (or equal `rows`).
  void (*matmul)(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin,
                 int64_t row_end);
  // out = x / sqrt(mean(x^2) + eps) * weight (out may alias x).
  void (*rmsnorm)(const float* x, const float* weight, float* out, int64_t n, float eps);
  // Rotates n_heads heads of head_dim values by the position's angles: cos and sin hold head_dim/2
  // values each (RopeAngles, backend/rope_angles.h). Pair i of a head (x_a, x_b) becomes
  // (x_a * cos[i] - x_b * sin[i], x_a * sin[i] + x_b * cos[i]), each product rounded (no FMA).
  void (*rope)(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, RopeStyle style);
  // In-place softmax over n values (max-subtracted; each exp divided by the sum).
  void (*softmax)(float* x, int64_t n);
  // gate[i] = silu(gate[i]) * up[i].
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // The n_heads query heads that share one key/value head (grouped-query attention; 1 without
  // grouping), over cached positions 0..n_positions-1. For each head h, with q_h = q + h * head_dim
  // and out_h = out + h * head_dim: scores = q_h . k_t / score_divisor (sqrt(head_dim)); softmax;
  // out_h = sum_t p_t v_t. Taking the group at once lets a kernel read each key and value row from
  // memory once for all its heads. k and v rows are `kv_stride` elements apart, stored as f32 or
  // f16 (kv_dtype); scores has room for n_heads * n_positions floats. `streamed`: the rows are read
  // once, from memory (decode reads each layer's keys and values once per token), so a kernel may
  // prefetch them; false when they are being reused from cache (prefill reads them for every
  // token), where prefetching only costs instructions. It never changes the result.
  void (*attention)(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
                    int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out,
                    bool streamed);
  // Optional (nullptr: callers call `attention` once per token). `attention` for n_tokens
  // consecutive tokens of a prompt, the rows all in the cache already: token j (0..n_tokens-1) has
  // its n_heads query heads at q + j * q_stride, attends positions 0..n_positions - n_tokens + j
  // (the last token all n_positions), and writes out + j * out_stride. Taking tokens together lets
  // a kernel use each loaded key and value row for several tokens (prefill reads the cache once per
  // token). Each token's result is what `attention` gives, within float rounding. scores has room
  // for 2 * n_heads * n_positions floats.
  void (*attention_tokens)(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_heads, const void* k,
                           const void* v, DType kv_dtype, int64_t kv_stride, int64_t n_positions, int64_t head_dim,
                           float score_divisor, float* scores, float* out, int64_t out_stride);
  // Reads one row of an embedding matrix as f32 (any dtype and layout the backend accepts).
  void (*embedding_row)(const MatrixView& w, int64_t row, float* out);
  // out[i] = x[i] as f16, rounded to nearest even, overflow to infinity, NaN kept NaN (as
  // Fp32ToFp16; a NaN's payload bits may differ). Writes the f16 KV cache.
  void (*f32_to_f16)(const float* x, uint16_t* out, int64_t n);
  // Optional (nullptr: callers run quantize_q8_0, then SummarizeQ8_0Blocks over its blocks).
  // quantize_q8_0 that also writes each block's quant sum and scale as f32, exactly as
  // SummarizeQ8_0Blocks gives them, in the same pass instead of a second one over the blocks.
  void (*quantize_q8_0_summarized)(const float* x, BlockQ8_0* out, int32_t* sums, float* scales,
                                   int64_t n) = nullptr;
  // Optional (0: none): the run of blocks in which `matmul` would like Activations::q4_0_offsets
  // for a prompt's Q4_0 products. Results are the same with or without them.
  int64_t q4_0_offset_run = 0;
  // Optional (nullptr: none): for a backend whose prompt products read Activations::bf16, rounds
  // n_tokens <= 16 rows of x (`columns` apart, a multiple of 32) to bf16 (nearest even; NaN stays
  // NaN) into one token tile of that layout (`out`: its block 0; blocks block_stride elements
  // apart), zero for the tile's tokens past n_tokens. The session then fills bf16 for the
  // quantized products that take it (TakesBf16Path).
  void (*f32_to_bf16_tile)(const float* x, int64_t columns, int64_t n_tokens, uint16_t* out,
                           int64_t block_stride) = nullptr;
  // The fewest tokens from which `matmul` computes a Q4_0 or Q8_0 product in bf16 (0: never): the
  // dequantizing a tile costs is paid back from a different prompt length per type.
  int64_t bf16_min_tokens_q4_0 = 0;
  int64_t bf16_min_tokens_q8_0 = 0;
};

// The fewest tokens from which `k.matmul` computes a product over `dtype` weights in bf16 (0: never).
inline int64_t Bf16MinTokens(const KernelTable& k, DType dtype) {
  if (k.f32_to_bf16_tile == nullptr) return 0;
  return dtype == DType::kQ4_0 ? k.bf16_min_tokens_q4_0 : dtype == DType::kQ8_0 ? k.bf16_min_tokens_q8_0 : 0;
}

// Whether `k.matmul` computes a product of `n_tokens` tokens over `dtype` weights from
// Activations::bf16 (and not from Q8_0 blocks).
inline bool TakesBf16Path(const KernelTable& k, DType dtype, int64_t n_tokens) {
  const int64_t min_tokens = Bf16MinTokens(k, dtype);
  return min_tokens > 0 && n_tokens > 1 && n_tokens >= min_tokens;
}

}  // namespace kestrel
