// Backend registry: each backend declares its name, the CPU features it needs and the weight
// layouts it reads. The best one the CPU supports wins, unless the user names one.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/kernels.h"

namespace kestrel {

struct Backend {
  const char* name;
  int priority;                    // higher wins when several are usable
  bool (*cpu_supports)();          // runtime check (CPUID, auxv); never executes the ISA itself
  bool (*accepts)(DType, Layout);  // weight formats its matmul reads natively
  const KernelTable* kernels;
  // Whether its kernels read q4_0x4 faster regrouped as q4_0x4_lines (format/layout.h; accepts()
  // then takes it): the model loader regroups such tensors where it holds a copy of the file.
  bool wants_q4_0x4_lines;
};

// Every backend compiled into this build, usable or not.
const std::vector<const Backend*>& CompiledBackends();
// The backend called `name` ("" or "auto": the best usable one; the KESTREL_BACKEND environment
// variable is consulted by callers, not here). Errors: unknown name, or the CPU lacks its features.
absl::StatusOr<const Backend*> SelectBackend(const std::string& name);

}  // namespace kestrel
