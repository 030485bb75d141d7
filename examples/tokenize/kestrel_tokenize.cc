// kestrel-tokenize: prints the token ids of a text as a JSON array, with a VQF model's tokenizer or
// straight from a Hugging Face tokenizer.json. By default it encodes as the reference's
// encode(text, add_special_tokens=False): no BOS, added/special tokens written in the text are
// recognised. --no-special treats special tokens as plain text.
#include <cstdio>
#include <memory>
#include <string>

#include "convert/source_model.h"
#include "format/vqf_reader.h"
#include "tokenizer/tokenizer.h"

namespace {

const char kUsage[] =
    "usage: kestrel-tokenize (-m MODEL.vqf | --tokenizer tokenizer.json) [--no-special] [TEXT]\n"
    "  Reads the text from stdin (exact bytes) when TEXT is absent. With --tokenizer, a\n"
    "  tokenizer_config.json next to tokenizer.json is read too when present.\n";

int Fail(const std::string& what) {
  std::fprintf(stderr, "kestrel-tokenize: %s\n", what.c_str());
  return 1;
}

bool FileExists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f != nullptr) std::fclose(f);
  return f != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, tokenizer_path, text;
  bool have_text = false, parse_special = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-m" || a == "--model" || a == "--tokenizer") && i + 1 < argc) {
      (a == "--tokenizer" ? tokenizer_path : model_path) = argv[++i];
    } else if (a == "--no-special") {
      parse_special = false;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!have_text && (a.empty() || a[0] != '-' || a == "-")) {
      text = a;
      have_text = true;
    } else {
      return Fail("unexpected argument '" + a + "'\n" + kUsage);
    }
  }
  if (model_path.empty() == tokenizer_path.empty()) return Fail(std::string("give exactly one of -m and --tokenizer\n") + kUsage);

  kestrel::TokenizerData data;
  if (!model_path.empty()) {
    auto file = kestrel::VqfFile::Open(model_path);
    if (!file.ok()) return Fail(std::string(file.status().message()));
    auto d = kestrel::TokenizerData::FromMetadata((*file)->metadata());
    if (!d.ok()) return Fail(model_path + ": " + std::string(d.status().message()));
    data = std::move(*d);
  } else {
    const size_t slash = tokenizer_path.find_last_of('/');
    const std::string config = (slash == std::string::npos ? std::string() : tokenizer_path.substr(0, slash + 1)) +
                               "tokenizer_config.json";
    auto d = kestrel::convert::LoadHfTokenizer(tokenizer_path, FileExists(config) ? config : "");
    if (!d.ok()) return Fail(std::string(d.status().message()));
    data = std::move(*d);
  }
  auto tokenizer = kestrel::Tokenizer::Create(data);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));

  if (!have_text) {
    char buffer[1 << 16];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0;) text.append(buffer, n);
    if (std::ferror(stdin)) return Fail("cannot read stdin");
  }
  kestrel::EncodeOptions options;
  options.add_bos = false;
  options.parse_special = parse_special;
  auto ids = (*tokenizer)->Encode(text, options);
  if (!ids.ok()) return Fail(std::string(ids.status().message()));
  std::string out = "[";
  for (size_t i = 0; i < ids->size(); ++i) out += (i ? ", " : "") + std::to_string((*ids)[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
