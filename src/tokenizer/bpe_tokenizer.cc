// Byte-level BPE, step for step as Hugging Face `tokenizers` (added-token split, normalizer, Split
// regex with "Isolated" behaviour, ByteLevel mapping, BPE merges with a rank-ordered queue).
#include "tokenizer/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kestrel {
namespace {

// The split patterns of the pre-tokenizers known by name (GGUF files store a name, not a regex).
constexpr char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool LooksLikeName(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

absl::StatusOr<std::string> ResolvePattern(const std::string& pre) {
  if (pre.empty() || pre == "ByteLevel" || pre == "gpt2" || pre == "default") return std::string(kGpt2Pattern);
  if (pre == "llama-bpe" || pre == "llama3") return std::string(kLlama3Pattern);
  if (pre == "qwen2" || pre == "qwen3") return std::string(kQwen2Pattern);
  if (LooksLikeName(pre)) {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer: unknown pre-tokenizer '", pre, "' (known: ByteLevel, gpt2, llama-bpe, qwen2, or a regex)"));
  }
  return pre;
}

// Oniguruma (the reference's engine) matches \s against Unicode White_Space; PCRE2's UCP \s also
// takes U+180E. Spelling the property out makes both engines agree.
std::string SpellOutWhitespace(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 's') out += "\\p{White_Space}";
      else if (c == 'S') out += "\\P{White_Space}";
      else out += {'\\', c};
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// GPT-2's reversible map from bytes to printable code points.
std::array<uint32_t, 256> ByteToCodepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    map[b] = printable ? b : 256 + extra++;
  }
  return map;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes the strict UTF-8 character at text[pos]: its length, or 0 when the bytes there are invalid.
size_t DecodeUtf8(std::string_view text, size_t pos, uint32_t* cp) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t left = text.size() - pos;
  const unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  uint32_t v = 0, min = 0;
  if ((c & 0xE0) == 0xC0) n = 2, v = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) n = 3, v = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (left < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[k] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// Rust's char::is_whitespace (the Unicode White_Space property), used by lstrip / rstrip.
bool IsWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// The regex \w that single_word tokens test their neighbours against.
bool IsWordChar(uint32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// The character that ends at `end` (walking back over continuation bytes); false when invalid.
bool CharBefore(std::string_view text, size_t end, uint32_t* cp, size_t* start) {
  size_t s = end;
  while (s > 0 && end - s < 4) {
    --s;
    if ((static_cast<unsigned char>(text[s]) & 0xC0) != 0x80) break;
  }
  if (s == end) return false;
  const size_t n = DecodeUtf8(text, s, cp);
  *start = s;
  return n != 0 && s + n == end;
}

// Whether normalization leaves `cp` as it is and a text can be cut before it without changing the
// result: true for a starter that never combines with what precedes it. For NFC that holds below
// U+0300 and in the big blocks of CJK, kana, Hangul syllables and emoji; for the other forms only ASCII.
bool Inert(uint32_t cp, bool nfc) {
  if (cp < 0x80) return true;
  if (!nfc) return false;
  return cp < 0x300 || (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0x3041 && cp <= 0x3096) ||
         (cp >= 0x30A1 && cp <= 0x30FA) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
         (cp >= 0xFF01 && cp <= 0xFF60) || (cp >= 0x1F300 && cp <= 0x1FAFF);
}

// Normalizes `text` into *out (utf8proc `options`), only around the characters that may change:
// the runs between inert characters, each with the character before it (which a combining mark may
// join). Invalid bytes pass through unchanged. Returns false when nothing needed normalizing.
bool NormalizeInto(std::string_view text, int options, std::string* out) {
  const bool nfc = options == (UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  size_t copied = 0, previous = 0, pos = 0;
  bool changed = false;
  while (pos < text.size()) {
    uint32_t cp = 0;
    size_t len = DecodeUtf8(text, pos, &cp);
    if (len == 0 || Inert(cp, nfc)) {
      previous = pos;
      pos += len == 0 ? 1 : len;
      continue;
    }
    // previous is the start of the character before (inert, or an invalid byte: then start here).
    size_t start = pos;
    if (pos > 0 && DecodeUtf8(text, previous, &cp) != 0) start = previous;
    size_t end = pos;
    while (end < text.size() && (len = DecodeUtf8(text, end, &cp)) != 0 && !Inert(cp, nfc)) end += len;
    if (!changed) {
      out->clear();
      changed = true;
    }
    out->append(text.data() + copied, start - copied);
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t m = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + start),
                                            static_cast<utf8proc_ssize_t>(end - start), &mapped,
                                            static_cast<utf8proc_option_t>(options));
    if (m >= 0) {
      out->append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(m));
    } else {
      out->append(text.data() + start, end - start);  // only on allocation failure
    }
    std::free(mapped);
    copied = previous = pos = end;
  }
  if (changed) out->append(text.data() + copied, text.size() - copied);
  return changed;
}

}  // namespace

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

