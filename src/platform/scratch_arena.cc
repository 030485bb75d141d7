#include "platform/scratch_arena.h"

#include <utility>

namespace kestrel {

absl::Status ScratchArena::Allocate(bool huge_pages) {
  constexpr size_t kHugePage = size_t{2} << 20;
  auto buffer = HugePageBuffer::Allocate(bytes_, huge_pages && bytes_ >= kHugePage);  // none when empty
  if (!buffer.ok()) return buffer.status();
  buffer_ = std::move(*buffer);
  for (const auto& bind : bind_) bind(buffer_.data());
  bind_.clear();
  return absl::OkStatus();
}

}  // namespace kestrel
