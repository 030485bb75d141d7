// Chooses, while running, the faster of two code paths that compute identical results and differ
// only in speed, where which one is faster depends on conditions the code cannot see. Why: the
// decode kernels' two prefetch orders swap places with the memory traffic of whatever else runs on
// the machine (on the shared Zen 5 CI host, paired in one process, 10-12% one way while it was
// quiet and 16-21% the other while it was busy; bench/README.md), so a fixed choice loses one case.
//
// Time is cut into periods. The last `trial` of each period is timed and takes the two paths in
// turn, `slice` at a time, so both see the same moment of the machine and nearly the same mix of
// work (at two-thread decode, a 0.5 ms slice is one or two layers' products); when the next period
// begins, the path with the lower time per unit of work over the trial becomes the best, and the
// rest of that period runs it. Threads read the same clock, so threads that share the memory run
// the same path together. The defaults decide every 128 ms (a few decode tokens), and the other
// path runs 1/32 of the time. Per call: a clock read (the caller's) and relaxed atomic loads;
// shared writes only in the trial and once a period. Thread-safe; a call that straddles a period's
// start counts in the next trial, which only blurs that decision a little.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kestrel {

class FasterPath {
 public:
  // Durations in the unit of the times passed in (nanoseconds below); 0 < slice, trial <= period.
  explicit FasterPath(int64_t period = 128'000'000, int64_t trial = 8'000'000, int64_t slice = 500'000)
      : period_(period), trial_(trial), slice_(slice) {}

  struct Choice {
    int path;       // 0 or 1
    bool timed;     // whether Report() wants this call
    int64_t start;  // the time passed to Pick
  };

  // The path for a call starting at `now` (a clock that never goes back, e.g. steady_clock in
  // nanoseconds); path 0 until the first trial has been compared.
  Choice Pick(int64_t now) {
    const int forced = forced_.load(std::memory_order_relaxed);
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

  // A timed call ended at `end` having done `work` (any unit, the same for both paths).
  void Report(const Choice& choice, int64_t end, uint64_t work) {
    time_[choice.path].fetch_add(static_cast<uint64_t>(end - choice.start), std::memory_order_relaxed);
    work_[choice.path].fetch_add(work, std::memory_order_relaxed);
  }

  int best() const { return best_.load(std::memory_order_relaxed); }

  // Tests: from the next call on, every FasterPath in the process takes `path` (0 or 1, untimed),
  // or, with -1, chooses as above again; so conformance tests can run each path for certain.
  static void ForceForTesting(int path) { forced_.store(path, std::memory_order_relaxed); }

 private:
  // Compares the two paths over the last trial and clears the sums for the next.
  void Decide() {
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

  const int64_t period_, trial_, slice_;
  std::atomic<int64_t> period_seen_{0};
  std::atomic<int> best_{0};
  std::atomic<uint64_t> time_[2] = {0, 0}, work_[2] = {0, 0};
  static inline std::atomic<int> forced_{-1};
};

// The clock FasterPath's callers use: steady, in nanoseconds (about 20 ns a read on the Zen 5).
inline int64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kestrel
