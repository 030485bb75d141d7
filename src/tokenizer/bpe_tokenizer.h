// Byte-level BPE (GPT-2 style, as Qwen2/Qwen3 and Llama 3 use it), matching Hugging Face
// `tokenizers`: added tokens split out first (raw, then normalized), the Unicode normalizer, the
// model's split regex (PCRE2 with JIT, UTF + UCP), the GPT-2 byte-to-unicode mapping, then merges
// by rank. Everything comes from TokenizerData; nothing is parsed from JSON at run time.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/tokenizer.h"

namespace kestrel {

class BpeTokenizer : public Tokenizer {
 public:
  // Compiles the split regex and builds the merge tables. Errors: InvalidArgument for a bad
  // regex or malformed data, Unimplemented for an unknown pre-tokenizer name.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(TokenizerData data);
  ~BpeTokenizer() override;

  // Thread-safe. Invalid UTF-8 is accepted: invalid bytes never match the split regex, so each run
  // of them becomes its own pre-token and is encoded byte by byte (then merged as usual).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options) const override;
  // Normal tokens give their bytes (byte-level decoded); added tokens give their text.
  void AppendPiece(int32_t previous, int32_t token, std::string* out) const override;

  // The regex actually compiled (after resolving a pre-tokenizer name).
  const std::string& split_pattern() const { return pattern_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct AddedToken {
    std::string text;
    int32_t id;
    int32_t flags;
  };
  // A byte trie over the added tokens of one kind (raw or normalized), for leftmost-longest matching.
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;
      int32_t token = -1;  // index into added_
    };
    std::vector<Node> nodes;
    std::array<bool, 256> first{};
    void Insert(const std::string& text, int32_t index);
    // Index of the longest token starting at text[0], or -1; *length receives its size.
    int32_t Longest(std::string_view text, size_t* length) const;
  };
  class Scratch;

  explicit BpeTokenizer(TokenizerData data);
  absl::Status Init();
  // Splits `text` by the added tokens in `trie`; hands gaps to `gap` and appends matched ids.
  template <typename GapFn>
  absl::Status SplitAdded(std::string_view text, const Trie& trie, bool parse_special, std::vector<int32_t>* out,
                          GapFn&& gap) const;
  absl::Status EncodePlain(std::string_view text, Scratch* scratch, std::vector<int32_t>* out) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* out) const;

  std::string pattern_;
  struct Regex;
  std::unique_ptr<Regex> regex_;
  std::array<int32_t, 256> byte_ids_{};              // id of each single byte's token, -1 if absent
  absl::flat_hash_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) -> rank and result
  absl::flat_hash_map<std::string, int32_t> words_;  // raw bytes -> id (only with ignore_merges)
  std::vector<std::string> pieces_;                  // per id: the bytes AppendPiece gives
  std::vector<AddedToken> added_;
  Trie raw_trie_, normalized_trie_;
  int normalize_options_ = 0;  // utf8proc options; 0 = no normalizer

  // Words seen before -> their ids. Shared by all threads that use this tokenizer.
  static constexpr size_t kCacheCapacity = 1 << 17;
  static constexpr size_t kCacheMaxWordBytes = 64;
  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace kestrel
