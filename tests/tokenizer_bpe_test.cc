// Byte-level BPE against the reference ids in ../shared/tokenizers/vectors.json (Qwen3, Llama 3),
// built from tokenizer.json and through a VQF file; odd inputs, corrupt files, threads, streaming.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "convert/source_model.h"
#include "format/metadata.h"
#include "format/model_config.h"
#include "format/vqf_reader.h"
#include "format/vqf_writer.h"
#include "shared_guard.h"
#include "test_support.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

#include <utf8proc.h>

namespace kestrel {
namespace {

using nlohmann::json;

using testing::HaveShared;

struct Loaded {
  TokenizerData data;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Each shared tokenizer is parsed once per process (tokenizer.json is large).
const Loaded& Shared(const std::string& name) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  const std::string dir = testing::SharedPath("tokenizers/" + name);
  auto data = convert::LoadHfTokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  REQUIRE(data.ok());
  auto tokenizer = Tokenizer::Create(*data);
  REQUIRE(tokenizer.ok());
  return cache[name] = Loaded{std::move(*data), std::move(*tokenizer)};
}

std::vector<int32_t> Encode(const Tokenizer& t, std::string_view text, bool parse_special = true) {
  EncodeOptions options;
  options.add_bos = false;
  options.parse_special = parse_special;
  auto ids = t.Encode(text, options);
  REQUIRE(ids.ok());
  return *ids;
}

std::string Decode(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::string out;
  int32_t previous = -1;
  for (int32_t id : ids) {
    t.AppendPiece(previous, id, &out);
    previous = id;
  }
  return out;
}

json Vectors() {
  std::ifstream in(testing::SharedPath("tokenizers/vectors.json"));
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

void CheckVectors(const Tokenizer& t, const std::string& name) {
  const json vectors = Vectors();
  REQUIRE(vectors["cases"].size() >= 40);
  int checked = 0;
  for (const json& c : vectors["cases"]) {
    const std::string input = c["input"].get<std::string>();
    const json& want = c[name];
    INFO(name << " input: " << json(input).dump());
    const auto ids = Encode(t, input);
    CHECK(ids == want["ids"].get<std::vector<int32_t>>());
    if (want["decode_roundtrip"].get<bool>()) CHECK(Decode(t, ids) == input);
    // Normalized text (Qwen3's NFC) encodes to the same ids again.
    CHECK(Encode(t, Decode(t, ids)) == ids);
    ++checked;
  }
  CHECK(checked == static_cast<int>(vectors["cases"].size()));
}

// TokenizerData -> metadata -> VQF file -> metadata -> TokenizerData, as a model load does it.
TokenizerData ThroughVqf(const TokenizerData& data, const std::string& name) {
  ModelConfig c;
  c.architecture = Architecture::kQwen3;
  c.name = name;
  c.dim = 64;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 32;
  c.ffn_dim = 128;
  c.vocab_size = static_cast<int32_t>(data.tokens.size());
  c.context_length = 128;
  Metadata m;
  c.ToMetadata(&m);
  data.ToMetadata(&m);
  const std::string path = testing::TempPath(name + ".vqf");
  std::vector<float> norm(64, 1.0f);
  auto writer = VqfWriter::Create(path, m, {TensorPlan{"output_norm.weight", DType::kF32, Layout::kPlain, {64}}});
  REQUIRE(writer.ok());
  REQUIRE((*writer)->WriteTensor(0, norm.data(), norm.size() * sizeof(float)).ok());
  REQUIRE((*writer)->Finish().ok());
  auto file = VqfFile::Open(path);
  REQUIRE(file.ok());
  auto back = TokenizerData::FromMetadata((*file)->metadata());
  REQUIRE(back.ok());
  return *back;
}

TEST_CASE("tokenizer bpe: matches the reference vectors (from tokenizer.json)", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/vectors.json")) return;
  for (const char* name : {"qwen3", "llama3"}) {
    if (!HaveShared(std::string("tokenizers/") + name + "/tokenizer.json")) return;
    CheckVectors(*Shared(name).tokenizer, name);
  }
}

TEST_CASE("tokenizer bpe: matches the reference vectors after a VQF round trip", "[tokenizer][bpe][vqf]") {
  if (!HaveShared("tokenizers/vectors.json")) return;
  for (const char* name : {"qwen3", "llama3"}) {
    if (!HaveShared(std::string("tokenizers/") + name + "/tokenizer.json")) return;
    const TokenizerData& original = Shared(name).data;
    const TokenizerData back = ThroughVqf(original, name);
    CHECK(back.tokens == original.tokens);
    CHECK(back.token_types == original.token_types);
    CHECK(back.merges == original.merges);
    CHECK(back.pre_tokenizer == original.pre_tokenizer);
    CHECK(back.normalizer == original.normalizer);
    CHECK(back.ignore_merges == original.ignore_merges);
    CHECK(back.added_ids == original.added_ids);
    CHECK(back.added_flags == original.added_flags);
    CHECK(back.chat_template == original.chat_template);
    auto tokenizer = Tokenizer::Create(back);
    REQUIRE(tokenizer.ok());
    CheckVectors(**tokenizer, name);
  }
}

TEST_CASE("tokenizer bpe: reads what the Hugging Face files say", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer.json") || !HaveShared("tokenizers/llama3/tokenizer.json")) return;
  const TokenizerData& qwen = Shared("qwen3").data;
  CHECK(qwen.normalizer == "NFC");
  CHECK_FALSE(qwen.ignore_merges);
  CHECK(qwen.added_ids.size() == 26);
  CHECK(qwen.bos_id == -1);
  CHECK(qwen.tokens[qwen.eos_id] == "<|im_end|>");
  const TokenizerData& llama = Shared("llama3").data;
  CHECK(llama.normalizer.empty());
  CHECK(llama.ignore_merges);
  CHECK(llama.added_ids.size() == 256);
  CHECK(llama.tokens[llama.bos_id] == "<|begin_of_text|>");
  CHECK(llama.tokens.size() == 128256);
}

TEST_CASE("tokenizer bpe: special tokens are text unless parse_special", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer.json") || !HaveShared("tokenizers/llama3/tokenizer.json")) return;
  const Tokenizer& qwen = *Shared("qwen3").tokenizer;
  CHECK(Encode(qwen, "<|im_start|>user", true) == std::vector<int32_t>{151644, 872});
  const auto plain = Encode(qwen, "<|im_start|>user", false);
  CHECK(plain.size() > 2);
  for (int32_t id : plain) CHECK(id < 151643);
  CHECK(Decode(qwen, plain) == "<|im_start|>user");
  // Non-special added tokens (<think>) stay tokens, as with the reference's split_special_tokens.
  CHECK(Encode(qwen, "<think>", false) == std::vector<int32_t>{151667});
  // Added tokens decode to their text.
  CHECK(Decode(qwen, {151644, 872, 198}) == "<|im_start|>user\n");

  const Tokenizer& llama = *Shared("llama3").tokenizer;
  CHECK(Encode(llama, "<|begin_of_text|>Hi", true) == std::vector<int32_t>{128000, 13347});
  CHECK(Encode(llama, "<|begin_of_text|>Hi", false).front() != 128000);
  EncodeOptions with_bos;
  with_bos.add_bos = true;
  CHECK(*llama.Encode("Hi", with_bos) == std::vector<int32_t>{128000, 13347});
  CHECK(llama.IsEndOfGeneration(llama.eos_id()));
}

TEST_CASE("tokenizer bpe: edge inputs: empty, invalid UTF-8, 1 MB", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer.json") || !HaveShared("tokenizers/llama3/tokenizer.json")) return;
  for (const char* name : {"qwen3", "llama3"}) {
    INFO(name);
    const Tokenizer& t = *Shared(name).tokenizer;
    CHECK(Encode(t, "").empty());

    // Invalid UTF-8 is defined: invalid bytes are pre-tokens of their own, encoded byte-level, and
    // decode gives the exact bytes back.
    const std::string invalid[] = {std::string("\xff"), std::string("abc\xff\xfe def"), std::string("\xc3"),
                                   std::string("caf\xc3"), std::string("\xed\xa0\x80 surrogate"),
                                   std::string("\xf4\x90\x80\x80", 4), std::string("a\0b", 3),
                                   std::string("\xe2\x82 \x80\x80 \xc0\xaf")};
    for (size_t k = 0; k < sizeof(invalid) / sizeof(invalid[0]); ++k) {
      const std::string& s = invalid[k];
      INFO("invalid input #" << k);
      const auto ids = Encode(t, s);
      CHECK(!ids.empty());
      CHECK(Decode(t, ids) == s);
      CHECK(Encode(t, s) == ids);  // deterministic (cache or not)
    }

    // 1 MB inputs finish in bounded time: long words, long runs of spaces, digits, mixed text.
    const std::string unit = "The quick brown fox, 12345 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c! "
                             "int main() { return 0; }\n\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ";
    std::string mixed;
    while (mixed.size() < (1 << 20)) mixed += unit;
    for (const std::string& big : {mixed, std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                                   std::string(1 << 20, '7'), std::string(1 << 20, '\n')}) {
      const auto start = std::chrono::steady_clock::now();
      const auto ids = Encode(t, big);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(seconds < 30.0);
      CHECK(!ids.empty());
      CHECK(Decode(t, ids) == big);
    }
  }
}

TEST_CASE("tokenizer bpe: NFC around combining marks equals whole-text NFC", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer.json")) return;
  const Tokenizer& t = *Shared("qwen3").tokenizer;
  // Combining marks after ASCII / Latin-1 / kana / Hangul syllables, conjoining jamo, a singleton.
  const std::string cases[] = {"e\xcc\x81", "Cafe\xcc\x81 ok", "\xc3\x85\xcc\x81x", "\xea\xb0\x80\xe1\x86\xa8 \xea\xb0\x80",
                               "\xe3\x81\x8b\xe3\x82\x99\xe3\x81\x8b", "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8",
                               "\xe2\x84\xab and \xe2\x84\xa6", "a\xcc\xa3\xcc\x87" "b\xcc\x87\xcc\xa3 \xe4\xb8\xad\xcc\x81",
                               "x\xff\xcc\x81y"};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); ++k) {
    const std::string& s = cases[k];
    INFO("case #" << k);
    utf8proc_uint8_t* mapped = nullptr;
    // Whole-text NFC of the valid parts (the last case has an invalid byte: skip the comparison).
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &mapped,
                                            static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n >= 0) {
      const std::string nfc(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
      CHECK(Decode(t, Encode(t, s)) == nfc);
    } else {
      CHECK(!Encode(t, s).empty());
    }
    std::free(mapped);
  }
}

TEST_CASE("tokenizer bpe: encodes the same from many threads", "[tokenizer][bpe]") {
  if (!HaveShared("tokenizers/qwen3/tokenizer.json")) return;
  const Tokenizer& t = *Shared("qwen3").tokenizer;
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("thread text number " + std::to_string(i * 7919) + " with words w" + std::to_string(i) +
                    " \xe6\xb5\x8b\xe8\xaf\x95 and more " + std::string(static_cast<size_t>(i % 5) + 1, '!'));
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& s : texts) want.push_back(Encode(t, s));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      EncodeOptions options;
      options.add_bos = false;
      options.parse_special = true;
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto ids = t.Encode(texts[(i + static_cast<size_t>(k)) % texts.size()], options);
          if (!ids.ok() || *ids != want[(i + static_cast<size_t>(k)) % texts.size()]) ++mismatches[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) CHECK(m == 0);
}

