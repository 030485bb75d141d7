// Registers the AVX-512 VNNI backend: CPU feature detection (CPUID plus the OS's XSAVE support for
// the opmask and ZMM state) and its kernel table. Compiled with the baseline x86-64 flags.
#include <cpuid.h>

#include "backend/registry.h"
#include "backend_x86/avx2_kernels.h"
#include "backend_x86/avx512_kernels.h"

namespace kestrel {
namespace avx2 {
const Backend& GetBackend();
}

namespace avx512_vnni {
namespace {

// The kernel file is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c, and
// the table reuses the AVX2 kernels, so all of those must be present.
bool CpuHasAvx512Vnni() {
  if (!avx2::GetBackend().cpu_supports()) return false;  // AVX2, FMA, F16C, OSXSAVE, XMM/YMM state
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  // The OS saves XMM (bit 1), YMM (2), the opmask registers (5), ZMM0-15's upper halves (6) and ZMM16-31 (7).
  if ((xcr0_lo & 0xE6) != 0xE6) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool f = (ebx & bit_AVX512F) != 0, bw = (ebx & bit_AVX512BW) != 0, vl = (ebx & bit_AVX512VL) != 0;
  const bool vnni = (ecx & bit_AVX512VNNI) != 0;
  return f && bw && vl && vnni;
}

bool Supported() {
  static const bool supported = CpuHasAvx512Vnni();
  return supported;
}

const KernelTable& Table() {
  // The matmul, attention, softmax, SiLU gating, RMSNorm and activation quantization have AVX-512
  // versions; the rest are the AVX2 kernels.
  static const KernelTable table = [] {
    KernelTable t = *avx2::GetBackend().kernels;
    t.matmul = Matmul;
    t.attention = Attention;
    t.attention_tokens = AttentionTokens;
    t.softmax = Softmax;
    t.quantize_q8_0 = QuantizeQ8_0;
    t.quantize_q8_0_summarized = QuantizeQ8_0Summarized;
    t.q4_0_offset_run = kQ4_0OffsetRun;
    t.silu_mul = SiluMul;
    t.rmsnorm = Rmsnorm;
    return t;
  }();
  return table;
}

}  // namespace

const Backend& GetBackend() {
  static const Backend backend = {"avx512_vnni", 20, Supported, Accepts, &Table(), true};
  return backend;
}

}  // namespace avx512_vnni
}  // namespace kestrel
