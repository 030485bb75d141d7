// Large anonymous memory advised for transparent huge pages: for what the decoder streams through
// on every token (weights, the KV cache), where 4 KiB pages cost a TLB miss per 4 KiB read
// (bench/README.md measures it). Also, for measuring that cost, the same memory advised against
// huge pages.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace kestrel {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // `bytes` of zero-filled, read-write memory starting on a 2 MiB boundary, advised for huge
  // pages when `advise` (Linux; elsewhere, or when the OS declines, ordinary pages). Pages are
  // committed on first touch, as with malloc - on huge pages 2 MiB at a time. ResourceExhausted
  // when the address space is refused.
  static absl::StatusOr<HugePageBuffer> Allocate(size_t bytes, bool advise = true);
  // The same on 4 KiB pages even where transparent huge pages are "always" (MADV_NOHUGEPAGE).
  static absl::StatusOr<HugePageBuffer> AllocateSmallPages(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Makes the memory read-only: a stray write then faults instead of corrupting it.
  void Protect();
  // Makes it writable again; false (and still read-only) where the OS refuses.
  bool Unprotect();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* region_ = nullptr;  // what to munmap: the aligned span plus the slack before and after
  size_t region_bytes_ = 0;
};

// Whether transparent huge pages are enabled for advised memory (Linux's "always" or "madvise").
bool TransparentHugePagesEnabled();
// How many bytes of [data, data + size) the OS backs with huge pages now, from /proc/self/smaps
// (0 where unknown, e.g. off Linux or under user-mode emulation).
uint64_t HugePageBytesIn(const void* data, size_t size);
// MemAvailable from /proc/meminfo, or 0 where unknown.
uint64_t AvailableMemoryBytes();

}  // namespace kestrel
