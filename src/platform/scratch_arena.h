// Working arrays laid out together in one allocation, advised for 2 MiB pages where the OS gives
// them. Why: a 64-token prefill of a Qwen3-1.7B-sized model writes and rereads ~7 MB of per-batch
// arrays in every layer (product outputs, quantized inputs), and its kernels stride across them a
// token row at a time, so on 4 KiB pages nearly every row is its own TLB entry; on huge pages the
// prefill ran ~2% faster (bench/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "platform/huge_page_buffer.h"

namespace kestrel {

// A view of `size()` elements of a ScratchArena; empty until the arena is allocated.
template <typename T>
class ScratchArray {
 public:
  T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  friend class ScratchArena;
  T* data_ = nullptr;
  size_t size_ = 0;
};

class ScratchArena {
 public:
  // Room for `count` zero-initialized elements of T, 64-byte aligned, pointed to by *array once
  // Allocate succeeds. *array must stay where it is until then.
  template <typename T>
  void Add(ScratchArray<T>* array, size_t count) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 64, "plain data only");
    const size_t offset = (bytes_ + 63) & ~size_t{63};
    bytes_ = offset + count * sizeof(T);
    array->size_ = count;
    bind_.push_back([array, offset](uint8_t* base) { array->data_ = reinterpret_cast<T*>(base + offset); });
  }
  // Allocates every array added, on huge pages when `huge_pages` and the arrays come to at least
  // one huge page (under that they would cost a whole 2 MiB for no fewer TLB entries).
  // ResourceExhausted when the memory is refused.
  absl::Status Allocate(bool huge_pages);

  const HugePageBuffer& buffer() const { return buffer_; }

 private:
  size_t bytes_ = 0;
  std::vector<std::function<void(uint8_t*)>> bind_;
  HugePageBuffer buffer_;
};

}  // namespace kestrel
