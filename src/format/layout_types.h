// The Layout enumeration alone, free of other dependencies, so ISA-specific kernel files can use
// it without pulling in library headers whose inline code would be compiled with ISA flags.
#pragma once

#include <cstdint>

namespace kestrel {

// Values are stored in files: never renumber, only append.
enum class Layout : uint32_t {
  kPlain = 0,   // row-major; each row is a run of blocks
  kQ4_0x4 = 1,  // Q4_0, 4 rows interleaved per tile (docs/vqf.md)
  kQ8_0x8 = 2,  // Q8_0, 8 rows interleaved per tile (docs/vqf.md)
  // In memory only, never in a file (readers refuse it there; kLayoutCount does not count it):
  // q4_0x4's bytes regrouped so that each tile's 8 blocks fill 9 whole cache lines (format/layout.h).
  // The loader regroups a copy of the file for backends that read it faster (Backend::wants_q4_0x4_lines).
  kQ4_0x4Lines = 3,
};
// Layouts a file may hold: ids below this.
inline constexpr uint32_t kLayoutCount = 3;

// Header bitfield: bit (1 << layout) is set when any tensor uses that layout.
inline constexpr uint32_t LayoutFlag(Layout l) { return 1u << static_cast<uint32_t>(l); }
inline constexpr uint32_t kKnownLayoutFlags = (1u << kLayoutCount) - 1;

}  // namespace kestrel
