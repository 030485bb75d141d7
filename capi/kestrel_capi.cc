// The C ABI boundary: the only place that turns absl::Status into status codes and messages and
// catches exceptions, so nothing C++ crosses into callers.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "decoder/generator.h"
#include "decoder/model.h"
#include "decoder/session.h"
#include "kestrel/kestrel.h"
#include "tokenizer/chat_template.h"

struct kestrel_model {
  std::unique_ptr<kestrel::Model> model;
  std::string architecture;
};

// Carries the caller's C diagnostics callback through the C++ one.
struct LayerStatsBridge {
  kestrel_layer_stats_fn fn;
  void* user;
  static void Forward(const kestrel::LayerStats& s, void* self) {
    auto* b = static_cast<LayerStatsBridge*>(self);
    const kestrel_layer_stats c{s.layer, s.stage, s.position, s.max_abs, s.rms, s.non_finite};
    b->fn(&c, b->user);
  }
};

struct kestrel_session {
  const kestrel_model* owner;
  std::unique_ptr<LayerStatsBridge> stats_bridge;
  std::unique_ptr<kestrel::Session> session;
  std::unique_ptr<kestrel::Generator> generator;
  // Every token in the context. After generation the last sampled token is here but not yet
  // evaluated; the next eval or generate evaluates it first.
  std::vector<int32_t> history;
};