TEST_CASE("tokenizer bpe: streaming never emits part of a UTF-8 character", "[tokenizer][bpe][streaming]") {
  if (!HaveShared("tokenizers/llama3/tokenizer.json")) return;
  const Tokenizer& t = *Shared("llama3").tokenizer;
  // Emoji with ZWJ and skin tone, CJK and accents: several split into byte tokens.
  const std::string text = "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
                           "\xe6\xbc\xa2\xe5\xad\x97 \xc3\xa9t\xc3\xa9 \xf0\x9f\xa6\x80";
  const auto ids = Encode(t, text);
  bool some_token_is_partial = false;
  // The generator's delivery (decoder/generator.cc): append each piece, hand out the complete prefix.
  std::string pending, delivered;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece;
    t.AppendPiece(i ? ids[i - 1] : -1, ids[i], &piece);
    some_token_is_partial |= CompleteUtf8Prefix(piece) != piece.size();
    pending += piece;
    const size_t ready = CompleteUtf8Prefix(pending);
    const std::string chunk = pending.substr(0, ready);
    pending.erase(0, ready);
    // Every chunk is whole characters: it re-encodes to itself byte for byte and ends on a boundary.
    CHECK(CompleteUtf8Prefix(chunk) == chunk.size());
    if (!chunk.empty()) {
      const auto lead = static_cast<unsigned char>(chunk[0]);
      CHECK((lead & 0xC0) != 0x80);
    }
    delivered += chunk;
  }
  delivered += pending;
  CHECK(some_token_is_partial);  // the case under test actually occurs
  CHECK(delivered == text);
}