// Per-call match state (PCRE2 match data must not be shared between threads).
class BpeTokenizer::Scratch {
 public:
  Scratch() : data_(pcre2_match_data_create(1, nullptr)) {}
  ~Scratch() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // Finds the next match at or after `offset`: true with [*start, *end), false when none.
  absl::StatusOr<bool> Find(const pcre2_code* code, std::string_view text, size_t offset, size_t* start, size_t* end) {
    if (data_ == nullptr) return absl::ResourceExhaustedError("tokenizer: out of memory for regex match data");
    for (;;) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset, 0, data_,
                                 context_);
      if (rc == PCRE2_ERROR_NOMATCH) return false;
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_ == nullptr) {
        // Pathological input (a very long run for a backtracking group): retry with a larger stack.
        context_ = pcre2_match_context_create(nullptr);
        stack_ = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
        if (context_ == nullptr || stack_ == nullptr) return absl::ResourceExhaustedError("tokenizer: out of memory");
        pcre2_jit_stack_assign(context_, nullptr, stack_);
        continue;
      }
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        return absl::ResourceExhaustedError(
            absl::StrCat("tokenizer: split regex failed: ", reinterpret_cast<const char*>(message)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
      *start = ov[0];
      *end = ov[1];
      return true;
    }
  }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

void BpeTokenizer::Trie::Insert(const std::string& text, int32_t index) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t node = 0;
  for (unsigned char c : text) {
    int32_t next = -1;
    for (const auto& [byte, child] : nodes[node].children) {
      if (byte == c) next = child;
    }
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(c, next);
      nodes.emplace_back();
    }
    node = next;
  }
  // The first added token with a given text wins, as in Hugging Face's added vocabulary.
  if (nodes[node].token < 0) nodes[node].token = index;
  first[static_cast<unsigned char>(text[0])] = true;
}

int32_t BpeTokenizer::Trie::Longest(std::string_view text, size_t* length) const {
  int32_t node = 0, best = -1;
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t next = -1;
    for (const auto& [byte, child] : nodes[node].children) {
      if (byte == static_cast<unsigned char>(text[i])) next = child;
    }
    if (next < 0) break;
    node = next;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      *length = i + 1;
    }
  }
  return best;
}

BpeTokenizer::BpeTokenizer(TokenizerData data) : Tokenizer(std::move(data)) {}
BpeTokenizer::~BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(TokenizerData data) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(data)));
  if (auto s = t->Init(); !s.ok()) return s;
  return t;
}

