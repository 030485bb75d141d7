// Hands out the rows of one product job (one matrix, or several that share their input) to the
// pool's threads in chunks. Each thread owns a contiguous share (as a static split would give it)
// and takes chunks from its front; a thread whose share is done takes chunks from the back of
// another's. Why: at decode every product is a pass over weights streamed from memory, split in
// two, and one thread often runs ~10% slower (a later start, a busier core); with a static split
// the other waits at every product. Owners walk their share in order, so the kernels' prefetch
// stream stays contiguous; thieves come from the far end, where they least disturb it.
//
// Chunks that start in the last quarter of a share are a quarter as long as the others: the threads
// run out of work within one chunk of each other, so the last chunks set how long one waits for the
// other. With 8 equal chunks a thread, one of two Qwen3-1.7B threads sat idle for 5-6% of every
// product's time, at decode and in a 64-token prefill (bench/README.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "format/layout_types.h"

namespace kestrel {

// The rows a product's chunks start on in a matrix of this layout: whole layout tiles and the
// kernels' 16-row group.
int64_t ChunkRowAlign(Layout layout);

// Where share `part` of `parts` begins when the rows of `count` matrices (rows(i) each, in order)
// are split together: the even split point of all their rows, moved down to a multiple of align(i)
// in the matrix i it falls in. RowScheduler::Plan cuts its shares there and decode's read-ahead
// (read_ahead.h) reads from there, so the two agree by construction. A template so that each
// caller passes its own accessors (arrays, or the matrices themselves).
struct SharePoint {
  int matrix;      // count when past the last row (part >= parts, or no rows)
  int64_t offset;  // the rows of the matrices before it
  int64_t row;     // in that matrix
};
template <typename Rows, typename Align>
SharePoint FindShareStart(int count, int part, int parts, const Rows& rows, const Align& align) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += rows(i);
  if (part < parts) {
    const int64_t x = total * part / parts;
    int64_t offset = 0;
    for (int i = 0; i < count; ++i) {
      if (x < offset + rows(i)) return {i, offset, (x - offset) / align(i) * align(i)};
      offset += rows(i);
    }
  }
  return {count, total, 0};
}

class RowScheduler {
 public:
  // Rows [begin, end) of matrix `matrix` (an index into Plan's lists).
  struct Chunk {
    int matrix;
    int64_t begin, end;
  };

  // Room for up to `max_parts` threads.
  explicit RowScheduler(int max_parts);

  // Prepares the rows of `count` matrices (rows[i] each; chunk boundaries inside matrix i fall on
  // multiples of align[i] > 0) for `parts` threads (<= max_parts), about `per_part` full-size chunks
  // a thread plus the short ones of each share's last quarter. Call before the pool runs the job.
  void Plan(const int64_t* rows, const int64_t* align, int count, int parts, int per_part);
  // The next chunk for thread `part`: its own share first, then others'. False when none are left.
  bool Next(int part, Chunk* chunk);

  // Plan for one matrix of n rows (align 1 when `align` is not given).
  void Plan(int64_t n, int parts, int per_part, int64_t align = 1) { Plan(&n, &align, 1, parts, per_part); }

 private:
  // A share as one word, so that owner and thieves claim with one compare-and-swap: the next
  // chunk at the front (low half) and one past the last at the back (high half), as indices into
  // chunks_.
  struct alignas(64) Share {
    std::atomic<uint64_t> span{0};
  };
  bool TakeFront(Share& s, uint32_t* chunk);
  bool TakeBack(Share& s, uint32_t* chunk);

  int max_parts_;
  std::unique_ptr<Share[]> shares_;
  int parts_ = 0;
  std::vector<Chunk> chunks_;  // every share's chunks, share after share; capacity kept across plans
};

}  // namespace kestrel
