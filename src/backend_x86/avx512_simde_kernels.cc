// Test only (built with KESTREL_SIMDE_BACKENDS): the AVX-512 VNNI kernels compiled for AVX2, with
// SIMDe emulating the AVX-512 intrinsics, in their own namespace. Registered as the backend
// "avx512_vnni_simde" (avx512_simde_backend.cc), it lets the conformance tests check the AVX-512
// algorithms on any AVX2 CPU. It and its siblings avx512_simde_attention.cc and
// avx512_simde_activations.cc are the only units that include SIMDe.
#define KESTREL_AVX512_VIA_SIMDE 1
#define KESTREL_AVX512_NAMESPACE avx512_vnni_simde
#include "backend_x86/avx512_kernels.cc"
