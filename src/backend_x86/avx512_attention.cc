// AVX-512 attention over the KV cache (the KernelTable's `attention`, backend/kernels.h). Compiled
// with the AVX-512 flags; avx512_simde_attention.cc compiles it again for AVX2 with SIMDe (tests).
//
// The AVX2 kernel's algorithm (avx2_kernels.cc) on 16-float vectors, which on a CPU with full-width
// AVX-512 halves the instructions per key and value: from cache the AVX2 kernel converted f16 rows
// at ~30 GB/s, so at long contexts decode attention ran at half the weights' streaming rate
// (bench/README.md). Differences that the wider vectors allow:
// - Scores: eight dot products at a time (four positions for two heads, or eight for one), reduced
//   together into one vector by a transposing tree, not one horizontal sum each.
// - Values: both heads of a pair keep all of a 128-dimension head in sixteen accumulators, so each
//   value row is read once, in one sequential pass (the AVX2 kernel needs four 32-dimension passes).
// - Prompts (`attention_tokens`): two consecutive tokens at once, four queries per head pair, so
//   each key and value chunk loaded from cache serves twice the work.
// The softmax between the passes is this backend's (avx512_activations.cc). Head sizes that are not a multiple of 16 go to the AVX2 kernel. Sums are in a different order
// from the reference's: the conformance tests hold it to the float tolerance, like the AVX2 kernel.
#include <algorithm>
#include <cstdint>

#include "backend_x86/avx2_kernels.h"
#include "backend_x86/avx512_intrinsics.h"
#include "backend_x86/avx512_kernels.h"

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

// Positions of V every head of a group sums while they sit in L1 (64 rows of 128 f32 = 32 KB).
constexpr int64_t kValueBlock = 64;
// At decode (`streamed`), how many positions ahead keys and values are prefetched: each layer's
// cache is read once per token from memory, and each pass is one sequential stream. Unlike the AVX2
// kernel, the key pass does not also prefetch values into L2: the value pass reads each row once,
// and in the kernels bench from memory that prefetch made decode attention ~25% slower (16-48
// positions ahead read alike; bench/README.md).
constexpr int64_t kAhead = 16;

template <typename Row>
struct KvRows {
  const uint8_t* base;
  int64_t row_bytes, head_dim, n_positions;
  const uint8_t* At(int64_t p) const { return base + p * row_bytes; }
  // Rows from..from+count-1 (those that exist) into L1.
  void Prefetch(int64_t from, int64_t count) const {
    const int64_t end = std::min(n_positions, from + count);
    for (int64_t p = from; p < end; ++p) {
      for (int64_t at = 0; at < head_dim * Row::kBytes; at += 64) PrefetchLine(At(p) + at);
    }
  }
};

