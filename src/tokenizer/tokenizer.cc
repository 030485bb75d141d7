// Tokenizer factory and shared helpers.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kestrel {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(const TokenizerData& data) {
  if (auto s = data.Validate(); !s.ok()) return s;
  if (data.type == "llama2c") return std::unique_ptr<Tokenizer>(new Llama2cTokenizer(data));
  if (data.type == "bpe") {
    auto bpe = BpeTokenizer::Create(data);
    if (!bpe.ok()) return bpe.status();
    return std::unique_ptr<Tokenizer>(std::move(*bpe));
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer type '", data.type,
                                               "' is not supported by this build (supported: llama2c, bpe)"));
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  // For llama2.c, eos_ids, when given, is the complete set (it stops on BOS, not on EOS). For BPE
  // models the importers store eos_ids as ids in addition to eos_id (e.g. <|endoftext|> and <|im_end|>).
  if (data_.eos_ids.empty() || (data_.type == "bpe" && id == data_.eos_id)) return id == data_.eos_id;
  return std::find(data_.eos_ids.begin(), data_.eos_ids.end(), id) != data_.eos_ids.end();
}

size_t CompleteUtf8Prefix(std::string_view text) {
  // Look back at most 3 bytes for the start of a character that is still incomplete.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace kestrel
