// How much level-2 cache a logical CPU can count on, as an x86 CPU reports it itself (CPUID): the
// fallback for where Linux's sysfs does not say (cache_size.h). Some virtual machines give no cache
// folders in sysfs at all (the Zen 5 CI machine's), and decode's read-ahead, sized from the L2,
// then turned itself off there (bench/README.md, forty-third session).
#pragma once

#include <cstdint>
#include <vector>

namespace kestrel {

// One CPUID answer.
struct CpuidRegisters {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// What the CPU says about its caches, gathered apart from its decoding so that the decoding can be
// tested with any CPU's answers.
struct CpuidCacheReport {
  // Sub-leaves 0, 1, ... of a deterministic cache parameters leaf (4 on Intel; 0x8000001D on AMD
  // where it has TOPOEXT), up to the first of type 0; none where the CPU has no such leaf.
  std::vector<CpuidRegisters> caches;
  // Leaf 0x80000006's ECX: bits 31-16 are the L2 size in KiB (0: not reported).
  uint32_t l2_ecx = 0;
  // Logical CPUs per core (leaf 0xB's SMT level), which share that L2; 1 where not reported.
  int smt_threads = 1;
};

// Bytes of level-2 data or unified cache per logical CPU that shares it: from the deterministic
// parameters where they describe a level-2 cache (its size over the CPUs that share it), else
// from l2_ecx over smt_threads; 0 where neither says.
int64_t L2BytesPerCpu(const CpuidCacheReport& report);

// The running CPU's report; empty (L2BytesPerCpu gives 0) on other architectures than x86.
CpuidCacheReport ReadCpuidCacheReport();

}  // namespace kestrel
