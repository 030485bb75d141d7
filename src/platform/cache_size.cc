#include "platform/cache_size.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "platform/cpu_cache.h"

namespace kestrel {
namespace {

// A non-negative decimal number making up all of `s`; -1 otherwise (or past 2^40, which no cache
// size or CPU number reaches). Digits only: SimpleAtoi alone would also take a sign and spaces.
int64_t ParseCount(absl::string_view s) {
  int64_t v = 0;
  if (s.empty() || !std::all_of(s.begin(), s.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(s, &v) ||
      v > (int64_t{1} << 40)) {
    return -1;
  }
  return v;
}

// Without the whitespace around it (sysfs values end with a newline). Debian's Abseil has its own
// string_view, not std's.
absl::string_view Stripped(std::string_view s) {
  return absl::StripAsciiWhitespace(absl::string_view(s.data(), s.size()));
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  *out = s.str();
  return true;
}

// CPU `cpu`'s share of its level-2 cache in bytes; 0 when sysfs does not tell (an offline CPU
// lists no caches).
int64_t L2ShareOf(const std::string& cpu_dir, int cpu) {
  const std::string dir = cpu_dir + "/cpu" + std::to_string(cpu) + "/cache/";
  for (int index = 0; index < 8; ++index) {
    const std::string at = dir + "index" + std::to_string(index) + "/";
    std::string level, type, size, shared;
    if (!ReadFile(at + "level", &level)) break;
    if (Stripped(level) != "2" || !ReadFile(at + "type", &type)) continue;
    if (Stripped(type) != "Unified" && Stripped(type) != "Data") continue;
    if (!ReadFile(at + "size", &size)) return 0;
    const int64_t bytes = ParseCacheSize(size);
    const int sharers = ReadFile(at + "shared_cpu_list", &shared) ? CountCpuList(shared) : 1;
    return bytes > 0 && sharers > 0 ? bytes / sharers : 0;
  }
  return 0;
}

}  // namespace

int64_t ParseCacheSize(std::string_view raw) {
  absl::string_view text = Stripped(raw);
  int64_t scale = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M' || text.back() == 'G')) {
    scale = text.back() == 'K' ? int64_t{1} << 10 : text.back() == 'M' ? int64_t{1} << 20 : int64_t{1} << 30;
    text.remove_suffix(1);
  }
  const int64_t v = ParseCount(text);
  return v < 0 ? -1 : v * scale;
}

int CountCpuList(std::string_view raw) {
  int64_t count = 0;
  // An empty item (an empty list, ",,", a trailing comma) fails to parse.
  for (absl::string_view item : absl::StrSplit(Stripped(raw), ',')) {
    const size_t dash = item.find('-');
    const int64_t first = ParseCount(item.substr(0, dash));
    const int64_t last = dash == absl::string_view::npos ? first : ParseCount(item.substr(dash + 1));
    if (first < 0 || last < first) return -1;
    count += last - first + 1;
    if (count > (int64_t{1} << 20)) return -1;
  }
  return static_cast<int>(count);
}

int64_t L2BytesPerCoreIn(const std::string& cpu_dir) {
  std::string present;
  if (!ReadFile(cpu_dir + "/present", &present)) return 0;
  const int cpus = std::min(CountCpuList(present), 4096);  // numbered from 0 on Linux
  int64_t smallest = 0;
  // Every CPU, not just the first: on a phone's big.LITTLE SoC the cores' L2 differ, and a thread
  // may run on either kind.
  for (int cpu = 0; cpu < cpus; ++cpu) {
    const int64_t share = L2ShareOf(cpu_dir, cpu);
    if (share > 0) smallest = smallest == 0 ? share : std::min(smallest, share);
  }
  return smallest;
}

int64_t L2BytesPerCore() {
  static const int64_t bytes = [] {
    const int64_t sysfs = L2BytesPerCoreIn("/sys/devices/system/cpu");
    return sysfs > 0 ? sysfs : L2BytesPerCpu(ReadCpuidCacheReport());
  }();
  return bytes;
}

}  // namespace kestrel
