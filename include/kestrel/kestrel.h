/*
 * Kestrel: CPU inference of quantized LLMs behind a stable C ABI.
 *
 * Conventions
 *  - Every function that can fail returns a kestrel_status; KESTREL_OK is 0. After a failure,
 *    kestrel_last_error() returns a message for the calling thread (thread-local; valid until
 *    that thread's next Kestrel call). The library never aborts, exits or prints on bad input.
 *  - Parameter structs start with `struct_size` and are filled with defaults by their _init
 *    function; fields added later go at the end, so old callers keep working.
 *  - Ownership: each _load/_create has a _free that accepts NULL. A session borrows its model: the
 *    model must outlive every session made from it. Buffers passed in stay the caller's; calls that
 *    fill a buffer report the size they need.
 *
 * Thread safety
 *  - A kestrel_model is immutable after loading: any number of threads may use one model at once
 *    (tokenize, detokenize, create sessions).
 *  - A kestrel_session must be used by one thread at a time; different sessions may run
 *    concurrently, each with its own worker threads.
 */
#ifndef KESTREL_KESTREL_H_
#define KESTREL_KESTREL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KESTREL_BUILDING_LIBRARY)
#define KESTREL_API __attribute__((visibility("default")))
#else
#define KESTREL_API
#endif

#if defined(__GNUC__)
#define KESTREL_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define KESTREL_DEPRECATED(msg)
#endif

/* ---- Versions ----------------------------------------------------------------------------- */
#define KESTREL_VERSION_MAJOR 0
#define KESTREL_VERSION_MINOR 1
#define KESTREL_VERSION_PATCH 0
/* The ABI version is the shared library's SONAME; it changes only when the ABI breaks. */
#define KESTREL_ABI_VERSION 0

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
KESTREL_API const char* kestrel_version(void);
KESTREL_API int kestrel_abi_version(void);

/* ---- Status codes (values are never reused) ------------------------------------------------ */
typedef enum kestrel_status {
  KESTREL_OK = 0,
  KESTREL_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle, an out-of-range parameter, a bad token id */
  KESTREL_ERROR_IO = 2,               /* a file is missing or unreadable */
  KESTREL_ERROR_BAD_FORMAT = 3,       /* a file is corrupt or not what it claims to be */
  KESTREL_ERROR_UNSUPPORTED = 4,      /* valid, but not supported by this build */
  KESTREL_ERROR_BACKEND_UNAVAILABLE = 5, /* unknown backend, or the CPU lacks its features */
  KESTREL_ERROR_CONTEXT_FULL = 6,     /* the tokens do not fit in the session's context */
  KESTREL_ERROR_NON_FINITE = 7,       /* a kernel produced NaN/Inf (with check_finite) */
  KESTREL_ERROR_BUFFER_TOO_SMALL = 8, /* the required size was reported */
  KESTREL_ERROR_OUT_OF_MEMORY = 9,
  KESTREL_ERROR_INTERNAL = 10
} kestrel_status;

/* A constant name for a status code ("KESTREL_ERROR_IO"), or "KESTREL_UNKNOWN_STATUS". */
KESTREL_API const char* kestrel_status_name(kestrel_status status);
/* The calling thread's message for its last failed call ("" if none). */
KESTREL_API const char* kestrel_last_error(void);

/* ---- Model -------------------------------------------------------------------------------- */
typedef struct kestrel_model kestrel_model;

/* How the weights are held in memory (kestrel_model_params.weights_memory). */
typedef enum kestrel_weights_memory {
  /* HUGE_PAGES on Linux when transparent huge pages are enabled and the file fits in half of the
   * memory available at load; MAPPED otherwise. The KESTREL_WEIGHTS environment variable
   * ("mapped", "huge-pages") overrides AUTO. */
  KESTREL_WEIGHTS_AUTO = 0,
  /* mmap of the file: no copy, shared with the page cache and other processes, paged in on first
   * use (the first prompt pays for it). Its speed is the page cache's: on the VM in
   * bench/README.md, a file just written decoded 2-10x slower through a mapping than the same file
   * after a fresh sequential read. */
  KESTREL_WEIGHTS_MAPPED = 1,
  /* Read at load into private memory advised for 2 MiB pages: decode reads every weight once per
   * token, at the same speed whatever state the page cache is in, and 2 MiB pages spare TLB
   * misses (a few percent over 4 KiB ones there; bench/README.md). Costs the read at load and the
   * file's size in memory that the system cannot reclaim. */
  KESTREL_WEIGHTS_HUGE_PAGES = 2
} kestrel_weights_memory;

typedef struct kestrel_model_params {
  uint32_t struct_size; /* sizeof(kestrel_model_params), set by _init */
  /* Backend name ("generic", ...) or NULL / "auto" for the best one this CPU supports. When NULL,
   * the KESTREL_BACKEND environment variable is honoured. */
  const char* backend;
  int32_t weights_memory; /* a kestrel_weights_memory; default KESTREL_WEIGHTS_AUTO */
} kestrel_model_params;

