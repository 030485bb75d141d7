// Helpers shared by tests: locating ../shared, temporary files.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kestrel::testing {

// Path of a file under the shared folder, or "" when the folder is absent (then the test must
// SKIP or fetch, never pass silently).
inline std::string SharedPath(const std::string& relative) {
  const char* env = std::getenv("KESTREL_SHARED_DIR");
  const std::string root = env != nullptr ? env : KESTREL_SHARED_DIR;
  const std::string path = root + "/" + relative;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? path : "";
}

// A fresh temporary directory for this process, created on first use.
inline std::string TempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/kestrel-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::string(d != nullptr ? d : "/tmp");
  }();
  return dir;
}

inline std::string TempPath(const std::string& name) { return TempDir() + "/" + name; }

inline std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFileBytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace kestrel::testing
