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

}  // namespace kestrel