TEST_CASE("tokenizer bpe: rejects corrupt tokenizer files clearly", "[tokenizer][bpe]") {
  auto write = [](const std::string& name, const std::string& text) {
    const std::string path = testing::TempPath(name);
    testing::WriteFileBytes(path, text.data(), text.size());
    return path;
  };
  auto message_of = [](const absl::Status& s) { return std::string(s.message()); };
  {
    auto r = convert::LoadHfTokenizer(testing::TempPath("missing-tokenizer.json"), "");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kNotFound);
  }
  {
    auto r = convert::LoadHfTokenizer(write("truncated.json", R"({"model": {"type": "BPE", "vocab": {"a": 0)"), "");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(message_of(r.status()), Catch::Contains("truncated.json") && Catch::Contains("invalid JSON"));
  }
  {
    auto r = convert::LoadHfTokenizer(write("novocab.json", R"({"model": {"type": "BPE", "merges": []}})"), "");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(message_of(r.status()), Catch::Contains("model.vocab"));
  }
  {
    auto r = convert::LoadHfTokenizer(
        write("badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [3]}})"), "");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(message_of(r.status()), Catch::Contains("merge #0"));
  }
  {
    auto r = convert::LoadHfTokenizer(
        write("hugeid.json", R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})"), "");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(message_of(r.status()), Catch::Contains("implausibly large"));
  }
  {
    auto r = convert::LoadHfTokenizer(
        write("normalizer.json",
              R"({"normalizer": {"type": "Lowercase"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"),
        "");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kUnimplemented);
  }
  {
    auto r = convert::LoadHfTokenizer(write("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"), "");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(message_of(r.status()), Catch::Contains("not supported"));
  }
  // A bad regex or an unknown pre-tokenizer name fails at creation, not at encode time.
  TokenizerData d;
  d.type = "bpe";
  d.tokens = {"a", "b", "ab"};
  d.token_types = {0, 0, 0};
  d.merges = {"a b"};
  d.pre_tokenizer = "(unclosed";
  CHECK_FALSE(Tokenizer::Create(d).ok());
  d.pre_tokenizer = "no-such-pretokenizer";
  auto unknown = Tokenizer::Create(d);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == absl::StatusCode::kUnimplemented);
  d.pre_tokenizer = "qwen2";
  auto ok = Tokenizer::Create(d);
  REQUIRE(ok.ok());
  CHECK(Encode(**ok, "ab") == std::vector<int32_t>{2});
  d.merges = {"a"};
  CHECK_FALSE(Tokenizer::Create(d).ok());
}

