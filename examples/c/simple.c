/*
 * simple: the smallest complete Kestrel program, in C99, using only kestrel.h.
 *
 *   simple MODEL.vqf [PROMPT] [N]
 *
 * Loads the model, tokenizes PROMPT (default "") with BOS, generates N (default 64) tokens greedily
 * and streams the prompt and the generated text to stdout, followed by a newline. Timings go to
 * stderr. On failure it prints one line to stderr and exits with the kestrel_status value.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kestrel/kestrel.h"

/* A hint for each status code, so a user knows what to do about it. */
static const char* hint(kestrel_status status) {
  switch (status) {
    case KESTREL_OK: return "";
    case KESTREL_ERROR_INVALID_ARGUMENT: return "a bad argument";
    case KESTREL_ERROR_IO: return "check the path and permissions";
    case KESTREL_ERROR_BAD_FORMAT: return "the file is not a valid .vqf model; convert it again with kestrel-convert";
    case KESTREL_ERROR_UNSUPPORTED: return "this build does not support the model";
    case KESTREL_ERROR_BACKEND_UNAVAILABLE: return "unset KESTREL_BACKEND or choose a backend this CPU supports";
    case KESTREL_ERROR_CONTEXT_FULL: return "the prompt does not fit in the context";
    case KESTREL_ERROR_NON_FINITE: return "the model produced NaN or Inf";
    case KESTREL_ERROR_BUFFER_TOO_SMALL: return "a buffer was too small";
    case KESTREL_ERROR_OUT_OF_MEMORY: return "out of memory";
    case KESTREL_ERROR_INTERNAL: return "an internal error; please report it";
  }
  return "an unknown status";
}

static int fail(const char* what, kestrel_status status) {
  fprintf(stderr, "simple: %s: %s (%s; %s)\n", what, kestrel_last_error(), kestrel_status_name(status), hint(status));
  return (int)status;
}

/* Streams each piece of generated text as it arrives. */
static int on_text(const char* text, size_t text_len, const int32_t* tokens, size_t n_tokens, void* user_data) {
  (void)tokens;
  (void)n_tokens;
  (void)user_data;
  fwrite(text, 1, text_len, stdout);
  fflush(stdout);
  return 1; /* continue */
}

/* Prints the prompt's text as the model reads it (as llama2.c's run does). */
static kestrel_status print_tokens(const kestrel_model* model, const int32_t* tokens, size_t n_tokens) {
  size_t needed = 0;
  char* text;
  kestrel_status status = kestrel_detokenize(model, tokens, n_tokens, NULL, 0, &needed);
  if (status != KESTREL_OK && status != KESTREL_ERROR_BUFFER_TOO_SMALL) return status;
  text = (char*)malloc(needed + 1);
  if (text == NULL) return KESTREL_ERROR_OUT_OF_MEMORY;
  status = kestrel_detokenize(model, tokens, n_tokens, text, needed, &needed);
  if (status == KESTREL_OK) fwrite(text, 1, needed, stdout);
  free(text);
  return status;
}

int main(int argc, char** argv) {
  const char* model_path;
  const char* prompt = "";
  long n_new = 64;
  kestrel_model_params model_params;
  kestrel_session_params session_params;
  kestrel_sampling_params sampling;
  kestrel_model* model = NULL;
  kestrel_session* session = NULL;
  int32_t* tokens = NULL;
  size_t n_tokens = 0;
  int32_t n_generated = 0;
  kestrel_stop_reason reason = KESTREL_STOP_MAX_TOKENS;
  kestrel_timings timings;
  kestrel_status status;
  int rc = 0;

  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: simple MODEL.vqf [PROMPT] [N]\n");
    return 1;
  }
  model_path = argv[1];
  if (argc > 2) prompt = argv[2];
  if (argc > 3) {
    char* end = NULL;
    errno = 0;
    n_new = strtol(argv[3], &end, 10);
    if (errno != 0 || end == argv[3] || *end != '\0' || n_new < 0 || n_new > 1000000) {
      fprintf(stderr, "simple: N must be an integer in [0, 1000000], got '%s'\n", argv[3]);
      return 1;
    }
  }

  kestrel_model_params_init(&model_params); /* backend NULL: the best, or KESTREL_BACKEND */
  status = kestrel_model_load(model_path, &model_params, &model);
  if (status != KESTREL_OK) return fail("load", status);

  kestrel_session_params_init(&session_params);
  status = kestrel_session_create(model, &session_params, &session);
  if (status != KESTREL_OK) {
    rc = fail("session", status);
    goto done;
  }

  /* Ask for the size first, then tokenize into a buffer that fits. */
  status = kestrel_tokenize(model, prompt, strlen(prompt), KESTREL_TOKENIZE_ADD_BOS, NULL, 0, &n_tokens);
  if (status != KESTREL_OK && status != KESTREL_ERROR_BUFFER_TOO_SMALL) {
    rc = fail("tokenize", status);
    goto done;
  }
  if (n_tokens == 0) {
    fprintf(stderr, "simple: the prompt is empty and the model has no BOS token\n");
    rc = 1;
    goto done;
  }
  tokens = (int32_t*)malloc(n_tokens * sizeof(int32_t));
  if (tokens == NULL) {
    fprintf(stderr, "simple: out of memory\n");
    rc = (int)KESTREL_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  status = kestrel_tokenize(model, prompt, strlen(prompt), KESTREL_TOKENIZE_ADD_BOS, tokens, n_tokens, &n_tokens);
  if (status != KESTREL_OK) {
    rc = fail("tokenize", status);
    goto done;
  }
  status = print_tokens(model, tokens, n_tokens);
  if (status != KESTREL_OK) {
    rc = fail("detokenize", status);
    goto done;
  }
  fflush(stdout);

  status = kestrel_session_eval(session, tokens, n_tokens);
  if (status != KESTREL_OK) {
    fputc('\n', stdout);
    rc = fail("prompt", status);
    goto done;
  }

  kestrel_sampling_params_init(&sampling);
  sampling.temperature = 0.0f; /* greedy */
  sampling.max_tokens = (int32_t)n_new;
  status = kestrel_session_generate(session, &sampling, on_text, NULL, &n_generated, &reason);
  fputc('\n', stdout);
  fflush(stdout);
  if (status != KESTREL_OK) {
    rc = fail("generate", status);
    goto done;
  }

  timings.struct_size = sizeof(timings);
  status = kestrel_session_get_timings(session, &timings);
  if (status != KESTREL_OK) {
    rc = fail("timings", status);
    goto done;
  }
  fprintf(stderr, "simple: %d tokens generated (stop reason %d); prefill %lld tokens at %.1f tokens/s, decode %lld tokens at %.1f tokens/s\n",
          (int)n_generated, (int)reason, (long long)timings.prefill_tokens, timings.prefill_tokens_per_second,
          (long long)timings.decode_tokens, timings.decode_tokens_per_second);

done:
  free(tokens);
  kestrel_session_free(session); /* both accept NULL */
  kestrel_model_free(model);
  return rc;
}
