#include "decoder/row_scheduler.h"

#include <algorithm>

namespace kestrel {
namespace {
uint64_t Pack(uint32_t front, uint32_t back) { return (uint64_t{back} << 32) | front; }
uint32_t Front(uint64_t span) { return static_cast<uint32_t>(span); }
uint32_t Back(uint64_t span) { return static_cast<uint32_t>(span >> 32); }
}  // namespace

RowScheduler::RowScheduler(int max_parts)
    : max_parts_(std::max(max_parts, 1)), shares_(new Share[static_cast<size_t>(std::max(max_parts, 1))]) {}

int64_t RowScheduler::ChunkRows(int64_t n, int parts, int per_part, int64_t align) {
  const int64_t pieces = std::max<int64_t>(1, int64_t{parts} * per_part);
  const int64_t rows = (n + pieces - 1) / pieces;
  return std::max<int64_t>(align, (rows + align - 1) / align * align);
}

void RowScheduler::Reset(int64_t n, int parts, int64_t chunk) {
  parts_ = std::clamp(parts, 1, max_parts_);
  n_ = n;
  chunk_ = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk_ - 1) / chunk_;
  for (int p = 0; p < parts_; ++p) {
    const auto first = static_cast<uint32_t>(chunks * p / parts_);
    const auto last = static_cast<uint32_t>(chunks * (p + 1) / parts_);
    shares_[static_cast<size_t>(p)].span.store(Pack(first, last), std::memory_order_relaxed);
  }
}

bool RowScheduler::TakeFront(Share& s, uint32_t* chunk) {
  uint64_t span = s.span.load(std::memory_order_relaxed);
  while (Front(span) < Back(span)) {
    if (s.span.compare_exchange_weak(span, Pack(Front(span) + 1, Back(span)), std::memory_order_relaxed)) {
      *chunk = Front(span);
      return true;
    }
  }
  return false;
}

bool RowScheduler::TakeBack(Share& s, uint32_t* chunk) {
  uint64_t span = s.span.load(std::memory_order_relaxed);
  while (Front(span) < Back(span)) {
    if (s.span.compare_exchange_weak(span, Pack(Front(span), Back(span) - 1), std::memory_order_relaxed)) {
      *chunk = Back(span) - 1;
      return true;
    }
  }
  return false;
}

bool RowScheduler::Next(int part, int64_t* begin, int64_t* end) {
  uint32_t chunk = 0;
  bool found = TakeFront(shares_[static_cast<size_t>(part)], &chunk);
  for (int i = 1; !found && i < parts_; ++i) found = TakeBack(shares_[static_cast<size_t>((part + i) % parts_)], &chunk);
  if (!found) return false;
  *begin = int64_t{chunk} * chunk_;
  *end = std::min(n_, *begin + chunk_);
  return true;
}

}  // namespace kestrel
