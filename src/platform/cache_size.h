// How much level-2 cache a core can count on, from what Linux reports in sysfs, or where sysfs does
// not say, from what the CPU reports itself (cpu_cache.h). Decode's read-ahead (decoder/session.h)
// sizes itself from it: lines prefetched beyond a core's share of L2 would push out the ones it is
// about to read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kestrel {

// The smallest, over the CPUs Linux lists, of one CPU's level-2 data (or unified) cache divided
// among the CPUs that share it. Where sysfs does not say (another OS, a container or virtual
// machine hiding it), the running CPU's own report (CPUID on x86: L2BytesPerCpu); 0 where neither
// says. Read once and kept.
int64_t L2BytesPerCore();
// The same, read now from a sysfs CPU folder laid out as /sys/devices/system/cpu (for tests).
int64_t L2BytesPerCoreIn(const std::string& cpu_dir);

// A sysfs cache size ("2048K", "1M", "512") in bytes; -1 when malformed.
int64_t ParseCacheSize(std::string_view text);
// How many CPUs a sysfs CPU list names ("0-3,6" is 5); -1 when malformed.
int CountCpuList(std::string_view text);

}  // namespace kestrel
