#include "platform/read_streams.h"

namespace kestrel {

uint64_t ReadStreams(const uint64_t* data, size_t words, int streams, bool prefetch, size_t* read) {
  const size_t part = words / static_cast<size_t>(streams) / 8 * 8;
  // Four sums, so the adds do not chain into one dependency that would pace the loads.
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 8 <= part; i += 8) {
    for (int s = 0; s < streams; ++s) {
      const uint64_t* line = data + s * part + i;
      if (prefetch) __builtin_prefetch(line + 4096);
      a += line[0] + line[4];
      b += line[1] + line[5];
      c += line[2] + line[6];
      d += line[3] + line[7];
    }
  }
  *read = part * static_cast<size_t>(streams) * sizeof(uint64_t);
  return a + b + c + d;
}

}  // namespace kestrel
