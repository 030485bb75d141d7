// Registers the AMX-BF16 backend: amx_int8 with its longer prompts' quantized products in bf16 on
// the tile unit (amx_bf16_kernels.h says what that changes in the results). Detection: everything
// amx_int8 needs (which also asks the OS for the tile state), plus CPUID's AMX-BF16 (for
// TDPBF16PS), AVX512_BF16 (for the f32 to bf16 conversions) and AVX512_VBMI (the byte permutes
// that dequantize). Compiled with the baseline flags.
#include <cpuid.h>

#include <cstdlib>
#include <memory>

#include "backend/registry.h"
#include "backend_x86/amx_bf16_kernels.h"
#include "backend_x86/avx2_kernels.h"

namespace kestrel {
namespace amx_int8 {
const Backend& GetBackend();
}

namespace amx_bf16 {
namespace {

bool CpuHasAmxBf16() {
  if (!amx_int8::GetBackend().cpu_supports()) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx & (1u << 22)) != 0;
  const bool avx512_vbmi = (ecx & (1u << 1)) != 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  const bool avx512_bf16 = (eax & (1u << 5)) != 0;
  return amx_bf16 && avx512_vbmi && avx512_bf16;
}

bool Supported() {
  static const bool supported = CpuHasAmxBf16();
  return supported;
}

const KernelTable& Table() {
  // amx_int8's table with the bf16 prompt products and the rounding the session does for them.
  static const KernelTable table = [] {
    KernelTable t = *amx_int8::GetBackend().kernels;
    t.matmul = Matmul;
    t.f32_to_bf16_tile = F32ToBf16Tile;
    t.bf16_min_tokens_q4_0 = MinTokens(DType::kQ4_0);
    t.bf16_min_tokens_q8_0 = MinTokens(DType::kQ8_0);
    return t;
  }();
  return table;
}

struct Free {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

void* StagingBuffer(size_t bytes) {
  thread_local std::unique_ptr<void, Free> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.reset(std::aligned_alloc(64, rounded));
    if (buffer == nullptr) std::abort();  // as a failed operator new would end the process
    capacity = rounded;
  }
  return buffer.get();
}

// Ranked above amx_int8: on the one AMX machine measured (a 2-vCPU Xeon VM) a Q4_0 64-token
// prefill ran 1.4-1.5x as fast (bench/README.md, thirty-first session); its prompts' products are
// not bit-identical to the reference (amx_bf16_kernels.h), so `--backend amx_int8` is the choice
// where that matters.
const Backend& GetBackend() {
  static const Backend backend = {"amx_bf16", 26, Supported, avx2::Accepts, &Table(), false};
  return backend;
}

}  // namespace amx_bf16
}  // namespace kestrel
