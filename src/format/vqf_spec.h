// On-disk constants of the VQF format. docs/vqf.md is the normative description.
#pragma once

#include <cstdint>

namespace kestrel::vqf {

inline constexpr char kMagic[8] = {'K', 'E', 'S', 'T', 'R', 'V', 'Q', 'F'};
inline constexpr uint32_t kVersionMajor = 1;  // readers refuse any other major version
inline constexpr uint32_t kVersionMinor = 0;  // readers accept any minor version (additions only)
inline constexpr uint32_t kHeaderBytes = 64;

inline constexpr uint64_t kTensorAlignment = 64;   // every tensor's data offset
inline constexpr uint64_t kLayerAlignment = 4096;  // first tensor of each transformer layer

inline constexpr uint32_t kMaxDims = 4;
inline constexpr uint32_t kMaxNameBytes = 256;   // tensor names and metadata keys
inline constexpr uint64_t kMaxTensors = 1 << 20;
inline constexpr uint64_t kMaxMetadataEntries = 1 << 16;

// Header field offsets (all little-endian).
inline constexpr uint64_t kOffMagic = 0;
inline constexpr uint64_t kOffVersionMajor = 8;
inline constexpr uint64_t kOffVersionMinor = 12;
inline constexpr uint64_t kOffHeaderBytes = 16;
inline constexpr uint64_t kOffLayoutFlags = 20;
inline constexpr uint64_t kOffFileBytes = 24;
inline constexpr uint64_t kOffMetadataOffset = 32;
inline constexpr uint64_t kOffMetadataBytes = 40;
inline constexpr uint64_t kOffDirectoryOffset = 48;
inline constexpr uint64_t kOffDirectoryBytes = 56;

}  // namespace kestrel::vqf
