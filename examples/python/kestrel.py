"""A thin ctypes binding of Kestrel's C API (include/kestrel/kestrel.h); Python standard library only.

    import kestrel
    lib = kestrel.Library("build/capi/libkestrel.so")   # or KESTREL_LIBRARY=... and Library()
    with lib.load("model.vqf") as model, model.session() as session:
        print(session.generate("Once upon a time", max_tokens=50, temperature=0))

Every failing call raises KestrelError(code, message), with the message from kestrel_last_error().
Like the C API: a model may be shared by threads; a session is used by one thread at a time.
"""
import ctypes
import os

# Status codes (kestrel_status).
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_IO = 2
ERROR_BAD_FORMAT = 3
ERROR_UNSUPPORTED = 4
ERROR_BACKEND_UNAVAILABLE = 5
ERROR_CONTEXT_FULL = 6
ERROR_NON_FINITE = 7
ERROR_BUFFER_TOO_SMALL = 8
ERROR_OUT_OF_MEMORY = 9
ERROR_INTERNAL = 10

TOKENIZE_ADD_BOS = 1
TOKENIZE_PARSE_SPECIAL = 2

STOP_REASONS = {0: "max_tokens", 1: "end_of_generation", 2: "stop_string", 3: "callback", 4: "context_full"}


class KestrelError(Exception):
    """A failed Kestrel call: `code` is the kestrel_status value, `name` its constant's name."""

    def __init__(self, code, message, name=None):
        self.code = code
        self.message = message
        self.name = name or f"status {code}"
        super().__init__(f"{message} ({self.name})")


class _ModelParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", ctypes.c_char_p), ("weights_memory", ctypes.c_int32)]


# kestrel_weights_memory
WEIGHTS_MEMORY = {"auto": 0, "mapped": 1, "huge-pages": 2}


_LayerStatsFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _SessionParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("context_length", ctypes.c_int32),
        ("n_threads", ctypes.c_int32),
        ("kv_type", ctypes.c_int32),
        ("batch_size", ctypes.c_int32),
        ("check_finite", ctypes.c_int32),
        ("layer_stats", ctypes.c_void_p),
        ("layer_stats_user_data", ctypes.c_void_p),
    ]


class _SamplingParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("max_tokens", ctypes.c_int32),
        ("stop_strings", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop_strings", ctypes.c_size_t),
        ("callback_batch_tokens", ctypes.c_int32),
    ]


class _ModelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("architecture", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("n_layers", ctypes.c_int32), ("dim", ctypes.c_int32), ("n_heads", ctypes.c_int32),
        ("n_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32), ("ffn_dim", ctypes.c_int32),
        ("vocab_size", ctypes.c_int32), ("context_length", ctypes.c_int32),
        ("bos_token", ctypes.c_int32), ("eos_token", ctypes.c_int32),
        ("file_bytes", ctypes.c_uint64),
        ("load_seconds", ctypes.c_double),
        ("weights_memory", ctypes.c_int32),
        ("huge_page_bytes", ctypes.c_uint64),
    ]


class _Timings(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("load_seconds", ctypes.c_double),
        ("prefill_seconds", ctypes.c_double), ("decode_seconds", ctypes.c_double),
        ("prefill_tokens", ctypes.c_int64), ("decode_tokens", ctypes.c_int64),
        ("prefill_tokens_per_second", ctypes.c_double), ("decode_tokens_per_second", ctypes.c_double),
        ("qkv_seconds", ctypes.c_double), ("attention_output_seconds", ctypes.c_double),
        ("gate_up_seconds", ctypes.c_double), ("down_seconds", ctypes.c_double),
        ("lm_head_seconds", ctypes.c_double), ("attention_seconds", ctypes.c_double),
        ("other_seconds", ctypes.c_double),
    ]


_TokenFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                            ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_void_p)

_P = ctypes.c_void_p
_SIZE_P = ctypes.POINTER(ctypes.c_size_t)
_I32_P = ctypes.POINTER(ctypes.c_int32)


