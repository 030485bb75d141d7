// The x86 backends' selection. Built everywhere; on other architectures it only reports itself
// skipped. Checks: each backend's CPU check agrees with the compiler's own CPU detection (libgcc's,
// which also asks the OS which register state it saves; under clang, for the few feature names
// its __builtin_cpu_supports lacks, this file's own CPUID and XCR0 reading); automatic selection
// picks amx_bf16 where the CPU (and the OS) allow AMX-BF16, else amx_int8 where they allow
// AMX-INT8, else avx512_vnni where the CPU has AVX-512 VNNI, else avx_vnni where it has AVX-VNNI,
// else avx2, else generic, and never the test-only avx512_vnni_simde; forcing a backend the CPU
// lacks is refused before any of its code runs. scripts/test-x86-cpus.sh runs this file (and the
// kernel and model suites) under qemu-x86_64 on CPU models without AVX-512 and without AVX2, with
// KESTREL_EXPECT_BACKEND naming the backend the model must get, so the fallbacks and refusals run
// on every CI machine, not only on the CPUs that lack the features. Every usable backend runs the
// models end to end in backend_model_test.cc and every kernel shape in kernels_test.cc.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "backend/registry.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <cstdint>

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

#if defined(__clang__)
// Clang's __builtin_cpu_supports (14) knows neither f16c, avxvnni nor the AMX features, so under
// clang those few are read here from CPUID and XCR0, written apart from the backends' own checks.
bool CpuidBit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
enum { kEax, kEbx, kEcx, kEdx };
uint64_t SavedState() {  // XCR0, or 0 where the OS does not expose it
  if (!CpuidBit(1, 0, kEcx, 27)) return 0;
  uint32_t lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
bool YmmSaved() { return (SavedState() & 0x6) == 0x6; }
bool TilesSaved() { return (SavedState() & 0x60000) == 0x60000; }
bool HasF16c() { return CpuidBit(1, 0, kEcx, 29) && YmmSaved(); }
bool HasAvxVnni() { return CpuidBit(7, 1, kEax, 4) && YmmSaved(); }
bool HasAmxTileInt8() { return CpuidBit(7, 0, kEdx, 24) && CpuidBit(7, 0, kEdx, 25) && TilesSaved(); }
bool HasAmxBf16() { return CpuidBit(7, 0, kEdx, 22) && TilesSaved(); }
#else
bool HasF16c() { return __builtin_cpu_supports("f16c"); }
bool HasAvxVnni() { return __builtin_cpu_supports("avxvnni"); }
bool HasAmxTileInt8() { return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8"); }
bool HasAmxBf16() { return __builtin_cpu_supports("amx-bf16"); }
#endif

bool CompilerSaysAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c(); }

bool CompilerSaysAvxVnni() { return CompilerSaysAvx2() && HasAvxVnni(); }

bool CompilerSaysAvx512Vnni() {
  return CompilerSaysAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

bool CompilerSaysAmxInt8() { return CompilerSaysAvx512Vnni() && HasAmxTileInt8(); }

bool CompilerSaysAmxBf16() { return CompilerSaysAmxInt8() && HasAmxBf16() && __builtin_cpu_supports("avx512bf16"); }

std::string ExpectedBackend() {
  const char* env = std::getenv("KESTREL_EXPECT_BACKEND");
  return env != nullptr ? env : "";
}

TEST_CASE("x86: CPU checks agree with the compiler's CPU detection", "[x86]") {
  const Backend* avx2 = FindBackend("avx2");
  const Backend* avx_vnni = FindBackend("avx_vnni");
  const Backend* avx512 = FindBackend("avx512_vnni");
  REQUIRE(avx2 != nullptr);
  REQUIRE(avx_vnni != nullptr);
  REQUIRE(avx512 != nullptr);
  CHECK(avx2->cpu_supports() == CompilerSaysAvx2());
  CHECK(avx_vnni->cpu_supports() == CompilerSaysAvxVnni());
  CHECK(avx512->cpu_supports() == CompilerSaysAvx512Vnni());
  // libgcc reads CPUID and XCR0; the backend also asks Linux for the tile data state (5.16 on).
  const Backend* amx = FindBackend("amx_int8");
  REQUIRE(amx != nullptr);
  CHECK(amx->cpu_supports() == CompilerSaysAmxInt8());
  const Backend* amx_bf16 = FindBackend("amx_bf16");
  REQUIRE(amx_bf16 != nullptr);
  CHECK(amx_bf16->cpu_supports() == CompilerSaysAmxBf16());
  if (const Backend* simde = FindBackend("avx512_vnni_simde"); simde != nullptr) {
    // The emulation runs wherever AVX2 does.
    CHECK(simde->cpu_supports() == avx2->cpu_supports());
  }
}

TEST_CASE(
    "x86: automatic selection prefers amx_bf16, then amx_int8, avx512_vnni, avx_vnni, avx2, never the SIMDe build",
    "[x86]") {
  const Backend* generic = FindBackend("generic");
  const Backend* avx2 = FindBackend("avx2");
  const Backend* avx_vnni = FindBackend("avx_vnni");
  const Backend* avx512 = FindBackend("avx512_vnni");
  REQUIRE(generic != nullptr);
  REQUIRE(avx2 != nullptr);
  REQUIRE(avx_vnni != nullptr);
  REQUIRE(avx512 != nullptr);
  REQUIRE(avx512->priority > avx_vnni->priority);
  const Backend* amx = FindBackend("amx_int8");
  REQUIRE(amx != nullptr);
  REQUIRE(amx->priority > avx512->priority);
  const Backend* amx_bf16 = FindBackend("amx_bf16");
  REQUIRE(amx_bf16 != nullptr);
  REQUIRE(amx_bf16->priority > amx->priority);
  REQUIRE(avx_vnni->priority > avx2->priority);
  REQUIRE(avx2->priority > generic->priority);
  const Backend* simde = FindBackend("avx512_vnni_simde");
  if (simde != nullptr) {
    REQUIRE(simde->priority < avx2->priority);
    REQUIRE(simde->priority > generic->priority);
  }
  auto best = SelectBackend("");
  REQUIRE(best.ok());
  const std::string from_features = amx_bf16->cpu_supports()   ? "amx_bf16"
                                    : amx->cpu_supports()      ? "amx_int8"
                                    : avx512->cpu_supports()   ? "avx512_vnni"
                                    : avx_vnni->cpu_supports() ? "avx_vnni"
                                    : avx2->cpu_supports()     ? "avx2"
                                                               : "generic";
  REQUIRE(std::string((*best)->name) == from_features);
  // Under qemu the script names the backend the CPU model must get, so a CPU check that wrongly
  // said yes (or no) to every model cannot pass by agreeing with itself.
  const std::string expected = ExpectedBackend();
  if (expected.empty()) {
    WARN("KESTREL_EXPECT_BACKEND unset: checking consistency only (picked " << (*best)->name << ")");
  } else {
    REQUIRE(std::string((*best)->name) == expected);
  }
}

TEST_CASE("x86: forcing a backend the CPU lacks is refused, not run", "[x86]") {
  for (const char* name : {"avx2", "avx_vnni", "avx512_vnni", "amx_int8", "amx_bf16"}) {
    DYNAMIC_SECTION(name) {
      const Backend* backend = FindBackend(name);
      REQUIRE(backend != nullptr);
      auto forced = SelectBackend(name);
      if (backend->cpu_supports()) {
        REQUIRE(forced.ok());
        WARN("SKIPPED refusal check: this CPU has what " << name << " needs");
      } else {
        REQUIRE_FALSE(forced.ok());
        REQUIRE(absl::IsFailedPrecondition(forced.status()));
        REQUIRE(std::string(forced.status().message()).find("lacks the features") != std::string::npos);
        // Loading a model with it is refused the same way (the load never reaches a kernel).
        auto model = Model::Load(testing::TempPath("never-read.vqf"), ModelOptions{name});
        REQUIRE_FALSE(model.ok());
        REQUIRE(absl::IsFailedPrecondition(model.status()));
      }
    }
  }
}

#endif  // __x86_64__

}  // namespace
}  // namespace kestrel
