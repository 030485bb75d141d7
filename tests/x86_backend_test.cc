// The x86 backends' selection. Built everywhere; on other architectures it only reports itself
// skipped. Checks: each backend's CPU check agrees with the compiler's own CPU detection (libgcc's,
// which also asks the OS which register state it saves); automatic selection picks avx512_vnni where
// the CPU has AVX-512 VNNI, else avx2, and never the test-only avx512_vnni_simde; forcing a backend
// the CPU lacks is refused before any of its code runs. Every usable backend runs the models end to
// end in backend_model_test.cc and every kernel shape in kernels_test.cc.
#include <catch2/catch.hpp>

#include <string>

#include "backend/registry.h"

#if defined(__x86_64__)
#include "decoder/model.h"
#include "test_support.h"
#endif

namespace kestrel {
namespace {

#if !defined(__x86_64__)

TEST_CASE("x86 backends", "[x86]") { WARN("SKIPPED: not an x86 build"); }

#else

const Backend* FindBackend(const std::string& name) {
  for (const Backend* b : CompiledBackends()) {
    if (name == b->name) return b;
  }
  return nullptr;
}

bool CompilerSaysAvx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

bool CompilerSaysAvx512Vnni() {
  return CompilerSaysAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

TEST_CASE("x86: CPU checks agree with the compiler's CPU detection", "[x86]") {
  const Backend* avx2 = FindBackend("avx2");
  const Backend* avx512 = FindBackend("avx512_vnni");
  REQUIRE(avx2 != nullptr);
  REQUIRE(avx512 != nullptr);
  CHECK(avx2->cpu_supports() == CompilerSaysAvx2());
  CHECK(avx512->cpu_supports() == CompilerSaysAvx512Vnni());
  if (const Backend* simde = FindBackend("avx512_vnni_simde"); simde != nullptr) {
    // The emulation runs wherever AVX2 does.
    CHECK(simde->cpu_supports() == avx2->cpu_supports());
  }
}

TEST_CASE("x86: automatic selection prefers avx512_vnni, then avx2, never the SIMDe build", "[x86]") {
  const Backend* avx2 = FindBackend("avx2");
  const Backend* avx512 = FindBackend("avx512_vnni");
  REQUIRE(avx2 != nullptr);
  REQUIRE(avx512 != nullptr);
  REQUIRE(avx512->priority > avx2->priority);
  const Backend* simde = FindBackend("avx512_vnni_simde");
  if (simde != nullptr) {
    REQUIRE(simde->priority < avx2->priority);
    REQUIRE(simde->priority > FindBackend("generic")->priority);
  }
  auto best = SelectBackend("");
  REQUIRE(best.ok());
  const std::string expected = avx512->cpu_supports() ? "avx512_vnni" : avx2->cpu_supports() ? "avx2" : "generic";
  REQUIRE(std::string((*best)->name) == expected);
}

TEST_CASE("x86: forcing avx512_vnni on a CPU without it is refused, not run", "[x86]") {
  const Backend* avx512 = FindBackend("avx512_vnni");
  REQUIRE(avx512 != nullptr);
  auto forced = SelectBackend("avx512_vnni");
  if (avx512->cpu_supports()) {
    REQUIRE(forced.ok());
    WARN("SKIPPED refusal check: this CPU has AVX-512 VNNI");
    return;
  }
  REQUIRE_FALSE(forced.ok());
  REQUIRE(absl::IsFailedPrecondition(forced.status()));
  REQUIRE(std::string(forced.status().message()).find("lacks the features") != std::string::npos);
  // Loading a model with it is refused the same way (the load never reaches a kernel).
  auto model = Model::Load(testing::TempPath("never-read.vqf"), ModelOptions{"avx512_vnni"});
  REQUIRE_FALSE(model.ok());
  REQUIRE(absl::IsFailedPrecondition(model.status()));
}

#endif  // __x86_64__

}  // namespace
}  // namespace kestrel
