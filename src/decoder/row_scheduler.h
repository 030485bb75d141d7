// Hands out the rows of one matrix product to the pool's threads in chunks. Each thread owns a
// contiguous share (as a static split would give it) and takes chunks from its front; a thread
// whose share is done takes chunks from the back of another's. Why: at decode every product is a
// pass over weights streamed from memory, split in two, and one thread often runs ~10% slower (a
// later start, a busier core); with a static split the other waits at every product. Owners walk
// their share in order, so the kernels' prefetch stream stays contiguous; thieves come from the
// far end, where they least disturb it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace kestrel {

class RowScheduler {
 public:
  // Room for up to `max_parts` threads; allocates once, here.
  explicit RowScheduler(int max_parts);

  // Prepares [0, n) for `parts` threads in chunks of `chunk` rows (the last one shorter). Call
  // before the pool runs the job; `chunk` > 0, `parts` <= max_parts, n / chunk < 2^31.
  void Reset(int64_t n, int parts, int64_t chunk);
  // The next rows for thread `part`: its own share first, then others'. False when none are left.
  bool Next(int part, int64_t* begin, int64_t* end);

  // A chunk size for n rows over `parts` threads: about `per_part` chunks each, aligned to `align`.
  static int64_t ChunkRows(int64_t n, int parts, int per_part, int64_t align);

 private:
  // A share as one word, so that owner and thieves claim with one compare-and-swap: the next
  // chunk at the front (low half) and one past the last at the back (high half), in chunks.
  struct alignas(64) Share {
    std::atomic<uint64_t> span{0};
  };
  bool TakeFront(Share& s, uint32_t* chunk);
  bool TakeBack(Share& s, uint32_t* chunk);

  int max_parts_;
  std::unique_ptr<Share[]> shares_;
  int parts_ = 0;
  int64_t n_ = 0, chunk_ = 1;
};

}  // namespace kestrel