namespace {

thread_local std::string g_last_error;

kestrel_status Fail(kestrel_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

kestrel_status FromStatus(const absl::Status& s) {
  if (s.ok()) return KESTREL_OK;
  kestrel_status code = KESTREL_ERROR_INTERNAL;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument: code = KESTREL_ERROR_INVALID_ARGUMENT; break;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied: code = KESTREL_ERROR_IO; break;
    case absl::StatusCode::kDataLoss: code = KESTREL_ERROR_BAD_FORMAT; break;
    case absl::StatusCode::kUnimplemented: code = KESTREL_ERROR_UNSUPPORTED; break;
    case absl::StatusCode::kOutOfRange: code = KESTREL_ERROR_CONTEXT_FULL; break;
    case absl::StatusCode::kResourceExhausted: code = KESTREL_ERROR_OUT_OF_MEMORY; break;
    default: break;
  }
  return Fail(code, std::string(s.message()));
}

// Runs `fn`, turning exceptions (allocation failures above all) into status codes.
template <typename Fn>
kestrel_status Guard(Fn&& fn) {
  try {
    g_last_error.clear();
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(KESTREL_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(KESTREL_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(KESTREL_ERROR_INTERNAL, "internal error");
  }
}

// Copies a caller's params struct over defaults, honouring a smaller (older) struct_size.
template <typename T>
kestrel_status ReadParams(const T* in, T* out, void (*init)(T*), const char* what) {
  init(out);
  if (in == nullptr) return KESTREL_OK;
  if (in->struct_size < sizeof(uint32_t) || in->struct_size > 4096) {
    return Fail(KESTREL_ERROR_INVALID_ARGUMENT,
                absl::StrCat(what, ".struct_size is ", in->struct_size, ": initialize it with ", what, "_init()"));
  }
  const size_t n = in->struct_size < sizeof(T) ? in->struct_size : sizeof(T);
  std::memcpy(static_cast<void*>(out), in, n);
  out->struct_size = sizeof(T);
  return KESTREL_OK;
}

// Evaluates tokens generated earlier but not yet fed through the model.
absl::Status CatchUp(kestrel_session* s) {
  const size_t position = static_cast<size_t>(s->session->position());
  if (s->history.size() <= position) return absl::OkStatus();
  return s->session->Eval(s->history.data() + position, s->history.size() - position);
}

// A failed evaluation: DataLoss there means a non-finite value under check_finite, not a bad file.
kestrel_status FromEvalStatus(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kDataLoss) return Fail(KESTREL_ERROR_NON_FINITE, std::string(s.message()));
  return FromStatus(s);
}

}  // namespace

extern "C" {

const char* kestrel_version(void) { return "0.1.0"; }
int kestrel_abi_version(void) { return KESTREL_ABI_VERSION; }

const char* kestrel_status_name(kestrel_status status) {
  switch (status) {
    case KESTREL_OK: return "KESTREL_OK";
    case KESTREL_ERROR_INVALID_ARGUMENT: return "KESTREL_ERROR_INVALID_ARGUMENT";
    case KESTREL_ERROR_IO: return "KESTREL_ERROR_IO";
    case KESTREL_ERROR_BAD_FORMAT: return "KESTREL_ERROR_BAD_FORMAT";
    case KESTREL_ERROR_UNSUPPORTED: return "KESTREL_ERROR_UNSUPPORTED";
    case KESTREL_ERROR_BACKEND_UNAVAILABLE: return "KESTREL_ERROR_BACKEND_UNAVAILABLE";
    case KESTREL_ERROR_CONTEXT_FULL: return "KESTREL_ERROR_CONTEXT_FULL";
    case KESTREL_ERROR_NON_FINITE: return "KESTREL_ERROR_NON_FINITE";
    case KESTREL_ERROR_BUFFER_TOO_SMALL: return "KESTREL_ERROR_BUFFER_TOO_SMALL";
    case KESTREL_ERROR_OUT_OF_MEMORY: return "KESTREL_ERROR_OUT_OF_MEMORY";
    case KESTREL_ERROR_INTERNAL: return "KESTREL_ERROR_INTERNAL";
  }
  return "KESTREL_UNKNOWN_STATUS";
}

const char* kestrel_last_error(void) { return g_last_error.c_str(); }

const char* kestrel_backends_compiled(void) {
  static const std::string names = [] {
    std::string s;
    for (const kestrel::Backend* b : kestrel::CompiledBackends()) absl::StrAppend(&s, s.empty() ? "" : ",", b->name);
    return s;
  }();
  return names.c_str();
}

void kestrel_model_params_init(kestrel_model_params* p) {
  if (p == nullptr) return;
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
}

kestrel_status kestrel_model_load(const char* path, const kestrel_model_params* params, kestrel_model** out_model) {
  return Guard([&]() -> kestrel_status {
    if (out_model == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "out_model is NULL");
    *out_model = nullptr;
    if (path == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "path is NULL");
    kestrel_model_params p;
    if (auto st = ReadParams(params, &p, kestrel_model_params_init, "kestrel_model_params"); st != KESTREL_OK) return st;
    kestrel::ModelOptions options;
    if (p.backend != nullptr) {
      options.backend = p.backend;
    } else if (const char* env = std::getenv("KESTREL_BACKEND"); env != nullptr) {
      options.backend = env;
    }
    switch (p.weights_memory) {
      case KESTREL_WEIGHTS_AUTO:
        options.weights = kestrel::FileResidence::kAuto;
        break;
      case KESTREL_WEIGHTS_MAPPED:
        options.weights = kestrel::FileResidence::kMapped;
        break;
      case KESTREL_WEIGHTS_HUGE_PAGES:
        options.weights = kestrel::FileResidence::kHugePageCopy;
        break;
      default:
        return Fail(KESTREL_ERROR_INVALID_ARGUMENT,
                    absl::StrCat("kestrel_model_params.weights_memory is ", p.weights_memory,
                                 ": use a kestrel_weights_memory value"));
    }
    if (const char* env = std::getenv("KESTREL_WEIGHTS");
        env != nullptr && options.weights == kestrel::FileResidence::kAuto) {
      const std::string v = env;
      if (v == "mapped") {
        options.weights = kestrel::FileResidence::kMapped;
      } else if (v == "huge-pages") {
        options.weights = kestrel::FileResidence::kHugePageCopy;
      } else if (!v.empty() && v != "auto") {
        return Fail(KESTREL_ERROR_INVALID_ARGUMENT,
                    absl::StrCat("KESTREL_WEIGHTS is '", v, "': use auto, mapped or huge-pages"));
      }
    }
    auto model = kestrel::Model::Load(path, options);
    if (!model.ok()) {
      const auto code = model.status().code();
      if (code == absl::StatusCode::kFailedPrecondition && !options.backend.empty() &&
          model.status().message().find("backend '") == 0) {
        return Fail(KESTREL_ERROR_BACKEND_UNAVAILABLE, std::string(model.status().message()));
      }
      if (code == absl::StatusCode::kNotFound && model.status().message().find("unknown backend") == 0) {
        return Fail(KESTREL_ERROR_BACKEND_UNAVAILABLE, std::string(model.status().message()));
      }
      if (code == absl::StatusCode::kFailedPrecondition) {
        return Fail(KESTREL_ERROR_UNSUPPORTED, std::string(model.status().message()));
      }
      return FromStatus(model.status());
    }
    auto* m = new kestrel_model{std::move(*model), ""};
    m->architecture = kestrel::ArchitectureName(m->model->config().architecture);
    *out_model = m;
    return KESTREL_OK;
  });
}

void kestrel_model_free(kestrel_model* model) { delete model; }

kestrel_status kestrel_model_get_info(const kestrel_model* model, kestrel_model_info* info) {
  if (model == nullptr || info == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "model or info is NULL");
  const auto& c = model->model->config();
  kestrel_model_info out{};
  out.struct_size = sizeof(out);
  out.architecture = model->architecture.c_str();
  out.backend = model->model->backend().name;
  out.n_layers = c.n_layers;
  out.dim = c.dim;
  out.n_heads = c.n_heads;
  out.n_kv_heads = c.n_kv_heads;
  out.head_dim = c.head_dim;
  out.ffn_dim = c.ffn_dim;
  out.vocab_size = c.vocab_size;
  out.context_length = c.context_length;
  out.bos_token = model->model->tokenizer().bos_id();
  out.eos_token = model->model->tokenizer().eos_id();
  out.file_bytes = model->model->file().file_bytes();
  out.load_seconds = model->model->load_seconds();
  if (const kestrel::MappedFile* mapping = model->model->file().mapping(); mapping != nullptr) {
    out.weights_memory = mapping->residence() == kestrel::FileResidence::kHugePageCopy ? KESTREL_WEIGHTS_HUGE_PAGES
                                                                                       : KESTREL_WEIGHTS_MAPPED;
    out.huge_page_bytes = mapping->HugePageBytes();
  }
  // Honour a smaller, older struct.
  const size_t n = info->struct_size >= sizeof(uint32_t) && info->struct_size < sizeof(out) ? info->struct_size : sizeof(out);
  std::memcpy(static_cast<void*>(info), &out, n);
  return KESTREL_OK;
}

kestrel_status kestrel_tokenize(const kestrel_model* model, const char* text, size_t text_len, uint32_t flags,
                                int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return Guard([&]() -> kestrel_status {
    if (model == nullptr || n_tokens == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "model or n_tokens is NULL");
    if (text == nullptr && text_len > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "text is NULL");
    if (tokens == nullptr && capacity > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    kestrel::EncodeOptions options;
    options.add_bos = (flags & KESTREL_TOKENIZE_ADD_BOS) != 0;
    options.parse_special = (flags & KESTREL_TOKENIZE_PARSE_SPECIAL) != 0;
    auto ids = model->model->tokenizer().Encode(std::string_view(text != nullptr ? text : "", text_len), options);
    if (!ids.ok()) return FromStatus(ids.status());
    *n_tokens = ids->size();
    if (ids->size() > capacity) {
      return Fail(KESTREL_ERROR_BUFFER_TOO_SMALL, absl::StrCat("need room for ", ids->size(), " tokens, have ", capacity));
    }
    if (!ids->empty()) std::memcpy(tokens, ids->data(), ids->size() * sizeof(int32_t));
    return KESTREL_OK;
  });
}

kestrel_status kestrel_detokenize(const kestrel_model* model, const int32_t* tokens, size_t n_tokens, char* text,
                                  size_t capacity, size_t* text_len) {
  return Guard([&]() -> kestrel_status {
    if (model == nullptr || text_len == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "model or text_len is NULL");
    if (tokens == nullptr && n_tokens > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    if (text == nullptr && capacity > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "text is NULL");
    const auto& tokenizer = model->model->tokenizer();
    std::string out;
    int32_t previous = -1;
    for (size_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= tokenizer.vocab_size()) {
        return Fail(KESTREL_ERROR_INVALID_ARGUMENT, absl::StrCat("token id ", tokens[i], " at index ", i,
                                                                 " is outside the vocabulary of ", tokenizer.vocab_size()));
      }
      if (tokens[i] != tokenizer.bos_id()) tokenizer.AppendPiece(previous, tokens[i], &out);
      previous = tokens[i];
    }
    *text_len = out.size();
    if (out.size() > capacity) {
      return Fail(KESTREL_ERROR_BUFFER_TOO_SMALL, absl::StrCat("need room for ", out.size(), " bytes, have ", capacity));
    }
    if (!out.empty()) std::memcpy(text, out.data(), out.size());
    return KESTREL_OK;
  });
}

void kestrel_session_params_init(kestrel_session_params* p) {
  if (p == nullptr) return;
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  p->kv_type = KESTREL_KV_F16;
  p->batch_size = 64;
}

kestrel_status kestrel_session_create(const kestrel_model* model, const kestrel_session_params* params,
                                      kestrel_session** out_session) {
  return Guard([&]() -> kestrel_status {
    if (out_session == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "out_session is NULL");
    *out_session = nullptr;
    if (model == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "model is NULL");
    kestrel_session_params p;
    if (auto st = ReadParams(params, &p, kestrel_session_params_init, "kestrel_session_params"); st != KESTREL_OK) return st;
    if (p.kv_type != KESTREL_KV_F32 && p.kv_type != KESTREL_KV_F16) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT, absl::StrCat("unknown kv_type ", p.kv_type));
    }
    kestrel::SessionOptions options;
    options.context_length = p.context_length;
    options.n_threads = p.n_threads;
    options.kv_dtype = p.kv_type == KESTREL_KV_F16 ? kestrel::DType::kF16 : kestrel::DType::kF32;
    options.batch_size = p.batch_size;
    options.check_finite = p.check_finite != 0;
    std::unique_ptr<LayerStatsBridge> bridge;
    if (p.layer_stats != nullptr) {
      bridge.reset(new LayerStatsBridge{p.layer_stats, p.layer_stats_user_data});
      options.layer_stats = &LayerStatsBridge::Forward;
      options.layer_stats_user_data = bridge.get();
    }
    auto session = kestrel::Session::Create(*model->model, options);
    if (!session.ok()) return FromStatus(session.status());
    auto* s = new kestrel_session{model, std::move(bridge), std::move(*session),
                                  std::make_unique<kestrel::Generator>(model->model->config().vocab_size), {}};
    s->history.reserve(static_cast<size_t>(s->session->context_length()));
    *out_session = s;
    return KESTREL_OK;
  });
}

void kestrel_session_free(kestrel_session* session) { delete session; }

kestrel_status kestrel_session_eval(kestrel_session* session, const int32_t* tokens, size_t n_tokens) {
  return Guard([&]() -> kestrel_status {
    if (session == nullptr || (tokens == nullptr && n_tokens > 0)) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session or tokens is NULL");
    }
    if (n_tokens == 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "no tokens to evaluate");
    const size_t context = static_cast<size_t>(session->session->context_length());
    // After generation stopped at a full context the history can hold one token more than fits.
    if (session->history.size() > context || n_tokens > context - session->history.size()) {
      return Fail(KESTREL_ERROR_CONTEXT_FULL, absl::StrCat(n_tokens, " tokens do not fit: ", session->history.size(),
                                                           " of ", context, " context positions are used"));
    }
    const int32_t vocab = session->session->vocab_size();
    for (size_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab) {
        return Fail(KESTREL_ERROR_INVALID_ARGUMENT,
                    absl::StrCat("token id ", tokens[i], " at index ", i, " is outside the vocabulary of ", vocab));
      }
    }
    const size_t before = session->history.size();
    session->history.insert(session->history.end(), tokens, tokens + n_tokens);
    const absl::Status s = CatchUp(session);
    if (!s.ok()) {
      session->history.resize(static_cast<size_t>(session->session->position()) < before
                                  ? static_cast<size_t>(session->session->position())
                                  : before);
      if (s.code() == absl::StatusCode::kDataLoss) return Fail(KESTREL_ERROR_NON_FINITE, std::string(s.message()));
      return FromStatus(s);
    }
    return KESTREL_OK;
  });
}

