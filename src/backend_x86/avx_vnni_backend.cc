// Registers the AVX-VNNI backend: the AVX2 backend with its quantized products' byte sums done by
// VEX VPDPBUSD (Intel client CPUs from Alder Lake on have AVX-VNNI and no AVX-512; so do AMD's Zen 5,
// where avx512_vnni ranks higher). Compiled with the baseline x86-64 flags.
#include <cpuid.h>

#include "backend/registry.h"
#include "backend_x86/avx2_kernels.h"

namespace kestrel {
namespace avx2 {
const Backend& GetBackend();
}

namespace avx_vnni {
namespace {

// CPUID leaf 7, subleaf 1, EAX bit 4; the register state is AVX2's (YMM), which avx2 checks.
bool CpuHasAvxVnni() {
  if (!avx2::GetBackend().cpu_supports()) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || eax < 1) return false;  // eax: highest subleaf
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax & (1u << 4)) != 0;
}

bool Supported() {
  static const bool supported = CpuHasAvxVnni();
  return supported;
}

const KernelTable& Table() {
  // Only the matmul has byte products; every other kernel is avx2's.
  static const KernelTable table = [] {
    KernelTable t = *avx2::GetBackend().kernels;
    t.matmul = Matmul;
    return t;
  }();
  return table;
}

}  // namespace

const Backend& GetBackend() {
  static const Backend backend = {"avx_vnni", 15, Supported, avx2::Accepts, &Table(), false};
  return backend;
}

}  // namespace avx_vnni
}  // namespace kestrel
