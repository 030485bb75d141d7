// FasterPath (src/backend/faster_path.h), the run-time choice between two equivalent code paths:
// the schedule of untimed time and timed trial slices, that the faster path per unit of work wins
// each trial and the choice follows when the speeds swap, that untimed or one-sided trials change
// nothing, and that two threads calling it at once still converge. Simulated times and costs stand
// in for the decode kernels' measured ones (which kernels_test cannot make deterministic).
#include "backend/faster_path.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace kestrel {
namespace {

// One call at each time in [from, to); a call on path p takes rate[p] per unit of `work`. Returns
// how many calls ran on each path.
std::vector<int> Run(FasterPath& chooser, int64_t from, int64_t to, const double* rate, uint64_t work = 100) {
  std::vector<int> ran(FasterPath::kMaxPaths, 0);
  for (int64_t now = from; now < to; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    ++ran[c.path];
    if (c.timed) chooser.Report(c, now + static_cast<int64_t>(rate[c.path] * work), work);
  }
  return ran;
}

// One call at each time in [from, to), as Run, but only calls on path `path` report, each taking
// `duration` for one unit of work: a trial missing the other paths.
void RunReportingOnly(FasterPath& chooser, int64_t from, int64_t to, int path, int64_t duration) {
  for (int64_t now = from; now < to; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    if (c.path == path) chooser.Report(c, now + duration, 1);
  }
}

TEST_CASE("FasterPath times the end of each period, taking the two paths in turn", "[faster_path]") {
  FasterPath chooser(12, 8, 2);  // periods of 12 time units, the last 8 a trial in slices of 2
  const int expected_path[12] = {0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1};
  const bool expected_timed[12] = {false, false, false, false, true, true, true, true, true, true, true, true};
  for (int64_t now = 0; now < 12; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    CHECK(c.path == expected_path[now]);
    CHECK(c.timed == expected_timed[now]);
    CHECK(c.start == now);
  }
  CHECK(chooser.Pick(12).path == 0);  // nothing reported: no decision
  CHECK(chooser.best() == 0);
}

TEST_CASE("FasterPath takes the path with the lower time per unit of work and follows a swap", "[faster_path]") {
  FasterPath chooser(32, 16, 4);
  const double one_faster[2] = {1.2, 1.0};
  Run(chooser, 0, 32, one_faster);
  CHECK(chooser.best() == 0);  // the trial is compared when the next period begins
  Run(chooser, 32, 33, one_faster);
  CHECK(chooser.best() == 1);
  // Once decided, the 16 units before the trial and half the trial run the faster path (the first
  // call of this period ran above).
  const std::vector<int> ran = Run(chooser, 33, 64, one_faster);
  CHECK(ran[1] == 15 + 8);
  CHECK(ran[0] == 8);

  const double zero_faster[2] = {1.0, 1.3};
  Run(chooser, 64, 65, zero_faster);  // decides on the trial that ran with one_faster
  CHECK(chooser.best() == 1);
  Run(chooser, 65, 97, zero_faster);
  CHECK(chooser.best() == 0);
}

// One trial of a FasterPath(4, 4, 2) from `start` (a multiple of 4): every call is timed, a call
// on path p taking duration[p] for work[p]. Returns the best path afterwards.
int TrialBest(int64_t start, const int64_t duration[2], const uint64_t work[2]) {
  FasterPath chooser(4, 4, 2);
  for (int64_t now = start; now < start + 4; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    REQUIRE(c.timed);
    chooser.Report(c, now + duration[c.path], work[c.path]);
  }
  chooser.Pick(start + 4);
  return chooser.best();
}

TEST_CASE("FasterPath compares time per unit of work, not per call", "[faster_path]") {
  // Path 0 does 1 unit per call in 2 time units; path 1 10 units in 10: longer calls, cheaper work.
  const int64_t duration[2] = {2, 10};
  const uint64_t work[2] = {1, 10};
  CHECK(TrialBest(0, duration, work) == 1);
}

TEST_CASE("FasterPath counts a call's time from its start, late in a long-running clock", "[faster_path]") {
  // Path 0: 10 units in 20; path 1: 1 unit in 1. Path 1 is faster per unit of work; at a steady
  // clock's nanoseconds after days of uptime, times counted from zero would favour path 0.
  const int64_t duration[2] = {20, 1};
  const uint64_t work[2] = {10, 1};
  CHECK(TrialBest(int64_t{1} << 40, duration, work) == 1);
}

TEST_CASE("FasterPath keeps its choice when a trial has only one path's reports or none", "[faster_path]") {
  FasterPath chooser(4, 4, 2);
  const double one_faster[2] = {2.0, 1.0};
  Run(chooser, 0, 5, one_faster);
  REQUIRE(chooser.best() == 1);
  RunReportingOnly(chooser, 5, 8, 1, 5);  // a trial where only path 1 reports: no comparison, no change
  chooser.Pick(8);
  CHECK(chooser.best() == 1);
  // Periods with no calls at all (an idle session) change nothing either.
  chooser.Pick(400);
  CHECK(chooser.best() == 1);
}

TEST_CASE("FasterPath among three paths takes each in turn in a trial and picks the fastest", "[faster_path]") {
  FasterPath chooser(12, 6, 2, 3);  // periods of 12, the last 6 a trial: slices of 2, one per path
  const int expected_path[12] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2};
  for (int64_t now = 0; now < 12; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    CHECK(c.path == expected_path[now]);
    CHECK(c.timed == (now >= 6));
    if (c.timed) chooser.Report(c, now + (c.path == 2 ? 1 : 3), 1);  // path 2 the fastest
  }
  CHECK(chooser.Pick(12).path == 2);
  // Each trial starts at the best, then the paths after it in turn.
  const int after_two[6] = {2, 2, 0, 0, 1, 1};
  for (int64_t now = 18; now < 24; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    CHECK(c.path == after_two[now - 18]);
    chooser.Report(c, now + (c.path == 1 ? 1 : 4), 1);  // now path 1 is
  }
  CHECK(chooser.Pick(24).path == 1);
  CHECK(chooser.best() == 1);
  // The middle path of three (not just the first or last) wins when it alone is fastest.
  FasterPath middle(6, 6, 2, 3);
  const double rate[3] = {1.3, 1.0, 1.2};
  Run(middle, 0, 7, rate);
  CHECK(middle.best() == 1);
}

