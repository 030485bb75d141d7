// Tokenizer encode throughput (MB/s) on a few MB of generated mixed text (English, code, digits,
// CJK, emoji), for the Qwen3 and Llama 3 tokenizers in ../shared/tokenizers. The first pass fills
// the word cache; "cold" builds a fresh tokenizer per pass so every word is merged from scratch.
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "convert/source_model.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string SharedDir() {
  const char* env = std::getenv("KESTREL_SHARED_DIR");
  return env != nullptr ? env : KESTREL_SHARED_DIR;
}

// Deterministic mixed text of at least `bytes` bytes.
std::string MixedText(size_t bytes) {
  static const char* const kParts[] = {
      "The quick brown fox jumps over the lazy dog. ",
      "In 2024, the committee reviewed 1,234 proposals and accepted 56.7% of them. ",
      "for (int i = 0; i < n; ++i) {\n    sum += values[i] * weights[i];\n}\n",
      "def tokenize(text: str) -> list[int]:\n    return [ord(c) for c in text]\n\n",
      "\xe4\xbb\x8a\xe5\xa4\xa9\xe5\xa4\xa9\xe6\xb0\x94\xe5\xbe\x88\xe5\xa5\xbd\xef\xbc\x8c\xe6\x88\x91\xe4\xbb\xac\xe5"
      "\x8e\xbb\xe5\x85\xac\xe5\x9b\xad\xe6\x95\xa3\xe6\xad\xa5\xe3\x80\x82",
      "\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xaf\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae\xe9\xa6\x96\xe9\x83\xbd\xe3\x81\xa7"
      "\xe3\x81\x99\xe3\x80\x82 ",
      "Emoji: \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb "
      "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7! ",
      "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9, \xc3\xbc" "ber Stra\xc3\x9f" "e. ",
      "3.14159265358979 2.71828 6.02214076e23 0x7fffffff ",
      "<html><body class=\"main\">Hello &amp; welcome</body></html>\n",
  };
  constexpr size_t kCount = sizeof(kParts) / sizeof(kParts[0]);
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += kParts[(state >> 33) % kCount];
    if ((state >> 20) % 7 == 0) text += std::to_string(state % 100000);  // fresh words for the cache
  }
  return text;
}

const std::string& Text() {
  static const std::string text = MixedText(4 << 20);
  return text;
}

std::unique_ptr<kestrel::Tokenizer> Load(const std::string& name, std::string* error) {
  const std::string dir = SharedDir() + "/tokenizers/" + name;
  auto data = kestrel::convert::LoadHfTokenizer(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
  if (!data.ok()) {
    *error = std::string(data.status().message());
    return nullptr;
  }
  auto t = kestrel::Tokenizer::Create(*data);
  if (!t.ok()) {
    *error = std::string(t.status().message());
    return nullptr;
  }
  return std::move(*t);
}

void BM_Encode(benchmark::State& state, std::string name, bool cold) {
  std::string error;
  std::unique_ptr<kestrel::Tokenizer> tokenizer = Load(name, &error);
  if (!tokenizer) {
    state.SkipWithError(("skipped: ../shared/tokenizers/" + name + " unavailable: " + error).c_str());
    return;
  }
  kestrel::EncodeOptions options;
  options.add_bos = false;
  options.parse_special = true;
  const std::string& text = Text();
  size_t tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      tokenizer = Load(name, &error);
      state.ResumeTiming();
    }
    auto ids = tokenizer->Encode(text, options);
    if (!ids.ok()) {
      state.SkipWithError(std::string(ids.status().message()).c_str());
      return;
    }
    tokens = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}

// Baseline in the same run: one pass over the same text counting characters (memory-speed work),
// so the encode rates can be read as a ratio on a noisy machine.
void BM_CountCharsBaseline(benchmark::State& state) {
  const std::string& text = Text();
  for (auto _ : state) {
    size_t chars = 0;
    for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    benchmark::DoNotOptimize(chars);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

}  // namespace

BENCHMARK(BM_CountCharsBaseline)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen3_warm, std::string("qwen3"), false)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, llama3_warm, std::string("llama3"), false)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, qwen3_cold, std::string("qwen3"), true)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_Encode, llama3_cold, std::string("llama3"), true)->Unit(benchmark::kMillisecond)->Iterations(2);

BENCHMARK_MAIN();
