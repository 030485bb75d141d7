// The one rule for tests that need ../shared: present -> run; absent -> fail, unless
// KESTREL_ALLOW_MISSING_SHARED=1, when the test says "SKIPPED" (ctest then reports it skipped).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "test_support.h"

namespace kestrel::testing {

inline bool HaveShared(const std::string& relative) {
  if (!SharedPath(relative).empty()) return true;
  const char* allow = std::getenv("KESTREL_ALLOW_MISSING_SHARED");
  if (allow != nullptr && std::string(allow) == "1") {
    WARN("SKIPPED: ../shared/" << relative << " is absent");
    return false;
  }
  FAIL("../shared/" << relative << " is absent (set KESTREL_ALLOW_MISSING_SHARED=1 to skip)");
  return false;
}

}  // namespace kestrel::testing
