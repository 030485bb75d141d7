#include "decoder/row_scheduler.h"

#include <algorithm>
#include <numeric>

#include "format/layout.h"

namespace kestrel {
namespace {
uint64_t Pack(uint32_t front, uint32_t back) { return (uint64_t{back} << 32) | front; }
uint32_t Front(uint64_t span) { return static_cast<uint32_t>(span); }
uint32_t Back(uint64_t span) { return static_cast<uint32_t>(span >> 32); }
}  // namespace

int64_t ChunkRowAlign(Layout layout) { return std::lcm(int64_t{16}, int64_t{LayoutTileRows(layout)}); }

RowScheduler::RowScheduler(int max_parts)
    : max_parts_(std::max(max_parts, 1)), shares_(new Share[static_cast<size_t>(std::max(max_parts, 1))]) {
  chunks_.reserve(static_cast<size_t>(max_parts_) * 32);
}

void RowScheduler::Plan(const int64_t* rows, const int64_t* align, int count, int parts, int per_part) {
  parts_ = std::clamp(parts, 1, max_parts_);
  per_part = std::max(per_part, 1);
  // Where share p starts among all rows.
  const auto share_start = [&](int p) {
    const SharePoint s = FindShareStart(
        count, p, parts_, [&](int i) { return rows[i]; }, [&](int i) { return align[i]; });
    return s.offset + s.row;
  };
  chunks_.clear();
  int matrix = 0;
  int64_t offset = 0;  // first row of `matrix` among all rows
  int64_t at = share_start(0);
  for (int p = 0; p < parts_; ++p) {
    const int64_t share_end = share_start(p + 1);
    const int64_t share = share_end - at;
    const int64_t full = std::max<int64_t>(1, (share + per_part - 1) / per_part);
    const int64_t short_chunk = std::max<int64_t>(1, (full + 3) / 4);
    const int64_t tail = share_end - share / 4;
    const auto first = static_cast<uint32_t>(chunks_.size());
    while (at < share_end) {
      while (at >= offset + rows[matrix]) offset += rows[matrix++];
      const int64_t local = at - offset;
      const int64_t size = at < tail ? full : short_chunk;
      const int64_t end = std::min({(local + size + align[matrix] - 1) / align[matrix] * align[matrix], rows[matrix],
                                    share_end - offset});
      chunks_.push_back({matrix, local, end});
      at = offset + end;
    }
    shares_[static_cast<size_t>(p)].span.store(Pack(first, static_cast<uint32_t>(chunks_.size())),
                                               std::memory_order_relaxed);
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

bool RowScheduler::Next(int part, Chunk* chunk) {
  uint32_t index = 0;
  bool found = TakeFront(shares_[static_cast<size_t>(part)], &index);
  for (int i = 1; !found && i < parts_; ++i) found = TakeBack(shares_[static_cast<size_t>((part + i) % parts_)], &index);
  if (!found) return false;
  *chunk = chunks_[index];
  return true;
}

}  // namespace kestrel