KESTREL_API void kestrel_model_params_init(kestrel_model_params* params);

/* Maps and validates a .vqf file. params may be NULL (defaults). On success *out_model owns it. */
KESTREL_API kestrel_status kestrel_model_load(const char* path, const kestrel_model_params* params,
                                              kestrel_model** out_model);
KESTREL_API void kestrel_model_free(kestrel_model* model);

typedef struct kestrel_model_info {
  uint32_t struct_size;
  const char* architecture; /* "llama", "qwen2", "qwen3"; valid while the model lives */
  const char* backend;      /* the backend running this model */
  int32_t n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim;
  int32_t vocab_size, context_length;
  int32_t bos_token, eos_token; /* -1 when absent */
  uint64_t file_bytes;
  double load_seconds;
  int32_t weights_memory;   /* KESTREL_WEIGHTS_MAPPED or KESTREL_WEIGHTS_HUGE_PAGES: what load chose */
  uint64_t huge_page_bytes; /* bytes of the weights the OS holds on huge pages now (0 if unknown) */
} kestrel_model_info;

KESTREL_API kestrel_status kestrel_model_get_info(const kestrel_model* model, kestrel_model_info* info);

/* Names of the backends compiled in, comma-separated, e.g. "generic,avx2". */
KESTREL_API const char* kestrel_backends_compiled(void);

/* ---- Tokens ------------------------------------------------------------------------------- */
enum {
  KESTREL_TOKENIZE_ADD_BOS = 1u << 0,       /* prepend BOS when the model has one */
  KESTREL_TOKENIZE_PARSE_SPECIAL = 1u << 1  /* recognise special-token text such as "<|im_end|>" */
};

/* Encodes `text_len` bytes of `text`. Writes up to `capacity` ids; *n_tokens receives the count
 * needed. Returns KESTREL_ERROR_BUFFER_TOO_SMALL when capacity < *n_tokens. */
KESTREL_API kestrel_status kestrel_tokenize(const kestrel_model* model, const char* text, size_t text_len,
                                            uint32_t flags, int32_t* tokens, size_t capacity, size_t* n_tokens);

/* Decodes ids to UTF-8 text (as a stream from the start, so the first piece after BOS behaves as in
 * generation). Writes up to `capacity` bytes (no terminator); *text_len receives the size needed. */
KESTREL_API kestrel_status kestrel_detokenize(const kestrel_model* model, const int32_t* tokens, size_t n_tokens,
                                              char* text, size_t capacity, size_t* text_len);

/* ---- Session ------------------------------------------------------------------------------ */
typedef struct kestrel_session kestrel_session;

typedef enum kestrel_kv_type { KESTREL_KV_F32 = 0, KESTREL_KV_F16 = 1 } kestrel_kv_type;

/* Per-layer statistics for the diagnostics callback (see kestrel_session_params.layer_stats). */
typedef struct kestrel_layer_stats {
  int32_t layer;     /* -1 for the final norm */
  const char* stage; /* "attention", "ffn" or "final_norm" */
  int32_t position;
  float max_abs;
  float rms;
  int64_t non_finite;
} kestrel_layer_stats;
typedef void (*kestrel_layer_stats_fn)(const kestrel_layer_stats* stats, void* user_data);

typedef struct kestrel_session_params {
  uint32_t struct_size;
  int32_t context_length; /* 0: the model's, at most 4096; up to the model's context */
  int32_t n_threads;      /* 0: the hardware's (at most 8) */
  int32_t kv_type; /* a kestrel_kv_type value (an int here, so any value a caller passes is defined);
                     default KESTREL_KV_F16: half the memory of F32, faster decode at long contexts */
  int32_t batch_size;     /* prompt tokens per prefill step (default 64) */
  int32_t check_finite;   /* nonzero: stop at the first non-finite kernel output (also
                             KESTREL_CHECK_FINITE=1) with KESTREL_ERROR_NON_FINITE */
  kestrel_layer_stats_fn layer_stats; /* optional; also KESTREL_DUMP_LAYERS=1 prints them */
  void* layer_stats_user_data;
} kestrel_session_params;

KESTREL_API void kestrel_session_params_init(kestrel_session_params* params);
KESTREL_API kestrel_status kestrel_session_create(const kestrel_model* model, const kestrel_session_params* params,
                                                  kestrel_session** out_session);
KESTREL_API void kestrel_session_free(kestrel_session* session);

/* Appends tokens to the session's context and evaluates them (the prompt, or later turns).
 * KESTREL_ERROR_CONTEXT_FULL when they do not fit; nothing is evaluated then. */
KESTREL_API kestrel_status kestrel_session_eval(kestrel_session* session, const int32_t* tokens, size_t n_tokens);

/* The logits after the last evaluated token: *logits points to `*n_vocab` floats owned by the
 * session, valid until its next call. */
KESTREL_API kestrel_status kestrel_session_logits(kestrel_session* session, const float** logits, int32_t* n_vocab);