absl::Status BpeTokenizer::Init() {
  const auto& tokens = data_.tokens;
  const auto n = static_cast<int32_t>(tokens.size());

  auto pattern = ResolvePattern(data_.pre_tokenizer);
  if (!pattern.ok()) return pattern.status();
  pattern_ = SpellOutWhitespace(*pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  regex_ = std::make_unique<Regex>();
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
  if (regex_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: the split regex does not compile at offset ", error_offset,
                                                   ": ", reinterpret_cast<const char*>(message)));
  }
  // Without JIT (an unsupported CPU) PCRE2 falls back to its interpreter: slower, same results.
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);

  if (data_.normalizer == "NFC") normalize_options_ = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  else if (data_.normalizer == "NFD") normalize_options_ = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
  else if (data_.normalizer == "NFKC") normalize_options_ = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  else if (data_.normalizer == "NFKD") normalize_options_ = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;

  // Added tokens; files without the list treat every control / user-defined token as one.
  std::vector<bool> is_added(tokens.size(), false);
  if (!data_.added_ids.empty()) {
    for (size_t i = 0; i < data_.added_ids.size(); ++i) {
      added_.push_back({tokens[data_.added_ids[i]], data_.added_ids[i], data_.added_flags[i]});
    }
  } else {
    for (int32_t id = 0; id < n; ++id) {
      const auto type = static_cast<TokenType>(data_.token_types[id]);
      if (tokens[id].empty()) continue;
      if (type == TokenType::kControl) added_.push_back({tokens[id], id, kAddedSpecial});
      if (type == TokenType::kUserDefined) added_.push_back({tokens[id], id, 0});
    }
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    is_added[added_[i].id] = true;
    (added_[i].flags & kAddedNormalized ? normalized_trie_ : raw_trie_).Insert(added_[i].text, static_cast<int32_t>(i));
  }

  // The model's vocabulary by text: normal tokens first, so they win over added duplicates.
  absl::flat_hash_map<std::string_view, int32_t> ids;
  ids.reserve(tokens.size());
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t id = 0; id < n; ++id) {
      const bool normal = !is_added[id] && data_.token_types[id] != static_cast<int32_t>(TokenType::kUnknown);
      if (!tokens[id].empty() && normal == (pass == 0)) ids.emplace(tokens[id], id);
    }
  }
  auto find = [&](std::string_view text) {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  };

  const std::array<uint32_t, 256> byte_cp = ByteToCodepoint();
  std::array<int16_t, 324> cp_byte;
  cp_byte.fill(-1);
  for (int b = 0; b < 256; ++b) {
    cp_byte[byte_cp[b]] = static_cast<int16_t>(b);
    std::string text;
    AppendUtf8(byte_cp[b], &text);
    byte_ids_[b] = find(text);
  }

  merges_.reserve(data_.merges.size());
  for (size_t rank = 0; rank < data_.merges.size(); ++rank) {
    const std::string& m = data_.merges[rank];
    const size_t space = m.find(' ');
    if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge #", rank, " '", m, "' is not \"left right\""));
    }
    const int32_t left = find(std::string_view(m).substr(0, space));
    const int32_t right = find(std::string_view(m).substr(space + 1));
    std::string joined = m.substr(0, space) + m.substr(space + 1);
    const int32_t result = find(joined);
    // Hugging Face refuses such files; a merge that cannot apply is skipped here.
    if (left < 0 || right < 0 || result < 0) continue;
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    merges_[key] = Merge{static_cast<int32_t>(rank), result};  // a repeated pair keeps its last rank
  }

  // What each id decodes to. Byte-level text maps back to bytes; a token with a character outside
  // the map gives its text unchanged (as the reference decoder does).
  const bool ignore_merges = data_.ignore_merges || data_.pre_tokenizer == "llama-bpe";
  pieces_.resize(tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = tokens[id];
    if (is_added[id]) {
      pieces_[id] = text;
      continue;
    }
    std::string bytes;
    bool clean = true;
    for (size_t pos = 0; pos < text.size() && clean;) {
      uint32_t cp = 0;
      const size_t len = DecodeUtf8(text, pos, &cp);
      clean = len != 0 && cp < cp_byte.size() && cp_byte[cp] >= 0;
      if (clean) bytes.push_back(static_cast<char>(cp_byte[cp]));
      pos += len;
    }
    if (ignore_merges && clean && !bytes.empty() && data_.token_types[id] != static_cast<int32_t>(TokenType::kUnknown)) {
      words_.emplace(bytes, id);
    }
    pieces_[id] = clean ? std::move(bytes) : text;
  }
  return absl::OkStatus();
}

template <typename GapFn>
absl::Status BpeTokenizer::SplitAdded(std::string_view text, const Trie& trie, bool parse_special,
                                      std::vector<int32_t>* out, GapFn&& gap) const {
  if (text.empty()) return absl::OkStatus();
  if (trie.nodes.empty()) return gap(text);
  size_t start_offset = 0;  // end of the previous split
  size_t i = 0;
  while (i < text.size()) {
    if (!trie.first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    size_t length = 0;
    const int32_t index = trie.Longest(text.substr(i), &length);
    if (index < 0) {
      ++i;
      continue;
    }
    // Like the reference's leftmost-longest automaton, a match that is then rejected still
    // consumes its span.
    size_t start = i, stop = i + length;
    i = stop;
    const AddedToken& token = added_[index];
    if ((token.flags & kAddedSpecial) && !parse_special) continue;
    uint32_t cp = 0;
    size_t at = 0;
    if (token.flags & kAddedSingleWord) {
      const bool word_before = start > 0 && CharBefore(text, start, &cp, &at) && IsWordChar(cp);
      const bool word_after = stop < text.size() && DecodeUtf8(text, stop, &cp) != 0 && IsWordChar(cp);
      if (word_before || word_after) continue;
    }
    if (token.flags & kAddedLstrip) {
      while (start > start_offset && CharBefore(text, start, &cp, &at) && IsWhiteSpace(cp)) start = at;
      start = std::max(start, start_offset);
    }
    if (token.flags & kAddedRstrip) {
      for (size_t len; stop < text.size() && (len = DecodeUtf8(text, stop, &cp)) != 0 && IsWhiteSpace(cp);) stop += len;
      i = stop;
    }
    if (start_offset < start) {
      if (auto s = gap(text.substr(start_offset, start - start_offset)); !s.ok()) return s;
    }
    out->push_back(token.id);
    start_offset = stop;
  }
  if (start_offset < text.size()) return gap(text.substr(start_offset));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_bos && data_.bos_id >= 0) out.push_back(data_.bos_id);
  Scratch scratch;
  std::string normalized;
  auto plain = [&](std::string_view gap) { return EncodePlain(gap, &scratch, &out); };
  auto normalize_then_split = [&](std::string_view gap) -> absl::Status {
    std::string_view view = gap;
    if (normalize_options_ != 0 && NormalizeInto(gap, normalize_options_, &normalized)) view = normalized;
    return SplitAdded(view, normalized_trie_, options.parse_special, &out, plain);
  };
  if (auto s = SplitAdded(text, raw_trie_, options.parse_special, &out, normalize_then_split); !s.ok()) return s;
  return out;
}