// Element j of the result is the sum of the 16 elements of a[j]. Each step adds halves of two
// registers packed side by side: 128-bit lanes, then lanes again, then within lanes; then one
// permutation puts the sums in order.
inline __m256 Sum8(const __m512* a) {
  return Reduce8(a, [](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
}

// Scores of NQ query vectors q[0..NQ-1] (heads of one token, or of two tokens) into s[0..NQ-1]
// over k's positions; head_dim a multiple of 16. P positions a step, NQ * P (8 or 16) FMA chains:
// each load of a query serves P positions and each key chunk, loaded and converted once, serves
// every query.
template <typename Row, int NQ>
void ScoreQueries(const float* const* q, const KvRows<Row>& k, bool prefetch, float score_divisor, float* const* s) {
  constexpr int P = NQ == 4 ? 4 : 8 / NQ;
  constexpr int kAcc = NQ * P;
  const int64_t head_dim = k.head_dim;
  const __m256 divisor = _mm256_set1_ps(score_divisor);
  int64_t t = 0;
  for (; t + P <= k.n_positions; t += P) {
    if (prefetch) k.Prefetch(t + kAhead, P);
    const uint8_t* kt[P];
    for (int j = 0; j < P; ++j) kt[j] = k.At(t + j);
    __m512 acc[kAcc];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t i = 0; i < head_dim; i += 16) {
      __m512 kv[P];
      for (int j = 0; j < P; ++j) kv[j] = Row::Load16(kt[j], i);
      for (int h = 0; h < NQ; ++h) {
        const __m512 qi = _mm512_loadu_ps(q[h] + i);
        for (int j = 0; j < P; ++j) acc[h * P + j] = _mm512_fmadd_ps(qi, kv[j], acc[h * P + j]);
      }
    }
    for (int g = 0; g < kAcc / 8; ++g) {  // eight sums: P positions of 8 / P queries
      const __m256 dots = _mm256_div_ps(Sum8(acc + 8 * g), divisor);
      if constexpr (P == 8) {
        _mm256_storeu_ps(s[g] + t, dots);
      } else {
        _mm_storeu_ps(s[2 * g] + t, _mm256_castps256_ps128(dots));
        _mm_storeu_ps(s[2 * g + 1] + t, _mm256_extractf128_ps(dots, 1));
      }
    }
  }
  for (; t < k.n_positions; ++t) {
    const uint8_t* kt = k.At(t);
    for (int h = 0; h < NQ; ++h) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < head_dim; i += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(q[h] + i), Row::Load16(kt, i), acc);
      s[h][t] = Sum16(acc) / score_divisor;
    }
  }
}

// out[h] (+)= sum over positions p0..p1-1 of s[h][p] * v[p], for NQ query vectors; the sums start
// from zero at p0 == 0 and continue from out after it. Passes of up to 16 / NQ chunks of 16
// dimensions (sixteen accumulators): a pair of 128-dimension heads takes one pass.
template <typename Row, int NQ>
void WeighValues(const float* const* s, const KvRows<Row>& v, int64_t p0, int64_t p1, bool prefetch,
                 float* const* out) {
  constexpr int kChunks = 16 / NQ;
  const int64_t head_dim = v.head_dim;
  for (int64_t i = 0; i < head_dim; i += 16 * kChunks) {
    // Chunks in this pass; the loops below run to kChunks so that they unroll and the accumulators
    // stay in registers, skipping the chunks past nc (the branch goes the same way every time).
    const int64_t nc = std::min<int64_t>(kChunks, (head_dim - i) / 16);
    __m512 acc[NQ][kChunks];
    for (int h = 0; h < NQ; ++h) {
      for (int j = 0; j < kChunks; ++j) {
        acc[h][j] = p0 == 0 || j >= nc ? _mm512_setzero_ps() : _mm512_loadu_ps(out[h] + i + 16 * j);
      }
    }
    for (int64_t p = p0; p < p1; ++p) {
      if (prefetch && i == 0) v.Prefetch(p + kAhead, 1);
      const uint8_t* vt = v.At(p);
      __m512 weight[NQ];
      for (int h = 0; h < NQ; ++h) weight[h] = _mm512_set1_ps(s[h][p]);
      for (int j = 0; j < kChunks; ++j) {
        if (j < nc) {
          const __m512 vv = Row::Load16(vt, i + 16 * j);
          for (int h = 0; h < NQ; ++h) acc[h][j] = _mm512_fmadd_ps(weight[h], vv, acc[h][j]);
        }
      }
    }
    for (int h = 0; h < NQ; ++h) {
      for (int j = 0; j < kChunks; ++j) {
        if (j < nc) _mm512_storeu_ps(out[h] + i + 16 * j, acc[h][j]);
      }
    }
  }
}