/* Number of tokens in the context (evaluated or generated). */
KESTREL_API int32_t kestrel_session_position(const kestrel_session* session);

/* Forgets everything (n_keep = 0) or keeps the first n_keep tokens. */
KESTREL_API kestrel_status kestrel_session_truncate(kestrel_session* session, int32_t n_keep);
KESTREL_API kestrel_status kestrel_session_reset(kestrel_session* session);

typedef struct kestrel_sampling_params {
  uint32_t struct_size;
  float temperature;     /* default 0.8; 0 = greedy */
  int32_t top_k;         /* default 40; 0 = off */
  float top_p;           /* default 0.95; 1 = off */
  float min_p;           /* default 0.05; 0 = off */
  float repeat_penalty;  /* default 1.0 = off */
  int32_t repeat_last_n; /* default 64 */
  float presence_penalty;
  float frequency_penalty;
  uint64_t seed;          /* same seed, same model, same prompt: same tokens */
  int32_t max_tokens;     /* default 256 */
  const char* const* stop_strings; /* optional array of n_stop_strings NUL-terminated strings */
  size_t n_stop_strings;
  int32_t callback_batch_tokens; /* tokens per callback call (default 1) */
} kestrel_sampling_params;

KESTREL_API void kestrel_sampling_params_init(kestrel_sampling_params* params);

/* Receives generated text: `text_len` bytes of whole UTF-8 characters (no terminator), and the
 * tokens they came from. Return nonzero to continue, 0 to stop generation. */
typedef int (*kestrel_token_fn)(const char* text, size_t text_len, const int32_t* tokens, size_t n_tokens,
                                void* user_data);

typedef enum kestrel_stop_reason {
  KESTREL_STOP_MAX_TOKENS = 0,
  KESTREL_STOP_END_OF_GENERATION = 1,
  KESTREL_STOP_STOP_STRING = 2,
  KESTREL_STOP_CALLBACK = 3,
  KESTREL_STOP_CONTEXT_FULL = 4
} kestrel_stop_reason;

/* Generates after the evaluated context (evaluate a prompt first). callback may be NULL.
 * n_generated and stop_reason may be NULL. */
KESTREL_API kestrel_status kestrel_session_generate(kestrel_session* session, const kestrel_sampling_params* params,
                                                    kestrel_token_fn callback, void* user_data,
                                                    int32_t* n_generated, kestrel_stop_reason* stop_reason);

/* ---- Timings ------------------------------------------------------------------------------ */
typedef struct kestrel_timings {
  uint32_t struct_size;
  double load_seconds;
  double prefill_seconds, decode_seconds;
  int64_t prefill_tokens, decode_tokens;
  double prefill_tokens_per_second, decode_tokens_per_second;
  /* Time by role: matrix products for QKV, attention output, gate+up, down, LM head; attention
   * over the KV cache; everything else (norms, RoPE, embeddings, quantizing activations). */
  double qkv_seconds, attention_output_seconds, gate_up_seconds, down_seconds, lm_head_seconds;
  double attention_seconds, other_seconds;
} kestrel_timings;

KESTREL_API kestrel_status kestrel_session_get_timings(const kestrel_session* session, kestrel_timings* timings);
KESTREL_API kestrel_status kestrel_session_reset_timings(kestrel_session* session);

/* ---- Chat templates ------------------------------------------------------------------------
 * Thread-safe: only reads the model. Known families: "chatml", "qwen2.5", "qwen3", "llama3". */
typedef struct kestrel_chat_message {
  const char* role;    /* "system", "user", "assistant" ("tool" for qwen3); NUL-terminated */
  const char* content; /* NUL-terminated UTF-8 */
} kestrel_chat_message;

/* Renders the conversation `msgs[0..n)` as prompt text in the model's chat format: the family named
 * by `family_or_null`, or, when NULL or "", the one recognised from the model's stored chat template.
 * `add_generation_prompt` nonzero ends the text with the assistant's header; `enable_thinking` zero
 * makes Qwen3 skip its reasoning (an empty think block follows the header). `model` may be NULL when
 * a family is named (llama3 then starts with "<|begin_of_text|>").
 * Writes up to `capacity` bytes to `out` (no terminator); *out_len receives the size needed.
 * Tokenize the result with KESTREL_TOKENIZE_PARSE_SPECIAL so its markers become special tokens.
 * Returns KESTREL_ERROR_BUFFER_TOO_SMALL when capacity < *out_len, KESTREL_ERROR_UNSUPPORTED when
 * the model's template is not a known family (name one), KESTREL_ERROR_INVALID_ARGUMENT for an
 * unknown family name, no template and no name, or a NULL role/content. */
KESTREL_API kestrel_status kestrel_chat_apply(const kestrel_model* model, const char* family_or_null,
                                              const kestrel_chat_message* msgs, size_t n, int add_generation_prompt,
                                              int enable_thinking, char* out, size_t capacity, size_t* out_len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KESTREL_KESTREL_H_ */
