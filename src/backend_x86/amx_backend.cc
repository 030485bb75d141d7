// Registers the AMX-INT8 backend: the avx512_vnni backend with its quantized prefill products on
// the tile unit (Sapphire Rapids and later Xeons). Detection: CPUID (AMX-TILE, AMX-INT8), the OS's
// XSAVE support for the tile state (XCR0 bits 17 and 18) on top of everything avx512_vnni needs,
// and, on Linux, the process's permission to use the 8 KB tile data state, which must be asked for
// (arch_prctl ARCH_REQ_XCOMP_PERM) before the first tile instruction or that instruction faults.
// Compiled with the baseline x86-64 flags.
#include <cpuid.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backend/registry.h"
#include "backend_x86/amx_kernels.h"
#include "backend_x86/avx2_kernels.h"

namespace kestrel {
namespace avx512_vnni {
const Backend& GetBackend();
}

namespace amx_int8 {
namespace {

bool CpuHasAmxInt8() {
  if (!avx512_vnni::GetBackend().cpu_supports()) return false;  // AVX-512 F/BW/VL/VNNI, their register state
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = (edx & (1u << 24)) != 0, int8 = (edx & (1u << 25)) != 0;
  if (!tile || !int8) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);  // XTILECFG, XTILEDATA
  if ((xcr0_lo & kTileState) != kTileState) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  // Granted for the whole process, once; refused on kernels before 5.16 (then AMX is not used).
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  return true;
#else
  return false;  // other systems' permission rules are not handled yet
#endif
}

bool Supported() {
  static const bool supported = CpuHasAmxInt8();
  return supported;
}

const KernelTable& Table() {
  // Only the matmul differs from avx512_vnni's table.
  static const KernelTable table = [] {
    KernelTable t = *avx512_vnni::GetBackend().kernels;
    t.matmul = Matmul;
    return t;
  }();
  return table;
}

}  // namespace

// Ranked above avx512_vnni: on the one AMX machine measured so far (a 2-vCPU Xeon VM) its prefill
// products ran 1.1-1.4x as fast in the kernels bench and a Q4_0 64-token prefill 1.1-1.4x end to
// end (bench/README.md). Decode is avx512_vnni's either way.
const Backend& GetBackend() {
  static const Backend backend = {"amx_int8", 25, Supported, avx2::Accepts, &Table(), false};
  return backend;
}

}  // namespace amx_int8
}  // namespace kestrel
