// kestrel-convert: llama2.c checkpoints, GGUF files and Hugging Face folders (or synthetic models)
// to a single VQF file. Any failure: exit status 1 and one line on stderr naming the file and problem.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "convert/converter.h"
#include "convert/source_model.h"

namespace {

const char kUsage[] =
    "usage: kestrel-convert SRC -o OUT.vqf [--type source|f32|f16|bf16|q8_0|q4_0] [--layout auto|plain|tiled]\n"
    "                       [--tokenizer FILE]\n"
    "       kestrel-convert --synthetic qwen3-0.6b|qwen3-1.7b|llama-1b|tiny|tiny-wide -o OUT.vqf\n"
    "                       [--type ...] [--seed N]\n"
    "  SRC: a llama2.c checkpoint (.bin, with --tokenizer tokenizer.bin), a GGUF file (.gguf),\n"
    "       or a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)\n"
    "  --type: source (default) keeps each matrix's dtype (a Q4_0 GGUF stays Q4_0, bytes unchanged;\n"
    "       a llama2.c checkpoint or a synthetic model stays f32); otherwise every matrix is encoded so\n"
    "       (1-D tensors stay f32; rows not a multiple of 32 fall back from q8_0/q4_0 to f16)\n"
    "  --layout: auto (default) stores Q4_0/Q8_0 matrices in interleaved tiles, the layout the fast\n"
    "       kernels read; plain keeps row order (as GGUF does); tiled also notes tensors left plain\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "kestrel-convert: %s\n", message.c_str());
  return 1;
}

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kestrel;
  std::string source, output, tokenizer, synthetic, type_name = "source", layout_name = "auto";
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kestrel-convert: %s needs a value\n%s", flag, kUsage);
        std::exit(1);
      }
      return argv[++i];
    };
    if (arg == "-o" || arg == "--output") output = value("-o");
    else if (arg == "--type") type_name = value("--type");
    else if (arg == "--layout") layout_name = value("--layout");
    else if (arg == "--tokenizer") tokenizer = value("--tokenizer");
    else if (arg == "--synthetic") synthetic = value("--synthetic");
    else if (arg == "--seed") seed = std::strtoull(value("--seed"), nullptr, 10);
    else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      return Fail("unknown option '" + arg + "'\n" + kUsage);
    } else if (source.empty()) {
      source = arg;
    } else {
      return Fail("more than one source given ('" + source + "', '" + arg + "')");
    }
  }
  if (output.empty()) return Fail(std::string("no output file (-o OUT.vqf)\n") + kUsage);
  if (source.empty() == synthetic.empty()) return Fail(std::string("give either SRC or --synthetic PRESET\n") + kUsage);
  std::optional<DType> type;  // unset: "source", each matrix keeps its dtype
  if (type_name != "source") {
    type = DTypeFromName(type_name);
    if (!type) return Fail("unknown --type '" + type_name + "' (source, f32, f16, bf16, q8_0, q4_0)");
  }
  if (layout_name != "auto" && layout_name != "plain" && layout_name != "tiled") {
    return Fail("unknown --layout '" + layout_name + "' (auto, plain, tiled)");
  }

  absl::StatusOr<convert::SourceModel> model = absl::UnknownError("no source");
  if (!synthetic.empty()) {
    model = convert::MakeSynthetic(synthetic, seed);
  } else {
    struct stat st {};
    if (::stat(source.c_str(), &st) != 0) return Fail(source + ": no such file or folder");
    if (S_ISDIR(st.st_mode)) {
      model = convert::LoadHuggingFace(source);
    } else if (EndsWith(source, ".gguf")) {
      model = convert::LoadGguf(source);
    } else if (EndsWith(source, ".bin")) {
      if (tokenizer.empty()) return Fail(source + ": a llama2.c checkpoint needs --tokenizer tokenizer.bin");
      model = convert::LoadLlama2C(source, tokenizer);
    } else {
      return Fail(source + ": unrecognized source (expected a .bin llama2.c checkpoint, a .gguf file or a folder)");
    }
  }
  if (!model.ok()) return Fail(std::string(model.status().message()));

  convert::ConvertOptions options;
  options.type = type;
  options.layout = layout_name == "tiled"   ? convert::LayoutChoice::kTiled
                   : layout_name == "plain" ? convert::LayoutChoice::kPlain
                                            : convert::LayoutChoice::kAuto;
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  if (terminal) {
    options.progress = [](size_t done, size_t total, uint64_t bytes) {
      const int width = 40;
      const int filled = static_cast<int>(width * done / (total ? total : 1));
      std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu tensors, %.1f MiB", filled,
                   "########################################", width - filled, "", done, total,
                   static_cast<double>(bytes) / (1 << 20));
      if (done == total) std::fputc('\n', stderr);
    };
  }
  convert::ConvertSummary summary;
  if (auto s = convert::ConvertModel(*model, output, options, &summary); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  for (const std::string& d : summary.deviations) std::fprintf(stderr, "kestrel-convert: note: %s\n", d.c_str());
  std::fprintf(stderr, "kestrel-convert: wrote %s: %zu tensors, %.2f MiB, %s, layout %s, in %.2f s (from %s)\n",
               output.c_str(), summary.tensors, static_cast<double>(summary.bytes) / (1 << 20), type_name.c_str(),
               layout_name.c_str(), summary.seconds, model->description.c_str());
  return 0;
}
