// FasterPath (faster_path.h): compiled with the library's baseline flags.
#include "backend/faster_path.h"

#include <algorithm>
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
  // Slice i of the trial runs the path i after the best, so the best starts every round of slices.
  const int64_t slice = (at - (period_ - trial_)) / slice_;
  return {static_cast<int>((best + slice) % paths_), true, now, static_cast<int>(slice)};
}

void FasterPath::Report(const Choice& choice, int64_t end, uint64_t work) noexcept {
  // The constructor widens slices so that a trial has at most kMaxSlices: choice.slice indexes them.
  const int slice = choice.slice;
  time_[choice.path][slice].fetch_add(static_cast<uint64_t>(end - choice.start), std::memory_order_relaxed);
  work_[choice.path][slice].fetch_add(work, std::memory_order_relaxed);
}

int FasterPath::best() const { return best_.load(std::memory_order_relaxed); }

void FasterPath::ForceForTesting(int path) { forced_path.store(path, std::memory_order_relaxed); }

void FasterPath::Decide() {
  double rate[kMaxPaths];
  bool complete = true;  // every path reported: otherwise there is nothing to compare
  for (int p = 0; p < paths_; ++p) {
    double slice_rate[kMaxSlices];
    int n = 0;
    for (int s = 0; s < kMaxSlices; ++s) {
      const uint64_t time = time_[p][s].exchange(0, std::memory_order_relaxed);
      const uint64_t work = work_[p][s].exchange(0, std::memory_order_relaxed);
      if (work != 0) slice_rate[n++] = static_cast<double>(time) / static_cast<double>(work);
    }
    complete = complete && n != 0;
    if (n == 0) continue;
    // The median of the slices' rates (the mean of the middle two for an even count).
    std::sort(slice_rate, slice_rate + n);
    rate[p] = n % 2 != 0 ? slice_rate[n / 2] : 0.5 * (slice_rate[n / 2 - 1] + slice_rate[n / 2]);
  }
  if (!complete) return;
  int fastest = 0;
  for (int p = 1; p < paths_; ++p) fastest = rate[p] < rate[fastest] ? p : fastest;
  if (fastest == best_.load(std::memory_order_relaxed)) {
    wins_.store(0, std::memory_order_relaxed);
    return;
  }
  const int wins =
      fastest == challenger_.load(std::memory_order_relaxed) ? wins_.load(std::memory_order_relaxed) + 1 : 1;
  challenger_.store(fastest, std::memory_order_relaxed);
  wins_.store(wins < confirm_ ? wins : 0, std::memory_order_relaxed);
  if (wins >= confirm_) best_.store(fastest, std::memory_order_relaxed);
}

int64_t NowNanoseconds() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kestrel