absl::Status BpeTokenizer::EncodePlain(std::string_view text, Scratch* scratch, std::vector<int32_t>* out) const {
  // The Split pre-tokenizer with "Isolated" behaviour: matches and the gaps between them are pieces.
  size_t piece_start = 0, search = 0;
  while (piece_start < text.size()) {
    size_t start = 0, end = 0;
    auto found = scratch->Find(regex_->code, text, search, &start, &end);
    if (!found.ok()) return found.status();
    if (!*found) break;
    if (end == start) {  // an empty match (only odd custom patterns): keep scanning
      search = start + 1;
      if (search >= text.size()) break;
      continue;
    }
    if (start > piece_start) EncodeWord(text.substr(piece_start, start - piece_start), out);
    EncodeWord(text.substr(start, end - start), out);
    piece_start = search = end;
  }
  if (piece_start < text.size()) EncodeWord(text.substr(piece_start), out);
  return absl::OkStatus();
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (word.size() == 1) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(word[0])];
    if (id >= 0) out->push_back(id);
    return;
  }
  if (!words_.empty()) {
    auto it = words_.find(absl::string_view(word.data(), word.size()));
    if (it != words_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  const absl::string_view key(word.data(), word.size());
  if (cacheable) {
    absl::ReaderMutexLock lock(&cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out->size();
  MergeWord(word, out);
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    if (cache_.size() < kCacheCapacity) {
      cache_.try_emplace(key, out->begin() + static_cast<std::ptrdiff_t>(before), out->end());
    }
  }
}

void BpeTokenizer::MergeWord(std::string_view word, std::vector<int32_t>* out) const {
  // Hugging Face's Word::merge_all: a queue of candidate merges ordered by (rank, position); stale
  // entries are recognised by the pair no longer producing the same token.
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (unsigned char c : word) {
    const int32_t id = byte_ids_[c];
    if (id < 0) continue;  // a byte missing from the vocabulary is dropped (no unknown token)
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  const auto n = static_cast<int32_t>(symbols.size());
  auto lookup = [&](int32_t left, int32_t right) -> const Merge* {
    auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::vector<Candidate> storage;
  storage.reserve(symbols.size());
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue(std::greater<Candidate>(),
                                                                                        std::move(storage));
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const Merge* m = lookup(symbols[i].id, symbols[i + 1].id)) queue.push({m->rank, i, m->id});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (!current.alive || current.next < 0) continue;
    const int32_t next_pos = current.next;
    const Symbol right = symbols[next_pos];
    const Merge* m = lookup(current.id, right.id);
    if (m == nullptr || m->id != top.id) continue;
    current.id = top.id;
    current.next = right.next;
    symbols[next_pos].alive = false;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (current.prev >= 0) {
      if (const Merge* p = lookup(symbols[current.prev].id, current.id)) queue.push({p->rank, current.prev, p->id});
    }
    if (current.next >= 0) {
      if (const Merge* p = lookup(current.id, symbols[current.next].id)) queue.push({p->rank, top.pos, p->id});
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out->push_back(symbols[i].id);
}

void BpeTokenizer::AppendPiece(int32_t /*previous*/, int32_t token, std::string* out) const {
  if (token < 0 || token >= vocab_size()) return;
  out->append(pieces_[token]);
}

}  // namespace kestrel
