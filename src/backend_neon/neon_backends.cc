// Registers the two ARM backends: "neon" (ARMv8.0-A, every 64-bit ARM CPU) and "neon_dotprod"
// (ARMv8.2-A SDOT, chosen when the auxiliary vector reports dotprod and fp16 arithmetic). Compiled
// with -march=armv8-a like the rest of the library; it only fills tables and reads CPU features.
#include "backend/registry.h"
#include "backend_neon/cpu_features_arm.h"
#include "backend_neon/neon_kernels.h"

namespace kestrel {
namespace neon {
namespace {

bool Always() { return true; }

constexpr KernelTable kKernels = {
    quantize_q8_0__neon, matmul__neon,     rmsnorm__neon,   rope__neon,
    softmax__neon,       silu_mul__neon,   attention__neon, /*attention_tokens=*/nullptr,
    embedding_row__neon, f32_to_f16__neon,
};
constexpr Backend kBackend = {"neon", 10, Always, accepts__neon, &kKernels, false};

}  // namespace

const Backend& GetBackend() { return kBackend; }

}  // namespace neon

namespace neon_dotprod {
namespace {

// The dotprod unit is compiled with +dotprod+fp16, so both must be present.
bool CpuSupports() {
  const arm::CpuFeatures& f = arm::DetectCpuFeatures();
  return f.dotprod && f.fp16_arithmetic;
}

// Only the quantized matmul differs from the plain NEON table.
constexpr KernelTable kKernels = {
    neon::quantize_q8_0__neon, matmul__neondot,        neon::rmsnorm__neon,   neon::rope__neon,
    neon::softmax__neon,       neon::silu_mul__neon,   neon::attention__neon, /*attention_tokens=*/nullptr,
    neon::embedding_row__neon, neon::f32_to_f16__neon,
};
constexpr Backend kBackend = {"neon_dotprod", 20, CpuSupports, neon::accepts__neon, &kKernels, false};

}  // namespace

const Backend& GetBackend() { return kBackend; }

}  // namespace neon_dotprod
}  // namespace kestrel
