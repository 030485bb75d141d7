// A whole file's bytes in memory, read-only: mapped from the page cache, or copied into memory
// backed by 2 MiB pages (POSIX; the copy's huge pages are Linux's transparent huge pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "platform/huge_page_buffer.h"

namespace kestrel {

// How a file's bytes are held. Decode reads every weight once per token. Measured on the CI host
// (bench/README.md): Q4_0 decode 20 -> 32 t/s at one thread with the weights copied onto 2 MiB
// pages instead of mapped, prefill +20%; but most of that was the page cache's state (a file just
// written read 2-10x slower through a mapping than after a fresh sequential read), and a copy on
// 4 KiB anonymous pages decoded within a few percent of the huge-page copy.
enum class FileResidence {
  kAuto,          // kHugePageCopy when HugePageCopyFits(size), else kMapped
  kMapped,        // mmap: zero-copy, shared with the page cache, paged in on first touch
  kHugePageCopy,  // read into private anonymous memory advised for transparent huge pages
  // Read into private anonymous memory advised against huge pages: 4 KiB pages as kMapped's, but
  // not the page cache's. For measurement only (kestrel-bench --weights small-pages): it tells the
  // cost of small pages from that of file-backed ones; auto never chooses it.
  kSmallPageCopy,
};

// "auto", "mapped", "huge-pages", "small-pages".
const char* FileResidenceName(FileResidence residence);

class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                          FileResidence residence = FileResidence::kMapped);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // kMapped, kHugePageCopy or kSmallPageCopy: what Open chose.
  FileResidence residence() const { return residence_; }
  // Bytes of the file the kernel currently holds on huge pages (from /proc/self/smaps; 0 where it
  // cannot tell). Huge pages are a request, not a promise: fragmented memory gives fewer.
  uint64_t HugePageBytes() const;
  // Where the bytes are a private copy (kHugePageCopy, kSmallPageCopy): makes them writable, calls
  // edit with their start, and makes them read-only again; returns whether it did (false, without
  // calling edit, for a mapped file or where the OS refuses to make the copy writable).
  bool EditCopy(absl::FunctionRef<void(uint8_t* bytes)> edit);

  // Whether kAuto copies a file of `size` bytes: Linux with transparent huge pages not disabled,
  // and the file within half of the memory available now (the copy is not reclaimable as page
  // cache is, so a model near the memory size stays mapped).
  static bool HugePageCopyFits(size_t size);

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size), residence_(FileResidence::kMapped) {}
  MappedFile(std::string path, HugePageBuffer copy, FileResidence residence)
      : path_(std::move(path)), data_(copy.data()), size_(copy.size()), residence_(residence), copy_(std::move(copy)) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
  FileResidence residence_;
  HugePageBuffer copy_;  // holds the bytes of a copy; empty for kMapped
};

}  // namespace kestrel
