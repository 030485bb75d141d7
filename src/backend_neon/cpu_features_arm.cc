// Reads the optional ARMv8 features from the auxiliary vector. getauxval exists in glibc and in
// bionic (Android API 18+), so this builds for both; nothing here is glibc-only.
#include "backend_neon/cpu_features_arm.h"

#if defined(__linux__) || defined(__ANDROID__)
#include <sys/auxv.h>
#endif

namespace kestrel::arm {
namespace {

// Bit values from the Linux UAPI (arch/arm64/include/uapi/asm/hwcap.h), spelled out so old NDK
// headers that lack a name still build.
constexpr unsigned long kHwcapFphp = 1ul << 9;
constexpr unsigned long kHwcapAsimdhp = 1ul << 10;
constexpr unsigned long kHwcapAsimddp = 1ul << 20;

CpuFeatures Detect() {
  CpuFeatures f;
#if (defined(__linux__) || defined(__ANDROID__)) && defined(__aarch64__)
  const unsigned long hwcap = getauxval(AT_HWCAP);
  f.dotprod = (hwcap & kHwcapAsimddp) != 0;
  f.fp16_arithmetic = (hwcap & kHwcapFphp) != 0 && (hwcap & kHwcapAsimdhp) != 0;
#endif
  return f;
}

}  // namespace

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace kestrel::arm
