// Typed key/value metadata stored in a VQF file (model hyperparameters, tokenizer, chat template).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace kestrel {

// Value type tags as stored in the file: never renumber, only append.
enum class MetaType : uint32_t {
  kU32 = 0,
  kI32 = 1,
  kF32 = 2,
  kU64 = 3,
  kBool = 4,
  kString = 5,
  kArray = 6,
};

using MetaValue = std::variant<uint32_t, int32_t, float, uint64_t, bool, std::string, std::vector<uint32_t>,
                               std::vector<int32_t>, std::vector<float>, std::vector<uint64_t>,
                               std::vector<std::string>>;

class Metadata {
 public:
  void Set(std::string key, MetaValue value) { entries_[std::move(key)] = std::move(value); }
  bool Has(std::string_view key) const { return entries_.find(std::string(key)) != entries_.end(); }
  const MetaValue* Find(std::string_view key) const;
  const std::map<std::string, MetaValue>& entries() const { return entries_; }

  // Typed getters: NotFound when absent, InvalidArgument (naming the key) when of another type.
  absl::StatusOr<uint32_t> GetU32(std::string_view key) const;
  absl::StatusOr<int32_t> GetI32(std::string_view key) const;
  absl::StatusOr<float> GetF32(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<const std::vector<std::string>*> GetStringArray(std::string_view key) const;
  absl::StatusOr<const std::vector<float>*> GetF32Array(std::string_view key) const;
  absl::StatusOr<const std::vector<int32_t>*> GetI32Array(std::string_view key) const;

 private:
  template <typename T>
  absl::StatusOr<const T*> GetTyped(std::string_view key, const char* type_name) const;
  std::map<std::string, MetaValue> entries_;
};

// A one-line rendering of a value for kestrel-inspect (arrays are summarized).
std::string MetaValueToString(const MetaValue& value);

}  // namespace kestrel
