// The avx512_vnni Q4_0 prefill tile timed alone (avx512_strip_tile_bench.cc), for the kernels
// bench: its instruction mix's own speed, with the strip buffer in L1, the activations in L1 and L2,
// and no pack, prefetch or weights from memory, beside the whole product (gemm_q4_0_q4_0x4). Call
// only where the CPU runs the avx512_vnni backend.
#pragma once

#include <cstdint>

#include "backend/kernels.h"

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

// Line units, a layout tried as a bench (bench/README.md, thirty-ninth session): the bytes of a
// q4_0x4 matrix (rows a multiple of 4, blocks of 8) regrouped so that no load crosses a cache line.
// Each tile's blocks 8u .. 8u + 7 become one 576-byte run (9 lines, the size of their 8 units): the
// 8 units' scales in the first line, then each unit's 64 quant bytes, a line each.
void RepackToLineUnits(const uint8_t* q4_0x4, uint8_t* out, int64_t rows, int64_t blocks);
// One-token Q4_0 product over line units (64-byte aligned): rows [row_begin, row_end) (32-row steps
// from a multiple of 32), with the tile order's walk and the avx512_vnni decode's arithmetic, so
// its sums are those of the library's kernel to the bit.
void DecodeLineUnits(const uint8_t* data, int64_t blocks, const Activations& x, float* y, int64_t row_begin,
                     int64_t row_end);

}  // namespace kestrel::avx512_strip_tile_bench