TEST_CASE("FasterPath among three keeps its choice while one path has not reported", "[faster_path]") {
  FasterPath chooser(6, 6, 2, 3);
  for (int64_t now = 0; now < 6; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    if (c.path != 2) chooser.Report(c, now + (c.path == 1 ? 1 : 5), 1);  // path 1 faster, path 2 silent
  }
  chooser.Pick(6);
  CHECK(chooser.best() == 0);
}

// One trial of a FasterPath(64, 64, 4): eight slices a path, every call one unit of work taking
// duration(path, slice). Returns the best path afterwards.
template <typename Duration>
int SlicedTrialBest(Duration duration) {
  FasterPath chooser(64, 64, 4);
  for (int64_t now = 0; now < 64; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    REQUIRE(c.timed);
    REQUIRE(c.slice == now / 4);
    chooser.Report(c, now + duration(c.path, c.slice), 1);
  }
  chooser.Pick(64);
  return chooser.best();
}

TEST_CASE("FasterPath judges each path by its slices' median rate, not by one slow slice", "[faster_path]") {
  // Path 1 is faster in every slice but one, where its calls took 20 times as long (its core taken
  // by another process, say). The sums would pick path 0; the medians pick 1.
  CHECK(SlicedTrialBest([](int path, int slice) -> int64_t { return path == 0 ? 12 : (slice == 5 ? 200 : 10); }) == 1);
  // With five of path 1's eight slices (1, 3, .. 15) slow, the medians see path 0 as faster.
  CHECK(SlicedTrialBest([](int path, int slice) -> int64_t { return path == 0 ? 12 : (slice / 2 < 5 ? 200 : 10); }) ==
        0);
}

TEST_CASE("FasterPath widens the slices of a trial longer than it keeps apart", "[faster_path]") {
  // 256 slices of 1 asked for; kept as 64 of 4: calls 0-3 are path 0, 4-7 path 1, ...
  FasterPath chooser(256, 256, 1);
  for (int64_t now = 0; now < 16; ++now) {
    const FasterPath::Choice c = chooser.Pick(now);
    CHECK(c.path == (now / 4) % 2);
    CHECK(c.slice == now / 4);
  }
}

TEST_CASE("FasterPath with confirm 2 hands over only after two won trials in a row, either way", "[faster_path]") {
  FasterPath chooser(4, 4, 2, 2, /*confirm=*/2);  // every period a trial: a slice of 2 for each path
  const double zero_faster[2] = {1.0, 2.0};
  const double one_faster[2] = {2.0, 1.0};
  // The call at each multiple of 4 decides on the trial before it (and is timed in the next one).
  Run(chooser, 0, 5, one_faster);
  CHECK(chooser.best() == 0);  // path 1's first win
  Run(chooser, 5, 9, zero_faster);
  CHECK(chooser.best() == 0);  // path 0 won: the run is broken
  Run(chooser, 9, 13, one_faster);
  CHECK(chooser.best() == 0);  // a first win again
  Run(chooser, 13, 17, one_faster);
  CHECK(chooser.best() == 1);  // the second in a row
  Run(chooser, 17, 21, zero_faster);
  CHECK(chooser.best() == 1);
  Run(chooser, 21, 25, zero_faster);
  CHECK(chooser.best() == 0);
}

TEST_CASE("FasterPath with confirm 2: a trial missing a path neither counts nor breaks the run", "[faster_path]") {
  FasterPath chooser(4, 4, 2, 2, /*confirm=*/2);
  const double one_faster[2] = {2.0, 1.0};
  Run(chooser, 0, 5, one_faster);
  REQUIRE(chooser.best() == 0);
  RunReportingOnly(chooser, 5, 8, 0, 2);  // only path 0 reports (the call at 4 was path 0's too)
  chooser.Pick(8);  // decides on that trial: nothing to compare
  CHECK(chooser.best() == 0);
  chooser.Pick(12);  // an empty trial: nothing either
  CHECK(chooser.best() == 0);
  Run(chooser, 13, 17, one_faster);
  CHECK(chooser.best() == 1);  // path 1's second compared win in a row
}

TEST_CASE("FasterPath converges with two threads calling at once", "[faster_path]") {
  FasterPath chooser(512, 128, 16);
  const double one_faster[2] = {1.5, 1.0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back([&] { Run(chooser, 0, 512 * 10, one_faster); });
  for (auto& th : threads) th.join();
  CHECK(chooser.best() == 1);
}

}  // namespace
}  // namespace kestrel
