#include "platform/cpu_cache.h"

#include <algorithm>

namespace kestrel {

int64_t L2BytesPerCpu(const CpuidCacheReport& report) {
  for (const CpuidRegisters& r : report.caches) {
    const uint32_t type = r.eax & 0x1f, level = (r.eax >> 5) & 0x7;
    if (type == 0) break;                                  // no more caches
    if (level != 2 || (type != 1 && type != 3)) continue;  // data or unified only
    const int64_t line = (r.ebx & 0xfff) + 1, partitions = ((r.ebx >> 12) & 0x3ff) + 1;
    const int64_t ways = ((r.ebx >> 22) & 0x3ff) + 1, sets = int64_t{r.ecx} + 1;
    const int64_t sharers = ((r.eax >> 14) & 0xfff) + 1;
    return ways * partitions * line * sets / sharers;
  }
  const int64_t kib = report.l2_ecx >> 16;
  return kib * 1024 / std::max(report.smt_threads, 1);
}

}  // namespace kestrel