class Library:
    """libkestrel.so, from `path`, else $KESTREL_LIBRARY, else the dynamic loader's search."""

    def __init__(self, path=None):
        path = path or os.environ.get("KESTREL_LIBRARY") or "libkestrel.so.0"
        self._lib = lib = ctypes.CDLL(path)
        sig = {
            "kestrel_version": (ctypes.c_char_p, []),
            "kestrel_status_name": (ctypes.c_char_p, [ctypes.c_int]),
            "kestrel_last_error": (ctypes.c_char_p, []),
            "kestrel_backends_compiled": (ctypes.c_char_p, []),
            "kestrel_model_params_init": (None, [ctypes.POINTER(_ModelParams)]),
            "kestrel_model_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_ModelParams), ctypes.POINTER(_P)]),
            "kestrel_model_free": (None, [_P]),
            "kestrel_model_get_info": (ctypes.c_int, [_P, ctypes.POINTER(_ModelInfo)]),
            "kestrel_tokenize": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, _I32_P,
                                                ctypes.c_size_t, _SIZE_P]),
            "kestrel_detokenize": (ctypes.c_int, [_P, _I32_P, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                                  _SIZE_P]),
            "kestrel_session_params_init": (None, [ctypes.POINTER(_SessionParams)]),
            "kestrel_session_create": (ctypes.c_int, [_P, ctypes.POINTER(_SessionParams), ctypes.POINTER(_P)]),
            "kestrel_session_free": (None, [_P]),
            "kestrel_session_eval": (ctypes.c_int, [_P, _I32_P, ctypes.c_size_t]),
            "kestrel_session_position": (ctypes.c_int32, [_P]),
            "kestrel_session_truncate": (ctypes.c_int, [_P, ctypes.c_int32]),
            "kestrel_session_reset": (ctypes.c_int, [_P]),
            "kestrel_sampling_params_init": (None, [ctypes.POINTER(_SamplingParams)]),
            "kestrel_session_generate": (ctypes.c_int, [_P, ctypes.POINTER(_SamplingParams), _TokenFn, _P, _I32_P,
                                                        ctypes.POINTER(ctypes.c_int)]),
            "kestrel_session_get_timings": (ctypes.c_int, [_P, ctypes.POINTER(_Timings)]),
        }
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes

    def version(self):
        return self._lib.kestrel_version().decode()

    def backends(self):
        return self._lib.kestrel_backends_compiled().decode().split(",")

    def check(self, status):
        if status != OK:
            message = self._lib.kestrel_last_error().decode("utf-8", errors="replace")
            raise KestrelError(status, message, self._lib.kestrel_status_name(status).decode())

    def load(self, path, backend=None, weights="auto"):
        """weights: "auto", "mapped" or "huge-pages" (kestrel_weights_memory)."""
        return Model(self, path, backend, weights)


class _Owned:
    """A C handle freed by `_free_name` on close(), at the end of a `with` block, or when collected."""

    _free_name = None

    def close(self):
        if self._handle:
            getattr(self._lib, self._free_name)(self._handle)
            self._handle = _P()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Model(_Owned):
    """A loaded .vqf model. Free it with close() or a `with` block."""

    _free_name = "kestrel_model_free"

    def __init__(self, library, path, backend=None, weights="auto"):
        self._k = library
        self._lib = library._lib
        self._handle = _P()
        params = _ModelParams()
        self._lib.kestrel_model_params_init(ctypes.byref(params))
        if backend is not None:
            params.backend = backend.encode()
        if weights not in WEIGHTS_MEMORY:
            raise ValueError(f"weights must be one of {sorted(WEIGHTS_MEMORY)}, got {weights!r}")
        params.weights_memory = WEIGHTS_MEMORY[weights]
        library.check(self._lib.kestrel_model_load(os.fsencode(path), ctypes.byref(params),
                                                   ctypes.byref(self._handle)))
        info = _ModelInfo()
        info.struct_size = ctypes.sizeof(info)
        library.check(self._lib.kestrel_model_get_info(self._handle, ctypes.byref(info)))
        self.info = {name: getattr(info, name) for name, _ in _ModelInfo._fields_ if name != "struct_size"}
        for key in ("architecture", "backend"):
            self.info[key] = self.info[key].decode()


    def _fill(self, call, make_buffer):
        """The C API's two-step pattern: ask the size needed, then fill a buffer of that size."""
        needed = ctypes.c_size_t()
        status = call(None, 0, ctypes.byref(needed))
        if status not in (OK, ERROR_BUFFER_TOO_SMALL):
            self._k.check(status)
        size = needed.value
        buffer = make_buffer(size)
        self._k.check(call(buffer, size, ctypes.byref(needed)))
        return buffer, size

    def tokenize(self, text, add_bos=True, parse_special=False):
        data = text.encode("utf-8")
        flags = (TOKENIZE_ADD_BOS if add_bos else 0) | (TOKENIZE_PARSE_SPECIAL if parse_special else 0)
        call = lambda out, capacity, needed: self._lib.kestrel_tokenize(self._handle, data, len(data), flags, out,
                                                                          capacity, needed)
        tokens, size = self._fill(call, lambda n: (ctypes.c_int32 * n)())
        return list(tokens[:size])

    def detokenize_bytes(self, tokens):
        ids = (ctypes.c_int32 * len(tokens))(*tokens)
        call = lambda out, capacity, needed: self._lib.kestrel_detokenize(self._handle, ids, len(tokens), out,
                                                                            capacity, needed)
        text, size = self._fill(call, lambda n: ctypes.create_string_buffer(max(n, 1)))
        return text.raw[:size]

    def detokenize(self, tokens):
        return self.detokenize_bytes(tokens).decode("utf-8", errors="replace")

    def session(self, context_length=0, n_threads=0, check_finite=False):
        return Session(self, context_length, n_threads, check_finite)


