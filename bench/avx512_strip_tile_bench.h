// The avx512_vnni Q4_0 prefill tile timed alone (avx512_strip_tile_bench.cc), for the kernels
// bench: its instruction mix's own speed, with the strip buffer in L1, the activations in L1 and L2,
// and no pack, prefetch or weights from memory, beside the whole product (gemm_q4_0_q4_0x4). Call
// only where the CPU runs the avx512_vnni backend.
#pragma once

#include <cstdint>

namespace kestrel::avx512_strip_tile_bench {

// Multiply-adds (x2: operations) of one RunPackedStripChunk call.
int64_t PackedStripChunkOps();
// One 32-row strip chunk of 32 packed Q4_0 blocks against a 64-token prompt, as the prefill runs
// it after packing: ten 32 x 6 token tiles and one 32 x 4, with made-up weights and activations.
void RunPackedStripChunk();

}  // namespace kestrel::avx512_strip_tile_bench