kestrel_status kestrel_session_logits(kestrel_session* session, const float** logits, int32_t* n_vocab) {
  return Guard([&]() -> kestrel_status {
    if (session == nullptr || logits == nullptr || n_vocab == nullptr) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session, logits or n_vocab is NULL");
    }
    if (session->history.empty()) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "no tokens evaluated yet");
    if (auto s = CatchUp(session); !s.ok()) return FromEvalStatus(s);
    *logits = session->session->logits();
    *n_vocab = session->session->vocab_size();
    return KESTREL_OK;
  });
}

int32_t kestrel_session_position(const kestrel_session* session) {
  return session == nullptr ? 0 : static_cast<int32_t>(session->history.size());
}

kestrel_status kestrel_session_truncate(kestrel_session* session, int32_t n_keep) {
  return Guard([&]() -> kestrel_status {
    if (session == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session is NULL");
    if (n_keep < 0 || static_cast<size_t>(n_keep) > session->history.size()) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT,
                  absl::StrCat("cannot keep ", n_keep, " tokens: the session holds ", session->history.size()));
    }
    session->history.resize(static_cast<size_t>(n_keep));
    const int32_t evaluated = session->session->position();
    if (n_keep < evaluated) {
      // The session's logits belong to its last evaluated token. Step back one more position so
      // that the last kept token is evaluated again (by CatchUp) and the logits follow it.
      if (auto s = session->session->Truncate(n_keep > 0 ? n_keep - 1 : 0); !s.ok()) return FromStatus(s);
    }
    return KESTREL_OK;
  });
}

