// llama2.c tokenizer, matching run.c's encode() and decode() byte for byte.
#include "tokenizer/llama2c_tokenizer.h"

#include <cstdio>

namespace kestrel {

Llama2cTokenizer::Llama2cTokenizer(TokenizerData data) : Tokenizer(std::move(data)) {
  byte_value_.assign(data_.tokens.size(), -1);
  for (int32_t id = 0; id < vocab_size(); ++id) {
    ids_.emplace(data_.tokens[id], id);  // first occurrence wins on duplicates
    const std::string& t = data_.tokens[id];
    unsigned int byte = 0;
    char close = 0;
    if (t.size() == 6 && std::sscanf(t.c_str(), "<0x%02X%c", &byte, &close) == 2 && close == '>') {
      byte_value_[id] = static_cast<int16_t>(byte);
      if (byte == 0) byte_fallback_base_ = id;
    }
  }
}

int32_t Llama2cTokenizer::Lookup(std::string_view piece) const {
  auto it = ids_.find(absl::string_view(piece.data(), piece.size()));
  return it == ids_.end() ? -1 : it->second;
}

absl::StatusOr<std::vector<int32_t>> Llama2cTokenizer::Encode(std::string_view text,
                                                              const EncodeOptions& options) const {
  std::vector<int32_t> tokens;
  if (options.add_bos && data_.bos_id >= 0) tokens.push_back(data_.bos_id);
  if (!text.empty()) {
    const int32_t space = Lookup(" ");
    if (space >= 0) tokens.push_back(space);  // the dummy prefix
  }
  // One token per UTF-8 character (at most 4 bytes), falling back to byte tokens.
  std::string buffer;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) buffer.clear();
    buffer.push_back(static_cast<char>(c));
    const bool next_is_continuation = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (next_is_continuation && buffer.size() < 4) continue;
    const int32_t id = Lookup(buffer);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (unsigned char b : buffer) {
        if (byte_fallback_base_ < 0) {
          if (data_.unk_id >= 0) tokens.push_back(data_.unk_id);
          continue;
        }
        tokens.push_back(byte_fallback_base_ + b);
      }
    }
    buffer.clear();
  }
  // Greedily merge the adjacent pair whose merged token has the highest score.
  std::string pair;
  for (;;) {
    float best_score = -1e10f;
    int32_t best_id = -1;
    size_t best_index = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      pair = data_.tokens[tokens[i]];
      pair += data_.tokens[tokens[i + 1]];
      const int32_t id = Lookup(pair);
      if (id >= 0 && data_.scores[id] > best_score) {
        best_score = data_.scores[id];
        best_id = id;
        best_index = i;
      }
    }
    if (best_id < 0) break;
    tokens[best_index] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_index) + 1);
  }
  return tokens;
}

void Llama2cTokenizer::AppendPiece(int32_t previous, int32_t token, std::string* out) const {
  if (token < 0 || token >= vocab_size()) return;
  if (byte_value_[token] >= 0) {
    out->push_back(static_cast<char>(byte_value_[token]));
    return;
  }
  const std::string& piece = data_.tokens[token];
  // run.c strips the leading space of the first piece after BOS.
  const size_t skip = (previous == data_.bos_id && !piece.empty() && piece[0] == ' ') ? 1 : 0;
  out->append(piece, skip, std::string::npos);
}

}  // namespace kestrel
