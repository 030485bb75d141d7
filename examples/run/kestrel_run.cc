// kestrel-run: generate text from a prompt with a VQF model, through the public C API only.
// The prompt and the generated text go to stdout (as llama2.c's run does); timings and, with
// --verbose, the backend and model summary go to stderr. With --chat it is an interactive chat:
// each stdin line is a user turn, the model's chat template renders the whole history, only the
// tokens the session has not seen are evaluated (the KV cache is kept), and replies stream out.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kestrel/kestrel.h"

namespace {

const char kUsage[] =
    "usage: kestrel-run -m MODEL.vqf [-p PROMPT] [-n NEW_TOKENS] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
    "                   [--repeat-penalty R] [--seed S] [-t THREADS] [--backend NAME] [--ctx N] [--kv f32|f16]\n"
    "                   [--weights auto|mapped|huge-pages] [--check-finite] [--verbose]\n"
    "                   [--chat [--system TEXT] [--chat-template chatml|qwen2.5|qwen3|llama3] [--no-think]]\n"
    "  --kv: the KV cache's element type (default f16)\n"
    "  --weights: how the weights are held in memory (kestrel.h, kestrel_weights_memory; default auto)\n";

int Fail(const std::string& what) {
  std::fprintf(stderr, "kestrel-run: %s\n", what.c_str());
  return 1;
}

int FailStatus(const char* what, kestrel_status st) {
  return Fail(std::string(what) + ": " + kestrel_last_error() + " (" + kestrel_status_name(st) + ")");
}

bool ParseInt(const char* s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseFloat(const char* s, float* out) {
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(s, &end);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

int OnText(const char* text, size_t len, const int32_t*, size_t, void*) {
  std::fwrite(text, 1, len, stdout);
  std::fflush(stdout);
  return 1;
}

// A reply being streamed in chat mode: its text and tokens are kept for the history.
struct Reply {
  std::string text;
  std::vector<int32_t> tokens;
};

int OnChatText(const char* text, size_t len, const int32_t* tokens, size_t n_tokens, void* user) {
  auto* reply = static_cast<Reply*>(user);
  reply->text.append(text, len);
  reply->tokens.insert(reply->tokens.end(), tokens, tokens + n_tokens);
  return OnText(text, len, tokens, n_tokens, nullptr);
}

struct ChatSettings {
  std::string system, family;
  bool think = true;
};

kestrel_status Tokenize(const kestrel_model* model, const std::string& text, uint32_t flags, std::vector<int32_t>* out) {
  size_t n = 0;
  kestrel_status st = kestrel_tokenize(model, text.data(), text.size(), flags, nullptr, 0, &n);
  if (st != KESTREL_OK && st != KESTREL_ERROR_BUFFER_TOO_SMALL) return st;
  out->resize(n);
  return kestrel_tokenize(model, text.data(), text.size(), flags, out->data(), out->size(), &n);
}

// The interactive chat loop: stdin lines are user turns until EOF.
int RunChat(const kestrel_model* model, kestrel_session* session, kestrel_sampling_params sampling, long long n_new,
            const ChatSettings& chat) {
  // End-of-turn markers as stop strings, for models whose files do not list them as end-of-generation.
  const char* const stops[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>"};
  sampling.stop_strings = stops;
  sampling.n_stop_strings = sizeof(stops) / sizeof(stops[0]);
  sampling.max_tokens = static_cast<int32_t>(n_new);
  std::vector<std::pair<std::string, std::string>> history;  // role, content
  if (!chat.system.empty()) history.emplace_back("system", chat.system);
  std::vector<int32_t> in_session;  // the tokens the session holds, in order
  const bool interactive = ::isatty(0) != 0;
  std::string line;
  for (;;) {
    if (interactive) std::fputs("> ", stderr);
    line.clear();
    int c = 0;
    while ((c = std::fgetc(stdin)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
    if (c == EOF && line.empty()) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    history.emplace_back("user", line);

    std::vector<kestrel_chat_message> msgs;
    for (const auto& [role, content] : history) msgs.push_back({role.c_str(), content.c_str()});
    const char* family = chat.family.empty() ? nullptr : chat.family.c_str();
    size_t len = 0;
    std::string prompt;
    kestrel_status st = kestrel_chat_apply(model, family, msgs.data(), msgs.size(), 1, chat.think ? 1 : 0, nullptr, 0, &len);
    if (st == KESTREL_ERROR_BUFFER_TOO_SMALL || st == KESTREL_OK) {
      prompt.resize(len);
      st = kestrel_chat_apply(model, family, msgs.data(), msgs.size(), 1, chat.think ? 1 : 0, prompt.data(), prompt.size(), &len);
    }
    if (st != KESTREL_OK) return FailStatus("chat template", st);
    std::vector<int32_t> tokens;
    if ((st = Tokenize(model, prompt, KESTREL_TOKENIZE_PARSE_SPECIAL, &tokens)) != KESTREL_OK) return FailStatus("tokenize", st);
    if (tokens.empty()) return Fail("the chat template rendered nothing");

    // Keep what the session already holds; evaluate from the first token that differs (at least one,
    // so the logits follow the prompt).
    size_t keep = 0;
    while (keep < in_session.size() && keep < tokens.size() && in_session[keep] == tokens[keep]) ++keep;
    if (keep == tokens.size()) --keep;
    if ((st = kestrel_session_truncate(session, static_cast<int32_t>(keep))) != KESTREL_OK) return FailStatus("truncate", st);
    if ((st = kestrel_session_eval(session, tokens.data() + keep, tokens.size() - keep)) != KESTREL_OK) {
      return FailStatus("prompt", st);
    }
    in_session = tokens;

    Reply reply;
    kestrel_stop_reason reason = KESTREL_STOP_MAX_TOKENS;
    st = kestrel_session_generate(session, &sampling, OnChatText, &reply, nullptr, &reason);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (st != KESTREL_OK) return FailStatus("generate", st);
    in_session.insert(in_session.end(), reply.tokens.begin(), reply.tokens.end());
    in_session.resize(std::min(in_session.size(), static_cast<size_t>(kestrel_session_position(session))));
    history.emplace_back("assistant", reply.text);
    if (reason == KESTREL_STOP_CONTEXT_FULL) return Fail("the context is full; start a new chat (or raise --ctx)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int32_t weights = KESTREL_WEIGHTS_AUTO;
  std::string model_path, prompt, backend, kv;  // kv: "" keeps the library default (f16)
  long long n_new = 256, threads = 0, ctx = 0;
  bool verbose = false, check_finite = false, chat_mode = false;
  ChatSettings chat;
  kestrel_sampling_params sampling;
  kestrel_sampling_params_init(&sampling);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kestrel-run: %s needs a value\n%s", a.c_str(), kUsage);
        std::exit(1);
      }
      return argv[++i];
    };
    long long iv = 0;
    float fv = 0;
    if (a == "-m" || a == "--model") model_path = value();
    else if (a == "-p" || a == "--prompt") prompt = value();
    else if (a == "-n" || a == "--n-predict") {
      if (!ParseInt(value(), 0, 1 << 30, &n_new)) return Fail("-n needs a non-negative integer");
    } else if (a == "--temp") {
      if (!ParseFloat(value(), &sampling.temperature)) return Fail("--temp needs a number");
    } else if (a == "--top-k") {
      if (!ParseInt(value(), -1000000000, 1000000000, &iv)) return Fail("--top-k needs an integer");
      sampling.top_k = static_cast<int32_t>(iv);
    } else if (a == "--top-p") {
      if (!ParseFloat(value(), &sampling.top_p)) return Fail("--top-p needs a number");
    } else if (a == "--min-p") {
      if (!ParseFloat(value(), &sampling.min_p)) return Fail("--min-p needs a number");
    } else if (a == "--repeat-penalty") {
      if (!ParseFloat(value(), &sampling.repeat_penalty)) return Fail("--repeat-penalty needs a number");
    } else if (a == "--presence-penalty") {
      if (!ParseFloat(value(), &fv)) return Fail("--presence-penalty needs a number");
      sampling.presence_penalty = fv;
    } else if (a == "--frequency-penalty") {
      if (!ParseFloat(value(), &fv)) return Fail("--frequency-penalty needs a number");
      sampling.frequency_penalty = fv;
    } else if (a == "--seed") {
      if (!ParseInt(value(), 0, INT64_MAX, &iv)) return Fail("--seed needs a non-negative integer");
      sampling.seed = static_cast<uint64_t>(iv);
    } else if (a == "-t" || a == "--threads") {
      if (!ParseInt(value(), 0, 256, &threads)) return Fail("-t needs an integer in [0, 256]");
    } else if (a == "--ctx") {
      if (!ParseInt(value(), 0, 1 << 30, &ctx)) return Fail("--ctx needs a non-negative integer");
    } else if (a == "--kv") {
      kv = value();
    } else if (a == "--backend") {
      backend = value();
    } else if (a == "--weights") {
      const std::string v = value();
      if (v == "auto")
        weights = KESTREL_WEIGHTS_AUTO;
      else if (v == "mapped")
        weights = KESTREL_WEIGHTS_MAPPED;
      else if (v == "huge-pages")
        weights = KESTREL_WEIGHTS_HUGE_PAGES;
      else
        return Fail("--weights must be auto, mapped or huge-pages");
    } else if (a == "--chat") {
      chat_mode = true;
    } else if (a == "--system") {
      chat.system = value();
    } else if (a == "--chat-template") {
      chat.family = value();
    } else if (a == "--no-think") {
      chat.think = false;
    } else if (a == "--check-finite") {
      check_finite = true;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      return Fail("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (model_path.empty()) return Fail(std::string("no model given (-m MODEL.vqf)\n") + kUsage);
  if (!kv.empty() && kv != "f32" && kv != "f16") return Fail("--kv must be f32 or f16");

  kestrel_model_params mp;
  kestrel_model_params_init(&mp);
  if (!backend.empty()) mp.backend = backend.c_str();
  mp.weights_memory = weights;
  kestrel_model* model = nullptr;
  if (auto st = kestrel_model_load(model_path.c_str(), &mp, &model); st != KESTREL_OK) return FailStatus("load", st);
  kestrel_model_info info;
  info.struct_size = sizeof(info);
  kestrel_model_get_info(model, &info);
  if (verbose) {
    std::fprintf(stderr, "backend: %s\n", info.backend);
    std::fprintf(stderr, "model: %s, %d layers, dim %d, heads %d/%d (head dim %d), ffn %d, vocab %d, context %d, %.2f MiB, loaded in %.3f s\n",
                 info.architecture, info.n_layers, info.dim, info.n_heads, info.n_kv_heads, info.head_dim, info.ffn_dim,
                 info.vocab_size, info.context_length, static_cast<double>(info.file_bytes) / (1 << 20),
                 info.load_seconds);
    std::fprintf(stderr, "weights: %s, %.0f%% on huge pages\n",
                 info.weights_memory == KESTREL_WEIGHTS_HUGE_PAGES ? "huge-page copy" : "mapped",
                 100.0 * static_cast<double>(info.huge_page_bytes) / static_cast<double>(info.file_bytes));
  }
  kestrel_session_params sp;
  kestrel_session_params_init(&sp);
  sp.n_threads = static_cast<int32_t>(threads);
  sp.context_length = static_cast<int32_t>(ctx);
  if (!kv.empty()) sp.kv_type = kv == "f16" ? KESTREL_KV_F16 : KESTREL_KV_F32;
  sp.check_finite = check_finite ? 1 : 0;
  kestrel_session* session = nullptr;
  if (auto st = kestrel_session_create(model, &sp, &session); st != KESTREL_OK) {
    kestrel_model_free(model);
    return FailStatus("session", st);
  }
  if (chat_mode) {
    const int chat_rc = RunChat(model, session, sampling, n_new, chat);
    kestrel_session_free(session);
    kestrel_model_free(model);
    return chat_rc;
  }
  int rc = 0;
  std::vector<int32_t> tokens;
  size_t n_tokens = 0;
  kestrel_status st = kestrel_tokenize(model, prompt.data(), prompt.size(), KESTREL_TOKENIZE_ADD_BOS, nullptr, 0, &n_tokens);
  if (st == KESTREL_ERROR_BUFFER_TOO_SMALL || st == KESTREL_OK) {
    tokens.resize(n_tokens);
    st = kestrel_tokenize(model, prompt.data(), prompt.size(), KESTREL_TOKENIZE_ADD_BOS, tokens.data(), tokens.size(), &n_tokens);
  }
  if (st == KESTREL_OK && tokens.empty()) {
    st = KESTREL_ERROR_INVALID_ARGUMENT;
    rc = Fail("the prompt is empty and the model has no BOS token");
  } else if (st != KESTREL_OK) {
    rc = FailStatus("tokenize", st);
  } else {
    std::string text(prompt.size() * 2 + 16, '\0');
    size_t len = 0;
    if (kestrel_detokenize(model, tokens.data(), tokens.size(), text.data(), text.size(), &len) == KESTREL_OK) {
      std::fwrite(text.data(), 1, len, stdout);
      std::fflush(stdout);
    }
    if ((st = kestrel_session_eval(session, tokens.data(), tokens.size())) != KESTREL_OK) {
      std::fputc('\n', stdout);
      rc = FailStatus("prompt", st);
    } else {
      sampling.max_tokens = static_cast<int32_t>(n_new);
      int32_t generated = 0;
      kestrel_stop_reason reason = KESTREL_STOP_MAX_TOKENS;
      st = n_new > 0 ? kestrel_session_generate(session, &sampling, OnText, nullptr, &generated, &reason) : KESTREL_OK;
      std::fputc('\n', stdout);
      std::fflush(stdout);
      if (st != KESTREL_OK) rc = FailStatus("generate", st);
      kestrel_timings t;
      t.struct_size = sizeof(t);
      kestrel_session_get_timings(session, &t);
      std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s (%.1f tokens/s)\n",
                   static_cast<long long>(t.prefill_tokens), t.prefill_seconds, t.prefill_tokens_per_second,
                   static_cast<long long>(t.decode_tokens), t.decode_seconds, t.decode_tokens_per_second);
      if (verbose) {
        std::fprintf(stderr, "generated %d tokens, stop reason %d\n", generated, static_cast<int>(reason));
        std::fprintf(stderr, "time by role (s): qkv %.4f, attn_output %.4f, gate_up %.4f, down %.4f, lm_head %.4f, attention %.4f, other %.4f\n",
                     t.qkv_seconds, t.attention_output_seconds, t.gate_up_seconds, t.down_seconds, t.lm_head_seconds,
                     t.attention_seconds, t.other_seconds);
      }
    }
  }
  kestrel_session_free(session);
  kestrel_model_free(model);
  return rc;
}
