// Test only (built with KESTREL_SIMDE_BACKENDS): the AVX-512 softmax and SiLU gating compiled for
// AVX2, with SIMDe emulating the AVX-512 intrinsics, for the backend "avx512_vnni_simde" (see
// avx512_simde_kernels.cc).
#define KESTREL_AVX512_VIA_SIMDE 1
#define KESTREL_AVX512_NAMESPACE avx512_vnni_simde
#include "backend_x86/avx512_activations.cc"
