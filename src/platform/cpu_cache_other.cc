// ReadCpuidCacheReport where there is no CPUID (cpu_cache.h): nothing reported, and sysfs alone
// sizes the read-ahead (on AArch64 the cache ID registers are not readable from user space).
#include "platform/cpu_cache.h"

namespace kestrel {

CpuidCacheReport ReadCpuidCacheReport() { return {}; }

}  // namespace kestrel
