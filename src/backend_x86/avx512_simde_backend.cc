// Test only (built with KESTREL_SIMDE_BACKENDS): registers "avx512_vnni_simde", the AVX-512 VNNI
// kernels emulated by SIMDe on AVX2 (avx512_simde_kernels.cc). It needs what the AVX2 backend needs,
// and its priority (1) is below avx2's (10) but above generic's (0): automatic selection never picks
// it where avx2 runs, and it runs only when named (KESTREL_BACKEND, tests).
#include "backend/registry.h"
#include "backend_x86/avx2_kernels.h"
#include "backend_x86/avx512_kernels.h"

namespace kestrel {
namespace avx2 {
const Backend& GetBackend();
}

namespace avx512_vnni_simde {
namespace {

bool Supported() { return avx2::GetBackend().cpu_supports(); }

const KernelTable& Table() {
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
  static const Backend backend = {"avx512_vnni_simde", 1, Supported, Accepts, &Table(), true};
  return backend;
}

}  // namespace avx512_vnni_simde
}  // namespace kestrel