template <typename Row>
void AttentionRows(const float* q, int64_t n_heads, const KvRows<Row>& keys, const KvRows<Row>& values,
                   float score_divisor, float* scores, float* out, bool streamed) {
  const int64_t n_positions = keys.n_positions, head_dim = keys.head_dim;
  // Only the first head pair's passes prefetch (when streamed): later pairs find the rows in cache.
  for (int64_t h = 0; h < n_heads; h += 2) {
    const float* qh[2] = {q + h * head_dim, q + (h + 1) * head_dim};
    float* sh[2] = {scores + h * n_positions, scores + (h + 1) * n_positions};
    if (h + 1 < n_heads) {
      ScoreQueries<Row, 2>(qh, keys, streamed && h == 0, score_divisor, sh);
    } else {
      ScoreQueries<Row, 1>(qh, keys, streamed && h == 0, score_divisor, sh);
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) Softmax(scores + h * n_positions, n_positions);
  for (int64_t p0 = 0; p0 < n_positions; p0 += kValueBlock) {
    const int64_t p1 = std::min(n_positions, p0 + kValueBlock);
    for (int64_t h = 0; h < n_heads; h += 2) {
      const float* sh[2] = {scores + h * n_positions, scores + (h + 1) * n_positions};
      float* oh[2] = {out + h * head_dim, out + (h + 1) * head_dim};
      if (h + 1 < n_heads) {
        WeighValues<Row, 2>(sh, values, p0, p1, streamed && h == 0, oh);
      } else {
        WeighValues<Row, 1>(sh, values, p0, p1, streamed && h == 0, oh);
      }
    }
  }
}

// Two consecutive tokens of a prompt: the second attends keys.n_positions positions, the first one
// fewer. Scores and values take the heads of both tokens together (four queries for a head pair),
// so each key and value chunk is loaded and converted once for twice the work; the position only
// the second token sees is added last, as the reference adds it.
template <typename Row>
void AttentionTokenPair(const float* const* q, int64_t n_heads, const KvRows<Row>& keys, const KvRows<Row>& values,
                        float score_divisor, float* scores, float* const* out) {
  const int64_t n1 = keys.n_positions, n0 = n1 - 1, head_dim = keys.head_dim;
  auto row = [&](int token, int64_t h) { return scores + (token * n_heads + h) * n1; };
  for (int64_t h = 0; h < n_heads; h += 2) {
    if (h + 1 < n_heads) {
      const float* qh[4] = {q[0] + h * head_dim, q[0] + (h + 1) * head_dim, q[1] + h * head_dim,
                            q[1] + (h + 1) * head_dim};
      float* sh[4] = {row(0, h), row(0, h + 1), row(1, h), row(1, h + 1)};
      ScoreQueries<Row, 4>(qh, keys, false, score_divisor, sh);  // the first token's last score is unused
    } else {
      const float* qh[2] = {q[0] + h * head_dim, q[1] + h * head_dim};
      float* sh[2] = {row(0, h), row(1, h)};
      ScoreQueries<Row, 2>(qh, keys, false, score_divisor, sh);
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    Softmax(row(0, h), n0);
    Softmax(row(1, h), n1);
  }
  for (int64_t p0 = 0; p0 < n0; p0 += kValueBlock) {
    const int64_t p1 = std::min(n0, p0 + kValueBlock);
    for (int64_t h = 0; h < n_heads; h += 2) {
      if (h + 1 < n_heads) {
        const float* sh[4] = {row(0, h), row(0, h + 1), row(1, h), row(1, h + 1)};
        float* oh[4] = {out[0] + h * head_dim, out[0] + (h + 1) * head_dim, out[1] + h * head_dim,
                        out[1] + (h + 1) * head_dim};
        WeighValues<Row, 4>(sh, values, p0, p1, false, oh);
      } else {
        const float* sh[2] = {row(0, h), row(1, h)};
        float* oh[2] = {out[0] + h * head_dim, out[1] + h * head_dim};
        WeighValues<Row, 2>(sh, values, p0, p1, false, oh);
      }
    }
  }
  const uint8_t* last = values.At(n0);
  for (int64_t h = 0; h < n_heads; ++h) {
    const __m512 weight = _mm512_set1_ps(row(1, h)[n0]);
    float* o = out[1] + h * head_dim;
    for (int64_t i = 0; i < head_dim; i += 16) {
      _mm512_storeu_ps(o + i, _mm512_fmadd_ps(weight, Row::Load16(last, i), _mm512_loadu_ps(o + i)));
    }
  }
}

template <typename Row>
void AttentionTokens(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_heads, const uint8_t* k,
                     const uint8_t* v, int64_t kv_stride, int64_t n_positions, int64_t head_dim, float score_divisor,
                     float* scores, float* out, int64_t out_stride) {
  const int64_t row_bytes = kv_stride * Row::kBytes;
  auto rows = [&](const uint8_t* base, int64_t n) { return KvRows<Row>{base, row_bytes, head_dim, n}; };
  int64_t j = 0;
  for (; j + 2 <= n_tokens; j += 2) {
    const int64_t n1 = n_positions - n_tokens + j + 2;  // the second token's positions
    const float* qj[2] = {q + j * q_stride, q + (j + 1) * q_stride};
    float* oj[2] = {out + j * out_stride, out + (j + 1) * out_stride};
    AttentionTokenPair<Row>(qj, n_heads, rows(k, n1), rows(v, n1), score_divisor, scores, oj);
  }
  if (j < n_tokens) {
    AttentionRows<Row>(q + j * q_stride, n_heads, rows(k, n_positions), rows(v, n_positions), score_divisor, scores,
                       out + j * out_stride, false);
  }
}

bool Handles(DType kv_dtype, int64_t head_dim) {
  return head_dim % 16 == 0 && (kv_dtype == DType::kF16 || kv_dtype == DType::kF32);
}

}  // namespace

void Attention(const float* q, int64_t n_heads, const void* k, const void* v, DType kv_dtype, int64_t kv_stride,
               int64_t n_positions, int64_t head_dim, float score_divisor, float* scores, float* out, bool streamed) {
  if (!Handles(kv_dtype, head_dim)) {
    return avx2::Attention(q, n_heads, k, v, kv_dtype, kv_stride, n_positions, head_dim, score_divisor, scores, out,
                           streamed);
  }
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  if (kv_dtype == DType::kF16) {
    const int64_t row_bytes = kv_stride * F16Row::kBytes;
    AttentionRows<F16Row>(q, n_heads, {kb, row_bytes, head_dim, n_positions}, {vb, row_bytes, head_dim, n_positions},
                          score_divisor, scores, out, streamed);
  } else {
    const int64_t row_bytes = kv_stride * F32Row::kBytes;
    AttentionRows<F32Row>(q, n_heads, {kb, row_bytes, head_dim, n_positions}, {vb, row_bytes, head_dim, n_positions},
                          score_divisor, scores, out, streamed);
  }
}

void AttentionTokens(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_heads, const void* k, const void* v,
                     DType kv_dtype, int64_t kv_stride, int64_t n_positions, int64_t head_dim, float score_divisor,
                     float* scores, float* out, int64_t out_stride) {
  if (!Handles(kv_dtype, head_dim)) {
    for (int64_t j = 0; j < n_tokens; ++j) {
      avx2::Attention(q + j * q_stride, n_heads, k, v, kv_dtype, kv_stride, n_positions - n_tokens + 1 + j, head_dim,
                      score_divisor, scores, out + j * out_stride, false);
    }
    return;
  }
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  if (kv_dtype == DType::kF16) {
    AttentionTokens<F16Row>(q, q_stride, n_tokens, n_heads, kb, vb, kv_stride, n_positions, head_dim, score_divisor,
                            scores, out, out_stride);
  } else {
    AttentionTokens<F32Row>(q, q_stride, n_tokens, n_heads, kb, vb, kv_stride, n_positions, head_dim, score_divisor,
                            scores, out, out_stride);
  }
}

}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
