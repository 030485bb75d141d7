#include "platform/huge_page_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kestrel {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

absl::StatusOr<HugePageBuffer> HugePageBuffer::Allocate(size_t bytes, bool advise) {
  HugePageBuffer b;
  if (bytes == 0) return b;
  // A huge page needs an aligned 2 MiB span of the mapping: over-allocate by one page and start at
  // the boundary.
  const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  b.region_bytes_ = rounded + kHugePage;
  void* region = ::mmap(nullptr, b.region_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes: ", std::strerror(errno)));
  }
  b.region_ = region;
  b.data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region) + kHugePage - 1) & ~(kHugePage - 1));
  b.size_ = bytes;
#ifdef MADV_HUGEPAGE
  if (advise) ::madvise(b.data_, rounded, MADV_HUGEPAGE);  // advice: declined, the memory is still correct
#endif
  return b;
}

absl::StatusOr<HugePageBuffer> HugePageBuffer::AllocateSmallPages(size_t bytes) {
  auto b = Allocate(bytes, false);
#ifdef MADV_NOHUGEPAGE
  if (b.ok() && b->region_ != nullptr) ::madvise(b->region_, b->region_bytes_, MADV_NOHUGEPAGE);
#endif
  return b;
}

HugePageBuffer::~HugePageBuffer() {
  if (region_ != nullptr) ::munmap(region_, region_bytes_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      region_(std::exchange(other.region_, nullptr)),
      region_bytes_(std::exchange(other.region_bytes_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (region_ != nullptr) ::munmap(region_, region_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    region_ = std::exchange(other.region_, nullptr);
    region_bytes_ = std::exchange(other.region_bytes_, 0);
  }
  return *this;
}

void HugePageBuffer::Protect() {
  if (data_ != nullptr) ::mprotect(data_, (size_ + kHugePage - 1) & ~(kHugePage - 1), PROT_READ);
}

bool HugePageBuffer::Unprotect() {
  return data_ != nullptr && ::mprotect(data_, (size_ + kHugePage - 1) & ~(kHugePage - 1), PROT_READ | PROT_WRITE) == 0;
}

uint64_t HugePageBytesIn(const void* data, size_t size) {
  // smaps lists each memory area as "start-end perms ..." followed by "Key: N kB" lines; sum the
  // huge-page lines of the areas that overlap the span.
  std::ifstream in("/proc/self/smaps");
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + size;
  bool inside = false;
  uint64_t total = 0;
  std::string line;
  while (std::getline(in, line)) {
    uintmax_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%jx-%jx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo < end && hi > begin;
      continue;
    }
    if (!inside) continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "AnonHugePages: %llu kB", &kib) == 1 ||
        std::sscanf(line.c_str(), "FilePmdMapped: %llu kB", &kib) == 1) {
      total += kib * 1024;
    }
  }
  // Areas are whole pages and may extend past the span (a copy's last huge page runs past the end
  // of the file): the span itself holds at most its own size.
  return std::min<uint64_t>(total, size);
}

uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

bool TransparentHugePagesEnabled() {
#ifdef __linux__
  // "always [madvise] never": the bracketed word is the mode in force.
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
#else
  return false;
#endif
}

}  // namespace kestrel
