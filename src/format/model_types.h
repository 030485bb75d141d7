// Small enumerations describing a model, free of other dependencies (kernels use RopeStyle).
#pragma once

namespace kestrel {

enum class Architecture { kLlama, kQwen2, kQwen3 };
enum class RopeStyle { kInterleaved, kHalfSplit };  // pairs (2i, 2i+1) vs (i, i + head_dim/2)

}  // namespace kestrel
