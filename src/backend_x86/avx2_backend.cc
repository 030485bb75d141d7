// Registers the AVX2 backend: CPU feature detection (CPUID plus the OS's XSAVE support for the
// YMM state) and its kernel table. Compiled with the baseline x86-64 flags.
#include <cpuid.h>

#include "backend/registry.h"
#include "backend_x86/avx2_kernels.h"

namespace kestrel {
namespace generic {
const Backend& GetBackend();
}

namespace avx2 {
namespace {

bool CpuHasAvx2FmaF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma = (ecx & bit_FMA) != 0, f16c = (ecx & bit_F16C) != 0;
  const bool osxsave = (ecx & bit_OSXSAVE) != 0, avx = (ecx & bit_AVX) != 0;
  if (!fma || !f16c || !osxsave || !avx) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6) != 0x6) return false;  // the OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & bit_AVX2) != 0;
}

bool Supported() {
  static const bool supported = CpuHasAvx2FmaF16c();
  return supported;
}

const KernelTable& Table() {
  // Kernels without an AVX2 version (embedding rows) are the reference ones.
  static const KernelTable table = [] {
    KernelTable t = *generic::GetBackend().kernels;
    t.quantize_q8_0 = QuantizeQ8_0;
    t.quantize_q8_0_summarized = QuantizeQ8_0Summarized;
    t.matmul = Matmul;
    t.rmsnorm = Rmsnorm;
    t.rope = Rope;
    t.softmax = Softmax;
    t.silu_mul = SiluMul;
    t.attention = Attention;
    t.f32_to_f16 = F32ToF16;
    return t;
  }();
  return table;
}

}  // namespace

const Backend& GetBackend() {
  static const Backend backend = {"avx2", 10, Supported, Accepts, &Table(), false};
  return backend;
}

}  // namespace avx2
}  // namespace kestrel