kestrel_status kestrel_session_reset(kestrel_session* session) { return kestrel_session_truncate(session, 0); }

void kestrel_sampling_params_init(kestrel_sampling_params* p) {
  if (p == nullptr) return;
  std::memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  const kestrel::SamplingConfig d;
  p->temperature = d.temperature;
  p->top_k = d.top_k;
  p->top_p = d.top_p;
  p->min_p = d.min_p;
  p->repeat_penalty = d.repeat_penalty;
  p->repeat_last_n = d.repeat_last_n;
  p->presence_penalty = d.presence_penalty;
  p->frequency_penalty = d.frequency_penalty;
  p->seed = d.seed;
  p->max_tokens = 256;
  p->callback_batch_tokens = 1;
}

kestrel_status kestrel_session_generate(kestrel_session* session, const kestrel_sampling_params* params,
                                        kestrel_token_fn callback, void* user_data, int32_t* n_generated,
                                        kestrel_stop_reason* stop_reason) {
  return Guard([&]() -> kestrel_status {
    if (n_generated != nullptr) *n_generated = 0;
    if (session == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session is NULL");
    kestrel_sampling_params p;
    if (auto st = ReadParams(params, &p, kestrel_sampling_params_init, "kestrel_sampling_params"); st != KESTREL_OK) return st;
    if (p.n_stop_strings > 0 && p.stop_strings == nullptr) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "stop_strings is NULL but n_stop_strings > 0");
    }
    kestrel::GenerateOptions options;
    options.sampling = {p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n,
                        p.presence_penalty, p.frequency_penalty, p.seed};
    options.max_tokens = p.max_tokens;
    options.batch_tokens = p.callback_batch_tokens;
    for (size_t i = 0; i < p.n_stop_strings; ++i) {
      if (p.stop_strings[i] == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "a stop string is NULL");
      options.stop_strings.emplace_back(p.stop_strings[i]);
    }
    if (session->history.empty()) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "evaluate a prompt before generating");
    if (auto s = CatchUp(session); !s.ok()) return FromEvalStatus(s);
    struct Bridge {
      kestrel_token_fn fn;
      void* user;
    } bridge{callback, user_data};
    auto trampoline = [](const char* text, size_t len, const int32_t* tokens, size_t n, void* user) -> bool {
      auto* b = static_cast<Bridge*>(user);
      return b->fn == nullptr || b->fn(text, len, tokens, n, b->user) != 0;
    };
    auto result = session->generator->Run(*session->session, options, &session->history, trampoline, &bridge);
    if (!result.ok()) {
      if (result.status().code() == absl::StatusCode::kDataLoss) {
        return Fail(KESTREL_ERROR_NON_FINITE, std::string(result.status().message()));
      }
      return FromStatus(result.status());
    }
    if (n_generated != nullptr) *n_generated = result->n_generated;
    if (stop_reason != nullptr) *stop_reason = static_cast<kestrel_stop_reason>(result->reason);
    return KESTREL_OK;
  });
}

