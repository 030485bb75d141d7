// A file's bytes in memory: mmap'd in place, or copied onto transparent huge pages (see the header
// for why).
#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kestrel {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// The first line of `path`, or "" when it cannot be read.
std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// MemAvailable from /proc/meminfo in bytes, or 0 when unknown.
uint64_t AvailableMemory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

// Reads bytes [begin, end) of the file into out + begin with pread (EINTR retried). 0 on success,
// else errno, or -1 when the file ended early (it shrank since fstat).
int ReadRange(int fd, uint8_t* out, size_t begin, size_t end) {
  while (begin < end) {
    const size_t want = end - begin < (size_t{64} << 20) ? end - begin : (size_t{64} << 20);
    const ssize_t got = ::pread(fd, out + begin, want, static_cast<off_t>(begin));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    if (got == 0) return -1;
    begin += static_cast<size_t>(got);
  }
  return 0;
}

// The whole file, in up to 4 parts read side by side: most of the time goes to faulting in and
// zeroing the fresh pages, which threads share out (1.75 GB: 0.8-3.7 s on one thread here).
int ReadAll(int fd, uint8_t* out, size_t size) {
  const unsigned cores = std::thread::hardware_concurrency();
  const size_t parts = std::max<size_t>(1, std::min<size_t>({4, cores == 0 ? 1 : cores, size >> 26}));
  std::vector<int> results(parts, 0);
  std::vector<std::thread> readers;
  for (size_t i = 1; i < parts; ++i) {
    readers.emplace_back([&, i] { results[i] = ReadRange(fd, out, size * i / parts, size * (i + 1) / parts); });
  }
  results[0] = ReadRange(fd, out, 0, size / parts);
  for (auto& r : readers) r.join();
  for (int r : results) {
    if (r != 0) return r;
  }
  return 0;
}

}  // namespace

const char* FileResidenceName(FileResidence residence) {
  switch (residence) {
    case FileResidence::kAuto:
      return "auto";
    case FileResidence::kMapped:
      return "mapped";
    case FileResidence::kHugePageCopy:
      return "huge-pages";
  }
  return "?";
}

bool MappedFile::HugePageCopyFits(size_t size) {
#ifdef __linux__
  // "always [madvise] never": the bracketed word is the mode in force.
  const std::string mode = FirstLine("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[always]") == std::string::npos && mode.find("[madvise]") == std::string::npos) return false;
  const uint64_t available = AvailableMemory();
  return available > 0 && size <= available / 2;
#else
  (void)size;
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, FileResidence residence) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": file is empty"));
  }
  if (residence == FileResidence::kAuto) {
    residence = HugePageCopyFits(size) ? FileResidence::kHugePageCopy : FileResidence::kMapped;
  }
  if (residence == FileResidence::kHugePageCopy) {
    // Whole huge pages from a 2 MiB boundary: a huge page needs an aligned 2 MiB span of the
    // mapping, so the region is over-allocated by one page and the copy starts at the boundary.
    const size_t rounded = (size + kHugePage - 1) & ~(kHugePage - 1);
    const size_t region_bytes = rounded + kHugePage;
    void* region = ::mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": cannot allocate ", size, " bytes for a huge-page copy: ", std::strerror(err)));
    }
    auto* data = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region) + kHugePage - 1) & ~(kHugePage - 1));
#ifdef MADV_HUGEPAGE
    ::madvise(data, rounded, MADV_HUGEPAGE);  // advice: without it (or when refused) the copy is still correct
#endif
    const int err = ReadAll(fd, data, size);
    ::close(fd);
    if (err != 0) {
      ::munmap(region, region_bytes);
      if (err < 0)
        return absl::DataLossError(absl::StrCat(path, ": file ended before its size (", size, " bytes) was read"));
      return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(err)));
    }
    ::mprotect(data, rounded, PROT_READ);  // read-only like a mapping: a stray write faults
    return std::unique_ptr<MappedFile>(
        new MappedFile(path, data, size, region, region_bytes, FileResidence::kHugePageCopy));
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": mmap failed: ", std::strerror(err)));
  }
  return std::unique_ptr<MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(p), size, p, size, FileResidence::kMapped));
}

uint64_t MappedFile::HugePageBytes() const {
  // smaps lists each memory area as "start-end perms ..." followed by "Key: N kB" lines; sum the
  // huge-page lines of the areas that overlap the file's bytes.
  std::ifstream in("/proc/self/smaps");
  const auto begin = reinterpret_cast<uintptr_t>(data_), end = begin + size_;
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
  return total;
}

MappedFile::~MappedFile() { ::munmap(region_, region_bytes_); }

}  // namespace kestrel
