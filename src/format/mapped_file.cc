// A file's bytes in memory: mmap'd in place, or copied onto transparent huge pages (see the header
// for why).
#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kestrel {

namespace {

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
    case FileResidence::kSmallPageCopy:
      return "small-pages";
  }
  return "?";
}

bool MappedFile::HugePageCopyFits(size_t size) {
  if (!TransparentHugePagesEnabled()) return false;
  const uint64_t available = AvailableMemoryBytes();
  return available > 0 && size <= available / 2;
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
  if (residence == FileResidence::kHugePageCopy || residence == FileResidence::kSmallPageCopy) {
    const bool huge = residence == FileResidence::kHugePageCopy;
    auto copy = huge ? HugePageBuffer::Allocate(size) : HugePageBuffer::AllocateSmallPages(size);
    if (!copy.ok()) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, huge ? ": huge-page copy: " : ": small-page copy: ", copy.status().message()));
    }
    const int err = ReadAll(fd, copy->data(), size);
    ::close(fd);
    if (err < 0)
      return absl::DataLossError(absl::StrCat(path, ": file ended before its size (", size, " bytes) was read"));
    if (err > 0) return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(err)));
    copy->Protect();
    return std::unique_ptr<MappedFile>(new MappedFile(path, std::move(*copy), residence));
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": mmap failed: ", std::strerror(err)));
  }
  return std::unique_ptr<MappedFile>(new MappedFile(path, static_cast<const uint8_t*>(p), size));
}

uint64_t MappedFile::HugePageBytes() const { return HugePageBytesIn(data_, size_); }

bool MappedFile::EditCopy(absl::FunctionRef<void(uint8_t* bytes)> edit) {
  if (copy_.data() == nullptr || !copy_.Unprotect()) return false;
  edit(copy_.data());
  copy_.Protect();
  return true;
}

MappedFile::~MappedFile() {
  if (copy_.data() == nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kestrel