kestrel_status kestrel_session_get_timings(const kestrel_session* session, kestrel_timings* timings) {
  if (session == nullptr || timings == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session or timings is NULL");
  const kestrel::SessionTimings& t = session->session->timings();
  kestrel_timings out{};
  out.struct_size = sizeof(out);
  out.load_seconds = session->owner->model->load_seconds();
  out.prefill_seconds = t.prefill_seconds;
  out.decode_seconds = t.decode_seconds;
  out.prefill_tokens = t.prefill_tokens;
  out.decode_tokens = t.decode_tokens;
  out.prefill_tokens_per_second = t.prefill_seconds > 0 ? t.prefill_tokens / t.prefill_seconds : 0;
  out.decode_tokens_per_second = t.decode_seconds > 0 ? t.decode_tokens / t.decode_seconds : 0;
  using R = kestrel::TimingRole;
  auto role = [&](R r) { return t.role_seconds[static_cast<size_t>(r)]; };
  out.qkv_seconds = role(R::kQkv);
  out.attention_output_seconds = role(R::kAttentionOutput);
  out.gate_up_seconds = role(R::kGateUp);
  out.down_seconds = role(R::kDown);
  out.lm_head_seconds = role(R::kLmHead);
  out.attention_seconds = role(R::kAttention);
  out.other_seconds = role(R::kOther);
  const size_t n = timings->struct_size >= sizeof(uint32_t) && timings->struct_size < sizeof(out) ? timings->struct_size : sizeof(out);
  std::memcpy(static_cast<void*>(timings), &out, n);
  return KESTREL_OK;
}

kestrel_status kestrel_session_reset_timings(kestrel_session* session) {
  if (session == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "session is NULL");
  session->session->ResetTimings();
  return KESTREL_OK;
}

kestrel_status kestrel_chat_apply(const kestrel_model* model, const char* family_or_null, const kestrel_chat_message* msgs,
                                  size_t n, int add_generation_prompt, int enable_thinking, char* out, size_t capacity,
                                  size_t* out_len) {
  return Guard([&]() -> kestrel_status {
    if (out_len == nullptr) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "out_len is NULL");
    if (msgs == nullptr && n > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "msgs is NULL");
    if (out == nullptr && capacity > 0) return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "out is NULL");
    const std::string family = family_or_null != nullptr ? family_or_null : "";
    if (model == nullptr && family.empty()) {
      return Fail(KESTREL_ERROR_INVALID_ARGUMENT, "model is NULL and no chat template family is named");
    }
    std::vector<kestrel::ChatMessage> messages;
    messages.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (msgs[i].role == nullptr || msgs[i].content == nullptr) {
        return Fail(KESTREL_ERROR_INVALID_ARGUMENT, absl::StrCat("message ", i, " has a NULL role or content"));
      }
      messages.push_back({msgs[i].role, msgs[i].content});
    }
    kestrel::ChatOptions options;
    options.add_generation_prompt = add_generation_prompt != 0;
    options.enable_thinking = enable_thinking != 0;
    std::string chat_template;
    options.bos_token = "<|begin_of_text|>";
    if (model != nullptr) {
      const auto& tokenizer = model->model->tokenizer();
      chat_template = tokenizer.data().chat_template;
      const int32_t bos = tokenizer.bos_id();
      options.bos_token.clear();
      if (bos >= 0) tokenizer.AppendPiece(-1, bos, &options.bos_token);
    }
    auto text = kestrel::ApplyChatTemplate(family, chat_template, messages, options);
    if (!text.ok()) return FromStatus(text.status());
    *out_len = text->size();
    if (text->size() > capacity) {
      return Fail(KESTREL_ERROR_BUFFER_TOO_SMALL, absl::StrCat("need room for ", text->size(), " bytes, have ", capacity));
    }
    if (!text->empty()) std::memcpy(out, text->data(), text->size());
    return KESTREL_OK;
  });
}

}  // extern "C"
