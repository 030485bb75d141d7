// FasterPath (src/backend/faster_path.h), the run-time choice between two equivalent code paths:
// the schedule of explored and timed windows, that the faster path per unit of work wins each
// period and the choice follows when the speeds swap, that untimed or missing reports change
// nothing, and that two threads calling it at once still converge. Simulated costs stand in for
// the decode kernel's measured ones (which kernels_test cannot make deterministic).
#include "backend/faster_path.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace kestrel {
namespace {

// Runs `calls` calls where a call on path p costs rate[p] per unit of `work`; returns how many ran
// on each path.
std::vector<int> Run(FasterPath& chooser, int calls, const double rate[2], uint64_t work = 100) {
  std::vector<int> ran(2, 0);
  for (int i = 0; i < calls; ++i) {
    const FasterPath::Choice c = chooser.Pick();
    ++ran[c.path];
    if (c.timed) chooser.Report(c.path, static_cast<uint64_t>(rate[c.path] * work), work);
  }
  return ran;
}

TEST_CASE("FasterPath times the end of each period, taking the two paths in turn", "[faster_path]") {
  FasterPath chooser(12, 8, 2);  // periods of 12 calls, the last 8 a trial in slices of 2
  const int expected_path[12] = {0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1};
  const bool expected_timed[12] = {false, false, false, false, true, true, true, true, true, true, true, true};
  for (int i = 0; i < 12; ++i) {
    const FasterPath::Choice c = chooser.Pick();
    CHECK(c.path == expected_path[i]);
    CHECK(c.timed == expected_timed[i]);
  }
  CHECK(chooser.best() == 0);  // nothing reported: no decision
  CHECK(chooser.Pick().path == 0);
}

TEST_CASE("FasterPath takes the path with the lower time per unit of work and follows a swap", "[faster_path]") {
  FasterPath chooser(32, 16, 4);
  const double one_faster[2] = {1.2, 1.0};
  Run(chooser, 32, one_faster);
  CHECK(chooser.best() == 0);  // the first period's decision is taken by the next call
  Run(chooser, 1, one_faster);
  CHECK(chooser.best() == 1);
  // Once decided, the 16 calls before the trial and half the trial run the faster path (the
  // first call of this period ran above).
  const std::vector<int> ran = Run(chooser, 31, one_faster);
  CHECK(ran[1] == 15 + 8);
  CHECK(ran[0] == 8);

  const double zero_faster[2] = {1.0, 1.3};
  Run(chooser, 1, zero_faster);  // decides on the period that used one_faster
  CHECK(chooser.best() == 1);
  Run(chooser, 32, zero_faster);
  CHECK(chooser.best() == 0);
}

TEST_CASE("FasterPath compares time per unit of work, not per call", "[faster_path]") {
  FasterPath chooser(4, 4, 2);
  // Path 0 (the trial's first slice) does 1 unit per call at 2.0 a unit; path 1 (the second) 10
  // units at 1.0: longer calls, cheaper work.
  for (int i = 0; i < 4; ++i) {
    const FasterPath::Choice c = chooser.Pick();
    REQUIRE(c.timed);
    if (c.path == 0)
      chooser.Report(0, 2, 1);
    else
      chooser.Report(1, 10, 10);
  }
  chooser.Pick();
  CHECK(chooser.best() == 1);
}

TEST_CASE("FasterPath keeps its choice when a period has only one path's reports", "[faster_path]") {
  FasterPath chooser(4, 4, 2);
  const double one_faster[2] = {2.0, 1.0};
  Run(chooser, 5, one_faster);
  REQUIRE(chooser.best() == 1);
  // A period where only path 1 reports (path 0's calls fail to report): no comparison, no change.
  for (int i = 0; i < 4; ++i) {
    const FasterPath::Choice c = chooser.Pick();
    if (c.path == 1) chooser.Report(1, 5, 1);
  }
  chooser.Pick();
  CHECK(chooser.best() == 1);
}

TEST_CASE("FasterPath converges with two threads calling at once", "[faster_path]") {
  FasterPath chooser(512, 128, 16);
  const double one_faster[2] = {1.5, 1.0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back([&] { Run(chooser, 512 * 10, one_faster); });
  for (auto& th : threads) th.join();
  CHECK(chooser.best() == 1);
}

}  // namespace
}  // namespace kestrel