class Session(_Owned):
    """One conversation's state (KV cache). The model must outlive it."""

    _free_name = "kestrel_session_free"

    def __init__(self, model, context_length=0, n_threads=0, check_finite=False):
        self.model = model
        self._k = model._k
        self._lib = model._lib
        self._handle = _P()
        params = _SessionParams()
        self._lib.kestrel_session_params_init(ctypes.byref(params))
        params.context_length = context_length
        params.n_threads = n_threads
        params.check_finite = 1 if check_finite else 0
        self._k.check(self._lib.kestrel_session_create(model._handle, ctypes.byref(params),
                                                       ctypes.byref(self._handle)))
        self.last_tokens = []
        self.last_stop_reason = None


    @property
    def position(self):
        return self._lib.kestrel_session_position(self._handle)

    def eval(self, tokens):
        ids = (ctypes.c_int32 * len(tokens))(*tokens)
        self._k.check(self._lib.kestrel_session_eval(self._handle, ids, len(tokens)))

    def reset(self):
        self._k.check(self._lib.kestrel_session_reset(self._handle))

    def truncate(self, n_keep):
        self._k.check(self._lib.kestrel_session_truncate(self._handle, n_keep))

    def generate(self, prompt=None, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
                 repeat_penalty=1.0, seed=0, stop=None, on_text=None, on_bytes=None):
        """Evaluates `prompt` (a str, tokenized with BOS, or a list of token ids; None continues the
        session) and generates. Returns the generated text; `on_text(str)` or `on_bytes(bytes)` sees
        it as it streams (whole UTF-8 characters) and may return False to stop.
        The generated ids land in self.last_tokens and the stop reason in self.last_stop_reason."""
        if isinstance(prompt, str):
            prompt = self.model.tokenize(prompt)
        if prompt:
            self.eval(prompt)
        params = _SamplingParams()
        self._lib.kestrel_sampling_params_init(ctypes.byref(params))
        params.temperature = temperature
        params.top_k = top_k
        params.top_p = top_p
        params.min_p = min_p
        params.repeat_penalty = repeat_penalty
        params.seed = seed
        params.max_tokens = max_tokens
        stops = [s.encode("utf-8") for s in (stop or [])]
        stop_array = (ctypes.c_char_p * max(len(stops), 1))(*stops)
        if stops:
            params.stop_strings = stop_array
            params.n_stop_strings = len(stops)
        pieces = []
        tokens = []
        failure = []

        def callback(text, text_len, ids, n_ids, _user):
            try:
                piece = ctypes.string_at(text, text_len) if text_len else b""
                pieces.append(piece)
                tokens.extend(ids[i] for i in range(n_ids))
                keep_going = True
                if on_bytes is not None and piece:
                    keep_going = on_bytes(piece) is not False
                if on_text is not None and piece:
                    keep_going = on_text(piece.decode("utf-8", errors="replace")) is not False and keep_going
                return 1 if keep_going else 0
            except BaseException as e:  # never let an exception unwind through C
                failure.append(e)
                return 0

        fn = _TokenFn(callback)
        n_generated = ctypes.c_int32()
        reason = ctypes.c_int()
        status = self._lib.kestrel_session_generate(self._handle, ctypes.byref(params), fn, None,
                                                    ctypes.byref(n_generated), ctypes.byref(reason))
        if failure:
            raise failure[0]
        self._k.check(status)
        self.last_tokens = tokens
        self.last_stop_reason = STOP_REASONS.get(reason.value, reason.value)
        return b"".join(pieces).decode("utf-8", errors="replace")

    def timings(self):
        t = _Timings()
        t.struct_size = ctypes.sizeof(t)
        self._k.check(self._lib.kestrel_session_get_timings(self._handle, ctypes.byref(t)))
        return {name: getattr(t, name) for name, _ in _Timings._fields_ if name != "struct_size"}
