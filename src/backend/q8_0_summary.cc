#include "backend/q8_0_summary.h"

#include "format/dtype.h"

namespace kestrel {

void SummarizeQ8_0Blocks(const BlockQ8_0* blocks, int64_t count, int32_t* sums, float* scales) {
  for (int64_t i = 0; i < count; ++i) {
    int32_t sum = 0;
    for (int8_t q : blocks[i].qs) sum += q;
    sums[i] = sum;
    scales[i] = Fp16ToFp32(blocks[i].d);
  }
}

int64_t Q4_0OffsetsCount(int64_t n_tokens, int64_t blocks, int64_t run) {
  return (blocks + run - 1) / run * n_tokens * run;
}

void FillQ4_0Offsets(const int32_t* sums, int64_t blocks, int64_t n_tokens, int64_t run, int64_t t_begin,
                     int64_t t_end, int32_t* out) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b0 = 0; b0 < blocks; b0 += run) {
      int32_t* entry = out + (b0 / run * n_tokens + t) * run;
      for (int64_t i = 0; i < run; ++i) entry[i] = b0 + i < blocks ? -8 * sums[t * blocks + b0 + i] : 0;
    }
  }
}

Activations WithQ4_0Offsets(const Activations& x, int64_t run, std::vector<int32_t>* table) {
  const int64_t blocks = x.columns / 32;
  table->assign(static_cast<size_t>(Q4_0OffsetsCount(x.n_tokens, blocks, run)), 0);
  FillQ4_0Offsets(x.q8_0_sums, blocks, x.n_tokens, run, 0, x.n_tokens, table->data());
  Activations with = x;
  with.q4_0_offsets = table->data();
  with.q4_0_offset_run = run;
  return with;
}

}  // namespace kestrel
