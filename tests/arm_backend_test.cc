// The ARM backends' selection (issue 6). Built everywhere; on other architectures it only reports
// itself skipped. Under qemu the ctest runs set QEMU_CPU and KESTREL_EXPECT_BACKEND
// (scripts/test-arm.sh): cortex-a53 has no dotprod and must get "neon", max has it and must get
// "neon_dotprod". Checks: automatic selection and the refusal of a backend the CPU lacks. Every
// usable backend (these included) runs the models end to end in backend_model_test.cc.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "backend/registry.h"

#if defined(__aarch64__)
#include "decoder/model.h"
#include "test_support.h"
#endif

namespace kestrel {
namespace {

#if !defined(__aarch64__)

TEST_CASE("ARM backends", "[arm]") { WARN("SKIPPED: not an ARM build"); }

#else

const Backend* FindBackend(const std::string& name) {
  for (const Backend* b : CompiledBackends()) {
    if (name == b->name) return b;
  }
  return nullptr;
}

std::string ExpectedBackend() {
  const char* env = std::getenv("KESTREL_EXPECT_BACKEND");
  return env != nullptr ? env : "";
}

TEST_CASE("ARM: the registry picks the backend this CPU model allows", "[arm]") {
  const Backend* neon = FindBackend("neon");
  const Backend* dotprod = FindBackend("neon_dotprod");
  REQUIRE(neon != nullptr);
  REQUIRE(dotprod != nullptr);
  REQUIRE(neon->cpu_supports());
  auto best = SelectBackend("");
  REQUIRE(best.ok());
  const std::string expected = ExpectedBackend();
  if (expected.empty()) {
    WARN("KESTREL_EXPECT_BACKEND unset: checking consistency only (picked " << (*best)->name << ")");
    REQUIRE(std::string((*best)->name) == (dotprod->cpu_supports() ? "neon_dotprod" : "neon"));
  } else {
    REQUIRE(std::string((*best)->name) == expected);
  }
}

TEST_CASE("ARM: forcing neon_dotprod on a CPU without dotprod is refused, not run", "[arm]") {
  const Backend* dotprod = FindBackend("neon_dotprod");
  REQUIRE(dotprod != nullptr);
  auto forced = SelectBackend("neon_dotprod");
  if (ExpectedBackend() == "neon") REQUIRE_FALSE(dotprod->cpu_supports());
  if (dotprod->cpu_supports()) {
    REQUIRE(forced.ok());
    WARN("SKIPPED refusal check: this CPU model has dotprod");
    return;
  }
  REQUIRE_FALSE(forced.ok());
  REQUIRE(absl::IsFailedPrecondition(forced.status()));
  REQUIRE(std::string(forced.status().message()).find("lacks the features") != std::string::npos);
  // Loading a model with it is refused the same way (the load never reaches a kernel).
  const std::string dummy = testing::TempPath("never-read.vqf");
  auto model = Model::Load(dummy, ModelOptions{"neon_dotprod"});
  REQUIRE_FALSE(model.ok());
  REQUIRE(absl::IsFailedPrecondition(model.status()));
}

#endif  // __aarch64__

}  // namespace
}  // namespace kestrel
