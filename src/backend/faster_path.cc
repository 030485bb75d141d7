// FasterPath (faster_path.h): compiled with the library's baseline flags.
#include "backend/faster_path.h"

#include <chrono>

namespace kestrel {
namespace {
std::atomic<int> forced_path{-1};
}  // namespace

FasterPath::Choice FasterPath::Pick(int64_t now) noexcept {
  const int forced = forced_path.load(std::memory_order_relaxed);
  if (forced >= 0) return {forced, false, now};
  const int64_t period = now / period_;
  int64_t seen = period_seen_.load(std::memory_order_relaxed);
  if (period > seen && period_seen_.compare_exchange_strong(seen, period, std::memory_order_relaxed)) Decide();
  const int best = best_.load(std::memory_order_relaxed);
  const int64_t at = now % period_;
  if (at < period_ - trial_) return {best, false, now};
  const bool other = (at - (period_ - trial_)) / slice_ % 2 == 1;
  return {other ? 1 - best : best, true, now};
}

void FasterPath::Report(const Choice& choice, int64_t end, uint64_t work) noexcept {
  time_[choice.path].fetch_add(static_cast<uint64_t>(end - choice.start), std::memory_order_relaxed);
  work_[choice.path].fetch_add(work, std::memory_order_relaxed);
}

int FasterPath::best() const { return best_.load(std::memory_order_relaxed); }

void FasterPath::ForceForTesting(int path) { forced_path.store(path, std::memory_order_relaxed); }

void FasterPath::Decide() {
  uint64_t time[2], work[2];
  for (int p = 0; p < 2; ++p) {
    time[p] = time_[p].exchange(0, std::memory_order_relaxed);
    work[p] = work_[p].exchange(0, std::memory_order_relaxed);
  }
  if (work[0] == 0 || work[1] == 0) return;
  const double rate0 = static_cast<double>(time[0]) / static_cast<double>(work[0]);
  const double rate1 = static_cast<double>(time[1]) / static_cast<double>(work[1]);
  best_.store(rate1 < rate0 ? 1 : 0, std::memory_order_relaxed);
}

int64_t NowNanoseconds() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kestrel