TEST_CASE("tokenizer bpe: added-token flags: lstrip, rstrip, single_word, normalized", "[tokenizer][bpe]") {
  // A tiny byte-level vocabulary: every printable ASCII byte and "Ġ" (space), plus added tokens.
  TokenizerData d;
  d.type = "bpe";
  for (int c = 33; c < 127; ++c) d.tokens.push_back(std::string(1, static_cast<char>(c)));
  d.tokens.push_back("\xc4\xa0");  // Ġ = byte 0x20
  d.token_types.assign(d.tokens.size(), 0);
  const auto add = [&](const std::string& text, int32_t flags) {
    d.tokens.push_back(text);
    d.token_types.push_back(static_cast<int32_t>(flags & kAddedSpecial ? TokenType::kControl : TokenType::kUserDefined));
    d.added_ids.push_back(static_cast<int32_t>(d.tokens.size() - 1));
    d.added_flags.push_back(flags);
    return static_cast<int32_t>(d.tokens.size() - 1);
  };
  const int32_t space = 94;
  const int32_t mask = add("<mask>", kAddedSpecial | kAddedLstrip | kAddedRstrip);
  const int32_t word = add("cat", kAddedSingleWord);
  const int32_t accent = add("\xc3\xa9", kAddedNormalized);  // é, matched after NFC
  d.normalizer = "NFC";
  d.pre_tokenizer = "qwen2";
  auto t = Tokenizer::Create(d);
  REQUIRE(t.ok());
  const auto x = static_cast<int32_t>('x' - 33);
  CHECK(Encode(**t, "x  <mask>  x") == std::vector<int32_t>{x, mask, x});
  CHECK(Encode(**t, "x  <mask>  x", false) != std::vector<int32_t>{x, mask, x});
  CHECK(Encode(**t, "a cat") == std::vector<int32_t>{'a' - 33, space, word});
  CHECK(Encode(**t, "concat").size() == 6);  // inside a word: plain letters
  CHECK(Encode(**t, "e\xcc\x81") == std::vector<int32_t>{accent});  // e + U+0301 normalizes to é
}

}  // namespace
}  // namespace kestrel
