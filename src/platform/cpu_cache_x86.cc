// ReadCpuidCacheReport on x86 (cpu_cache.h). CPUID needs no instruction-set flags.
#include <cpuid.h>

#include "platform/cpu_cache.h"

namespace kestrel {
namespace {

bool Cpuid(uint32_t leaf, uint32_t subleaf, CpuidRegisters* r) {
  return __get_cpuid_count(leaf, subleaf, &r->eax, &r->ebx, &r->ecx, &r->edx) != 0;
}

// Sub-leaves of a deterministic cache parameters leaf up to the first of type 0 (at most 16).
std::vector<CpuidRegisters> CacheLeaves(uint32_t leaf) {
  std::vector<CpuidRegisters> caches;
  CpuidRegisters r;
  for (uint32_t sub = 0; sub < 16 && Cpuid(leaf, sub, &r) && (r.eax & 0x1f) != 0; ++sub) caches.push_back(r);
  return caches;
}

}  // namespace

CpuidCacheReport ReadCpuidCacheReport() {
  CpuidCacheReport report;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr), max_extended = __get_cpuid_max(0x80000000, nullptr);
  CpuidRegisters r;
  // Leaf 4 is Intel's; AMD answers it with zeros, and describes its caches in 0x8000001D when
  // leaf 0x80000001 sets TOPOEXT (ECX bit 22), which some hypervisors clear.
  if (max_leaf >= 4) report.caches = CacheLeaves(4);
  if (report.caches.empty() && max_extended >= 0x8000001D && Cpuid(0x80000001, 0, &r) && (r.ecx >> 22) & 1) {
    report.caches = CacheLeaves(0x8000001D);
  }
  if (max_extended >= 0x80000006 && Cpuid(0x80000006, 0, &r)) report.l2_ecx = r.ecx;
  // Leaf 0xB's first level is the SMT one (type 1 in ECX bits 15-8) where the CPU reports it.
  if (max_leaf >= 0xB && Cpuid(0xB, 0, &r) && ((r.ecx >> 8) & 0xff) == 1 && (r.ebx & 0xffff) > 0) {
    report.smt_threads = static_cast<int>(r.ebx & 0xffff);
  }
  return report;
}

}  // namespace kestrel
