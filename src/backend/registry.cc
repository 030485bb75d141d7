// The registry: the list of compiled backends and the selection rule. Which backends exist is
// decided by the build (KESTREL_WITH_* definitions set in src/CMakeLists.txt per target CPU).
#include "backend/registry.h"

#include "absl/strings/str_cat.h"

namespace kestrel {

namespace generic {
const Backend& GetBackend();
}
#if defined(KESTREL_WITH_X86)
namespace avx2 {
const Backend& GetBackend();
}
namespace avx_vnni {
const Backend& GetBackend();
}
namespace avx512_vnni {
const Backend& GetBackend();
}
namespace amx_int8 {
const Backend& GetBackend();
}
namespace amx_bf16 {
const Backend& GetBackend();
}
#endif
#if defined(KESTREL_WITH_SIMDE_BACKENDS)
namespace avx512_vnni_simde {
const Backend& GetBackend();
}
#endif
#if defined(KESTREL_WITH_NEON)
namespace neon {
const Backend& GetBackend();
}
namespace neon_dotprod {
const Backend& GetBackend();
}
#endif

const std::vector<const Backend*>& CompiledBackends() {
  static const std::vector<const Backend*> backends = {
      &generic::GetBackend(),
#if defined(KESTREL_WITH_X86)
      &avx2::GetBackend(),
      &avx_vnni::GetBackend(),
      &avx512_vnni::GetBackend(),
      &amx_int8::GetBackend(),
      &amx_bf16::GetBackend(),
#endif
#if defined(KESTREL_WITH_SIMDE_BACKENDS)
      &avx512_vnni_simde::GetBackend(),  // test only, never picked automatically (priority 1)
#endif
#if defined(KESTREL_WITH_NEON)
      &neon::GetBackend(),
      &neon_dotprod::GetBackend(),
#endif
  };
  return backends;
}

absl::StatusOr<const Backend*> SelectBackend(const std::string& name) {
  const Backend* best = nullptr;
  std::string known;
  for (const Backend* b : CompiledBackends()) {
    absl::StrAppend(&known, known.empty() ? "" : ", ", b->name);
    if (name.empty() || name == "auto") {
      if (b->cpu_supports() && (best == nullptr || b->priority > best->priority)) best = b;
    } else if (name == b->name) {
      if (!b->cpu_supports()) {
        return absl::FailedPreconditionError(
            absl::StrCat("backend '", name, "' is compiled in but this CPU lacks the features it needs"));
      }
      return b;
    }
  }
  if (best == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown backend '", name, "' (compiled in: ", known, ")"));
  }
  return best;
}

}  // namespace kestrel
