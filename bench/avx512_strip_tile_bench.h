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
// it after packing (even_tiles: nine 32 x 6 token tiles and two 32 x 5), or as it did before the
// thirty-eighth session (ten 32 x 6 and one 32 x 4), with made-up weights and activations.
void RunPackedStripChunk(bool even_tiles);

// The Q4_0 decode's address pattern as the tile order walks it (path 0: two adjacent 16-row groups,
// eight q4_0x4 tile streams, each group prefetched kLeadBytes ahead over the step), with a light
// stand-in for its arithmetic (the nibbles split and four VPDPBUSD a tile, no transposes, scales or
// float work) over rows [0, rows) of a q4_0x4 matrix of `blocks` blocks a row (rows a multiple of
// 32, blocks of 8). Its rate from memory is what the kernel's loads and prefetches reach with next to no work
// between them; the kernels bench shows it beside the kernel's (bench/README.md, twenty-third
// session: the kernel reads as fast, so its arithmetic is not what holds it). Returns a value that
// depends on every byte read. by_lines: each unit's 64 quant bytes from aligned loads of the lines
// they lie in (8 blocks of a tile are 9 lines: one new line a block, joined to the one before by
// VALIGNQ) instead of one load across two lines, as the kernel loads them; data 64-byte aligned
// (bench/README.md, thirty-eighth session).
uint64_t ReadDecodePattern(const uint8_t* data, int64_t rows, int64_t blocks, bool by_lines);

}  // namespace kestrel::avx512_strip_tile_bench
