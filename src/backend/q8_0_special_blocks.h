// Which activation blocks the vector Q8_0 quantizers hand to the reference (QuantizeRowQ8_0).
#pragma once

namespace kestrel {

// A block of 32 values that holds a NaN or an infinity (or magnitudes whose sum overflows), or whose
// largest magnitude is under 1e-30 but not 0, where 1 / d may overflow. For such a block the
// reference's products can be NaN or infinite, and what its lround makes of them is the C
// library's; the kernels quantize it with the reference itself, so they are bit-identical to it for
// every input. Compiled with the baseline flags: the x86 kernels call it from units with their own.
bool Q8_0BlockNeedsReference(const float* block);

}  // namespace kestrel
