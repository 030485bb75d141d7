// What the AMX units (amx_kernels.cc, amx_bf16_kernels.cc) share: the tile configuration and the
// tile instructions whose operands do not depend on a kernel's tile shapes, in inline assembly of
// our own (why: amx_kernels.cc). Include it only from units compiled with the AMX flags; like
// avx512_weight_blocks.h, everything sits in the unit's own anonymous namespace.
#pragma once

#include <cstdint>
#include <cstring>

namespace kestrel::KESTREL_AVX512_NAMESPACE {
namespace {

// The 64-byte operand of LDTILECFG (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row
  uint8_t rows[16];
};

// Palette 1 with every tile unused; a kernel then sets the rows and bytes per row of its tiles.
inline TileConfig Palette1() {
  TileConfig config;
  std::memset(&config, 0, sizeof(config));
  config.palette_id = 1;
  return config;
}

// In assembly with the whole struct as its operand: GCC 12's _tile_loadconfig lets the compiler
// drop the stores to every field but the first (the tiles were left unconfigured: SIGILL).
inline void LoadTileConfig(const TileConfig& config) { __asm__ volatile("ldtilecfg %0" ::"m"(config)); }

template <int kTile>
inline void TileZero() {
  __asm__ volatile("tilezero %%tmm%c0" ::"i"(kTile));
}

}  // namespace
}  // namespace kestrel::KESTREL_AVX512_NAMESPACE
