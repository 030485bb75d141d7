// Runtime detection of the optional ARMv8 features the ARM backends use, read once from the
// auxiliary vector (Linux and Android). Never executes the features themselves.
#pragma once

namespace kestrel::arm {

struct CpuFeatures {
  bool dotprod = false;        // SDOT/UDOT (HWCAP_ASIMDDP; ARMv8.2-A optional, ARMv8.4-A mandatory)
  bool fp16_arithmetic = false;  // half-precision scalar and vector arithmetic (HWCAP_FPHP and HWCAP_ASIMDHP)
};

// Detected once, then cached. On other systems every feature reads as absent.
const CpuFeatures& DetectCpuFeatures();

}  // namespace kestrel::arm
