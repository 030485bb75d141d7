// Metadata accessors and rendering.
#include "format/metadata.h"

#include "absl/strings/str_cat.h"

namespace kestrel {

const MetaValue* Metadata::Find(std::string_view key) const {
  auto it = entries_.find(std::string(key));
  return it == entries_.end() ? nullptr : &it->second;
}

template <typename T>
absl::StatusOr<const T*> Metadata::GetTyped(std::string_view key, const char* type_name) const {
  const MetaValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("metadata key '", std::string(key), "' is missing"));
  const T* typed = std::get_if<T>(v);
  if (typed == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("metadata key '", std::string(key), "' is not of type ", type_name));
  }
  return typed;
}

#define KESTREL_META_GETTER(Name, Type, TypeName)                                 \
  absl::StatusOr<Type> Metadata::Name(std::string_view key) const {               \
    auto v = GetTyped<Type>(key, TypeName);                                       \
    if (!v.ok()) return v.status();                                               \
    return **v;                                                                   \
  }
KESTREL_META_GETTER(GetU32, uint32_t, "u32")
KESTREL_META_GETTER(GetI32, int32_t, "i32")
KESTREL_META_GETTER(GetF32, float, "f32")
KESTREL_META_GETTER(GetBool, bool, "bool")
KESTREL_META_GETTER(GetString, std::string, "string")
#undef KESTREL_META_GETTER

absl::StatusOr<const std::vector<std::string>*> Metadata::GetStringArray(std::string_view key) const {
  return GetTyped<std::vector<std::string>>(key, "string array");
}
absl::StatusOr<const std::vector<float>*> Metadata::GetF32Array(std::string_view key) const {
  return GetTyped<std::vector<float>>(key, "f32 array");
}
absl::StatusOr<const std::vector<int32_t>*> Metadata::GetI32Array(std::string_view key) const {
  return GetTyped<std::vector<int32_t>>(key, "i32 array");
}

namespace {
template <typename T>
std::string ArraySummary(const std::vector<T>& v, const char* type) {
  std::string s = absl::StrCat("[", type, " x ", v.size(), "]");
  if (!v.empty()) {
    s += " {";
    for (size_t i = 0; i < v.size() && i < 4; ++i) absl::StrAppend(&s, i ? ", " : "", v[i]);
    s += v.size() > 4 ? ", ...}" : "}";
  }
  return s;
}

std::string Quote(const std::string& s, size_t limit) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const char c = s[i];
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else out += c;
  }
  if (s.size() > limit) out += "...";
  return out + "\"";
}
}  // namespace

std::string MetaValueToString(const MetaValue& value) {
  struct Visitor {
    std::string operator()(uint32_t v) const { return absl::StrCat(v); }
    std::string operator()(int32_t v) const { return absl::StrCat(v); }
    std::string operator()(float v) const { return absl::StrCat(v); }
    std::string operator()(uint64_t v) const { return absl::StrCat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return Quote(v, 80); }
    std::string operator()(const std::vector<uint32_t>& v) const { return ArraySummary(v, "u32"); }
    std::string operator()(const std::vector<int32_t>& v) const { return ArraySummary(v, "i32"); }
    std::string operator()(const std::vector<float>& v) const { return ArraySummary(v, "f32"); }
    std::string operator()(const std::vector<uint64_t>& v) const { return ArraySummary(v, "u64"); }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string s = absl::StrCat("[string x ", v.size(), "]");
      if (!v.empty()) {
        s += " {";
        for (size_t i = 0; i < v.size() && i < 4; ++i) absl::StrAppend(&s, i ? ", " : "", Quote(v[i], 16));
        s += v.size() > 4 ? ", ...}" : "}";
      }
      return s;
    }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace kestrel
