// The AVX2 kernels compiled again with -mavxvnni, in their own namespace: the quantized products'
// byte sums go through VEX VPDPBUSD (avx2_kernels.cc says how). Registered as the backend
// "avx_vnni" (avx_vnni_backend.cc) for CPUs with AVX-VNNI but without AVX-512 VNNI.
#define KESTREL_AVX2_WITH_VNNI 1
#define KESTREL_AVX2_NAMESPACE avx_vnni
#include "backend_x86/avx2_kernels.cc"
