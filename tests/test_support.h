// Helpers shared by tests: locating ../shared, temporary files.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

// A fresh temporary directory for this process (under $TMPDIR, else /tmp), created on first use
// and removed with everything in it when the process exits normally: ctest runs every test case
// as its own process, so leaving them would pile up thousands of directories per run.
class ProcessTempDir {
 public:
  ProcessTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kestrel-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ProcessTempDir() {
    std::error_code ignored;  // nothing to report to at exit; a leftover directory is harmless
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Fails loudly (an empty path would scatter files into the working directory).
inline std::string TempDir() {
  static const ProcessTempDir dir;
  if (dir.path().empty()) {
    std::perror("kestrel tests: cannot create a temporary directory");
    std::abort();
  }
  return dir.path();
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
