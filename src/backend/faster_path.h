// Chooses, while running, the fastest of two or three code paths that compute identical results
// and differ only in speed, where which one is faster depends on conditions the code cannot see.
// Why: the decode kernels' prefetch orders swap places with the memory traffic of whatever else
// runs on the machine (on the shared Zen 5 CI host, paired in one process, 10-12% one way while it
// was quiet and 16-21% the other while it was busy), and their walks over the tiles with the CPU,
// the weight type and the thread count (bench/README.md), so a fixed choice loses a case.
//
// Time is cut into periods. The last `trial` of each period is timed and takes the paths in turn,
// `slice` at a time, so all see the same moment of the machine and nearly the same mix of work (at
// two-thread decode, a 0.5 ms slice is one or two layers' products); when the next period begins,
// the path with the lowest time per unit of work over the trial (the median of its slices' rates)
// becomes the best (with a confirm count above 1, once it has won that many trials in a row), and
// the rest of that period runs it. Threads read the same clock, so threads that share the memory
// run the same path together. The defaults decide every 128 ms (a few decode tokens); with two
// paths the other one runs 1/32 of the time, with three the other two 1/24 together. Per call: a
// clock read (the caller's) and relaxed atomic loads; shared writes only in the trial and once a
// period. Thread-safe; a call that straddles a period's start counts in the next trial (for its
// own path), which only blurs that decision a little.
#pragma once

#include <atomic>
#include <cstdint>

namespace kestrel {

// Out of line (faster_path.cc, baseline flags) on purpose: the AVX-512 unit includes this header,
// and an inline member compiled there could be the copy the linker keeps for everyone. Callers
// keep instances at namespace scope (constant-initialized), not as function-local statics, whose
// guarded initialization would need exception-handling data in those units.
class FasterPath {
 public:
  static constexpr int kMaxPaths = 3;
  // The defaults, in nanoseconds: a decision every 128 ms from the last 8 ms, in 0.5 ms slices.
  static constexpr int64_t kPeriod = 128'000'000, kTrial = 8'000'000, kSlice = 500'000;

  // Durations in the unit of the times passed in (nanoseconds for the defaults); 0 < slice,
  // trial <= period; `paths` is clamped to 2 .. kMaxPaths. `confirm` (at least 1): how many
  // compared trials in a row another path must win before it replaces the best one; a trial with
  // a path missing neither counts nor breaks the run. Above 1 where the paths' order is fixed by
  // the hardware and a lone noisy trial would otherwise hand a whole period to the slower one.
  // constexpr, so that a FasterPath at namespace scope is initialized without running code.
  constexpr explicit FasterPath(int64_t period = kPeriod, int64_t trial = kTrial, int64_t slice = kSlice, int paths = 2,
                                int confirm = 1)
      : period_(period),
        trial_(trial),
        slice_(slice * kMaxSlices >= trial ? slice : (trial + kMaxSlices - 1) / kMaxSlices),
        paths_(paths < 2           ? 2
               : paths > kMaxPaths ? kMaxPaths
                                   : paths),
        confirm_(confirm < 1 ? 1 : confirm) {}
  // The default durations, choosing among `paths` paths.
  static constexpr FasterPath Among(int paths) { return FasterPath(kPeriod, kTrial, kSlice, paths); }

  struct Choice {
    int path;       // 0 .. paths - 1
    bool timed;     // whether Report() wants this call
    int64_t start;  // the time passed to Pick
    int slice = 0;  // timed calls: which slice of the trial they started in
  };

  // The path for a call starting at `now` (a clock that never goes back, e.g. NowNanoseconds());
  // path 0 until the first trial has been compared.
  Choice Pick(int64_t now) noexcept;
  // A timed call ended at `end` having done `work` (any unit, the same for both paths).
  void Report(const Choice& choice, int64_t end, uint64_t work) noexcept;
  int best() const;

  // Tests: from the next call on, every FasterPath in the process takes `path` (0 .. kMaxPaths - 1,
  // untimed; a caller with fewer paths maps the extra numbers onto its own), or, with -1, chooses
  // as above again; so conformance tests can run each path for certain.
  static void ForceForTesting(int path);

 private:
  // Compares the paths over the last trial and clears the sums for the next.
  void Decide();

  // Slices a trial keeps apart (a longer trial's slices are widened to fit).
  static constexpr int kMaxSlices = 64;

  const int64_t period_, trial_, slice_;
  const int paths_, confirm_;
  std::atomic<int64_t> period_seen_{0};
  std::atomic<int> best_{0};
  // The path that won the last compared trials without being the best, and how many in a row.
  std::atomic<int> challenger_{0}, wins_{0};
  // Time and work per path and slice of the trial: each path is judged by the median of its
  // slices' rates, so one slice that lost its core to another process for a while (on a shared
  // machine, a millisecond is often a slice's whole length) does not decide a period. Indexed by
  // path as well as slice, so a call that straddles a period's start still counts for its own path.
  std::atomic<uint64_t> time_[kMaxPaths][kMaxSlices] = {}, work_[kMaxPaths][kMaxSlices] = {};
};

// The clock FasterPath's callers use: steady, in nanoseconds (about 20 ns a read on the Zen 5).
int64_t NowNanoseconds() noexcept;

}  // namespace kestrel
