// Chooses, while running, the faster of two code paths that compute identical results and differ
// only in speed, where which one is faster depends on conditions the code cannot see. Why: the
// AVX-512 decode kernel's two prefetch orders swap places with the memory traffic of whatever else
// runs on the machine (on the shared Zen 5 CI host, paired in one process, 10-12% one way while it was
// quiet and 16-21% the other while it was busy; bench/README.md), so a fixed choice loses one case.
//
// Calls are counted over all threads in periods of `period` calls. The last `trial` calls of each
// period are timed and take the two paths in turn, `slice` calls at a time, so that both paths see
// the same moment of the machine and nearly the same mix of work (at decode, a slice of 64 calls
// is about one layer's products); when the period ends, the path with the lower time per unit of
// work over the trial becomes the best, and the rest of the next period runs it. Threads that share
// the memory run the same path together, only the trial pays for the timing, and the other path
// costs at most trial / (2 period) of the difference. A decode token makes a few thousand calls
// (two threads, Qwen3-1.7B), so the defaults decide every few tokens at a cost of 1/32 of the
// difference. Thread-safe: a few relaxed atomics; a call reported across a period's end counts in
// the next trial, which only blurs that decision a little.
#pragma once

#include <atomic>
#include <cstdint>

namespace kestrel {

class FasterPath {
 public:
  // 0 < slice, trial <= period.
  explicit FasterPath(uint32_t period = 16384, uint32_t trial = 1024, uint32_t slice = 64)
      : period_(period), trial_(trial), slice_(slice) {}

  struct Choice {
    int path;    // 0 or 1
    bool timed;  // whether Report() wants this call's time
  };

  // The path for the next call: path 0 until the first period ends.
  Choice Pick() {
    const int forced = forced_.load(std::memory_order_relaxed);
    if (forced >= 0) return {forced, false};
    const uint64_t call = calls_.fetch_add(1, std::memory_order_relaxed);
    if (call > 0 && call % period_ == 0) Decide();
    const int best = best_.load(std::memory_order_relaxed);
    const uint64_t at = call % period_;
    if (at < period_ - trial_) return {best, false};
    const bool other = (at - (period_ - trial_)) / slice_ % 2 == 1;
    return {other ? 1 - best : best, true};
  }

  // A timed call on `path` took `time` (any unit) for `work` (any unit; the same for both paths).
  void Report(int path, uint64_t time, uint64_t work) {
    time_[path].fetch_add(time, std::memory_order_relaxed);
    work_[path].fetch_add(work, std::memory_order_relaxed);
  }

  int best() const { return best_.load(std::memory_order_relaxed); }

  // Tests: from the next call on, every FasterPath in the process takes `path` (0 or 1, untimed),
  // or, with -1, chooses as above again; so conformance tests can run each path for certain.
  static void ForceForTesting(int path) { forced_.store(path, std::memory_order_relaxed); }

 private:
  // Compares the two paths over the period's trial and clears the sums for the next.
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

  const uint32_t period_, trial_, slice_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<int> best_{0};
  std::atomic<uint64_t> time_[2] = {0, 0}, work_[2] = {0, 0};
  static inline std::atomic<int> forced_{-1};
};

}  // namespace kestrel
