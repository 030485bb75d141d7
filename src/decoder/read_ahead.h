// Decode's read-ahead: what a thread prefetches of the next product while it would otherwise wait.
// At decode every product streams its weights from memory, and between products the threads idle:
// the one that finished its share first waits for the other, and the workers wait while the caller
// alone does the per-token passes and, at short contexts, attention (~4% of a two-thread Qwen3-1.7B
// token on the Intel Xeon CI machine). A thread's share of the next product is known before it
// starts (the owner walks it from its front, RowScheduler), so the thread prefetches that front
// into its L2 in those gaps and memory keeps streaming (+0.7-1.2% decode there, bench/README.md).
#pragma once

#include <cstdint>

#include "backend/kernels.h"

namespace kestrel {

struct alignas(64) ReadAhead {  // one a thread, on a line of its own
  const uint8_t* next = nullptr;
  const uint8_t* end = nullptr;

  // The first `bytes` of the share that thread `part` of `parts` will own in a product over
  // `matrices` (their rows split together, where RowScheduler::Plan starts it: FindShareStart with
  // ChunkRowAlign); within that matrix.
  static ReadAhead ShareStart(const MatrixView* const* matrices, int count, int part, int parts, int64_t bytes);

  // Prefetches the next 4 KB into L2; returns whether more is left. Steps are short so that an
  // idle worker sees its next job within a fraction of a microsecond.
  bool Step() {
    if (next >= end) return false;
    const uint8_t* stop = end - next > kStepBytes ? next + kStepBytes : end;
    for (const uint8_t* p = next; p < stop; p += 64) __builtin_prefetch(p, /*rw=*/0, /*locality=*/2);
    next = stop;
    return next < end;
  }

  static constexpr int64_t kStepBytes = 4096;
};

}  // namespace kestrel
