// AVX-512 VNNI kernels (defined in avx512_kernels.cc, the only file compiled with the AVX-512 flags).
// Semantics are the KernelTable's (backend/kernels.h); quantized products are bit-identical to the
// generic reference. Float weights go to avx2::Matmul; the weight formats read natively are exactly
// avx2's, so both AVX-512 backends register avx2::Accepts.
#pragma once

#include "backend/kernels.h"

namespace kestrel::avx512_vnni {

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace kestrel::avx512_vnni

// The same source compiled for AVX2, with SIMDe emulating the AVX-512 intrinsics
// (avx512_simde_kernels.cc, built only with the test-only option KESTREL_SIMDE_BACKENDS), so the
// AVX-512 algorithms are tested on CPUs without AVX-512.
namespace kestrel::avx512_vnni_simde {

void Matmul(const MatrixView& w, const Activations& x, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace kestrel::avx512_vnni_simde
