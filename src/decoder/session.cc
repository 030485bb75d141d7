// The transformer forward pass (Llama, Qwen2, Qwen3), composed from backend kernels.
#include "decoder/session.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "backend/q8_0_summary.h"
#include "backend/rope_angles.h"
#include "platform/cache_size.h"

namespace kestrel {
namespace {

using Clock = std::chrono::steady_clock;

// Prompt tokens per attention_tokens call; each thread's scores_ share holds that many tokens'
// scores (the kernel table's contract asks for room for two).
constexpr int32_t kTokensPerAttentionCall = 2;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// The rows from `from` on of prepared activations (float rows, and their Q8_0 blocks, sums and
// scales where quantized).
Activations RowsFrom(const Activations& a, int64_t from) {
  Activations rows = a;
  const int64_t blocks = a.columns / kQuantBlockSize;
  if (rows.f32 != nullptr) rows.f32 += from * a.columns;
  if (rows.q8_0 != nullptr) {
    rows.q8_0 += from * blocks;
    rows.q8_0_sums += from * blocks;
    rows.q8_0_scales += from * blocks;
    rows.q4_0_offsets = nullptr;  // laid out for all the rows; the kernel works out its own
  }
  // bf16 tiles hold 16 tokens each: from inside a tile, a kernel rounds f32 itself.
  if (rows.bf16 != nullptr) rows.bf16 = from % 16 == 0 ? rows.bf16 + from / 16 * kBf16TileElements : nullptr;
  rows.n_tokens = a.n_tokens - from;
  return rows;
}

// FNV-1a over the logits' bytes, for one-line comparisons across runs, backends and machines.
uint64_t Fnv1a(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

const char* TimingRoleName(TimingRole role) {
  switch (role) {
    case TimingRole::kQkv: return "qkv";
    case TimingRole::kAttentionOutput: return "attn_output";
    case TimingRole::kGateUp: return "gate_up";
    case TimingRole::kDown: return "down";
    case TimingRole::kLmHead: return "lm_head";
    case TimingRole::kAttention: return "attention";
    case TimingRole::kOther: return "other";
    case TimingRole::kCount: break;
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const Model& model, const SessionOptions& options) {
  if (options.kv_dtype != DType::kF32 && options.kv_dtype != DType::kF16) {
    return absl::InvalidArgumentError("KV cache type must be f32 or f16");
  }
  if (options.context_length < 0 || options.context_length > model.config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat("context length ", options.context_length, " is outside [0, ",
                                                   model.config().context_length, "] (0 = the model's)"));
  }
  if (options.n_threads < 0 || options.n_threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("thread count ", options.n_threads, " is outside [0, 256]"));
  }
  if (options.batch_size < 1 || options.batch_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", options.batch_size, " is outside [1, 4096]"));
  }
  int n_threads = options.n_threads;
  if (n_threads == 0) n_threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  std::unique_ptr<Session> s(new Session(model, options, n_threads));
  if (auto st = s->scratch_.Allocate(TransparentHugePagesEnabled()); !st.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("working buffers: ", st.message()));
  }
  if (auto st = s->AllocateKvCache(); !st.ok()) return st;
  return s;
}

Session::Session(const Model& model, const SessionOptions& options, int n_threads)
    : model_(model),
      options_(options),
      ahead_(std::make_unique<ReadAhead[]>(static_cast<size_t>(std::max(1, n_threads)))),
      pool_(n_threads),
      rows_(n_threads),
      part_start_(n_threads),
      part_finish_(n_threads) {
  const ModelConfig& c = model.config();
  context_length_ = options.context_length > 0 ? options.context_length
                                               : std::min(c.context_length, kDefaultContextLength);
  dump_logits_ = EnvFlag("KESTREL_DUMP_LOGITS");
  if (EnvFlag("KESTREL_CHECK_FINITE")) options_.check_finite = true;
  // Decode's read-ahead: a quarter of a core's L2, so that what a thread reads ahead stays there
  // beside the lines its kernel prefetches. KESTREL_READ_AHEAD_KB overrides it (0: none; at most
  // 1 GB, and what is not a number counts as 0), for measurements.
  if (n_threads > 1) {
    const char* kb = std::getenv("KESTREL_READ_AHEAD_KB");
    ahead_bytes_ = kb != nullptr ? std::clamp<int64_t>(std::strtoll(kb, nullptr, 10), 0, int64_t{1} << 20) * 1024
                                 : L2BytesPerCore() / 4;
    if (ahead_bytes_ > 0) pool_.SetIdleWork(&Session::ReadAheadStep, this);
  }
  const size_t b = static_cast<size_t>(options.batch_size);
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim, kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t half_head = static_cast<size_t>(c.head_dim / 2);
  const size_t widest = std::max({static_cast<size_t>(c.dim), q_dim, static_cast<size_t>(c.ffn_dim)});
  const size_t q8_blocks = b * (widest / kQuantBlockSize + 1);
  scratch_.Add(&x_, b * c.dim);
  scratch_.Add(&xn_, b * c.dim);
  scratch_.Add(&q_, b * q_dim);
  scratch_.Add(&k_, b * kv_dim);
  scratch_.Add(&v_, b * kv_dim);
  scratch_.Add(&attn_, b * q_dim);
  scratch_.Add(&proj_, b * c.dim);
  scratch_.Add(&gate_, b * c.ffn_dim);
  scratch_.Add(&up_, b * c.ffn_dim);
  scratch_.Add(&logits_, static_cast<size_t>(c.vocab_size));
  scratch_.Add(&rope_cos_, b * half_head);
  scratch_.Add(&rope_sin_, b * half_head);
  scratch_.Add(&scores_, static_cast<size_t>(n_threads) * kTokensPerAttentionCall * (c.n_heads / c.n_kv_heads) *
                             context_length_);
  scratch_.Add(&qx_, q8_blocks);
  scratch_.Add(&qx_sums_, q8_blocks);
  scratch_.Add(&qx_scales_, q8_blocks);
  // bf16 tiles of 16 tokens by 32 columns for a batch of the widest input (Activations::bf16).
  if (model.backend().kernels->f32_to_bf16_tile != nullptr) {
    scratch_.Add(&xbf_, (b + 15) / 16 * (widest / kQuantBlockSize) * static_cast<size_t>(kBf16TileElements));
  }
  // The Q4_0 offsets table, where the backend reads one and some product has Q4_0 weights.
  q4_0_offset_run_ = model.backend().kernels->q4_0_offset_run;
  bool any_q4_0 = false;
  for (const LayerWeights& w : model.layers()) {
    for (const MatrixView* m : {&w.q, &w.k, &w.v, &w.attn_output, &w.gate, &w.up, &w.down}) {
      any_q4_0 = any_q4_0 || m->dtype == DType::kQ4_0;
    }
  }
  if (!any_q4_0) q4_0_offset_run_ = 0;
  if (q4_0_offset_run_ > 0) {
    const int64_t widest_blocks = (widest + kQuantBlockSize - 1) / kQuantBlockSize;
    scratch_.Add(&qx_q4_0_offsets_, static_cast<size_t>(Q4_0OffsetsCount(b, widest_blocks, q4_0_offset_run_)));
  }
}

absl::Status Session::AllocateKvCache() {
  const ModelConfig& c = model_.config();
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t kv_bytes =
      static_cast<size_t>(c.n_layers) * context_length_ * kv_dim * DTypeBlockBytes(options_.kv_dtype);
  // Head-major: [layer][kv head][position][head_dim], so attention reads each head's keys and
  // values as one contiguous stream (position-major rows of all heads put each head's rows a page
  // apart at Qwen3 sizes, and attention over 4096 positions ran 2x slower). The OS commits pages
  // as positions are written, so a long context costs memory as it is used. On huge pages, like
  // the weights (decode reads all of it every token; after 1024 positions, Qwen3-1.7B Q4_0 decode
  // ran 10-18% faster, bench/README.md): then each head's region commits 2 MiB at a
  // time, which at Qwen3-1.7B's 256 bytes per position and head is all of a 4096-position cache
  // at the first token. So only where both caches fit in a quarter of the memory available.
  const bool huge = TransparentHugePagesEnabled() && 2 * kv_bytes <= AvailableMemoryBytes() / 4;
  for (HugePageBuffer* cache : {&k_cache_, &v_cache_}) {
    auto buffer = HugePageBuffer::Allocate(kv_bytes, huge);
    if (!buffer.ok()) return absl::ResourceExhaustedError(absl::StrCat("KV cache: ", buffer.status().message()));
    *cache = std::move(*buffer);
  }
  return absl::OkStatus();
}

absl::Status Session::Truncate(int32_t n_keep) {
  if (n_keep < 0 || n_keep > position_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot keep ", n_keep, " positions: the session holds ", position_));
  }
  position_ = n_keep;
  return absl::OkStatus();
}

absl::Status Session::Eval(const int32_t* tokens, size_t n, bool decode) {
  if (n == 0) return absl::InvalidArgumentError("no tokens to evaluate");
  if (n > static_cast<size_t>(context_length_ - position_)) {
    return absl::OutOfRangeError(absl::StrCat(n, " tokens do not fit: ", position_, " of ", context_length_,
                                              " context positions are used"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= model_.config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", tokens[i], " at index ", i,
                                                     " is outside the vocabulary of ", model_.config().vocab_size));
    }
  }
  const auto start = Clock::now();
  const int32_t batch = options_.batch_size;
  for (size_t done = 0; done < n;) {
    const int32_t chunk = static_cast<int32_t>(std::min<size_t>(batch, n - done));
    const bool last = done + chunk == n;
    if (auto s = Forward(tokens + done, chunk, last); !s.ok()) return s;
    done += chunk;
  }
  if (decode) {
    timings_.decode_seconds += Since(start);
    timings_.decode_tokens += static_cast<int64_t>(n);
  } else {
    timings_.prefill_seconds += Since(start);
    timings_.prefill_tokens += static_cast<int64_t>(n);
  }
  if (dump_logits_) {
    const int32_t vocab = model_.config().vocab_size;
    int32_t top1 = 0, top2 = vocab > 1 ? 1 : 0;
    if (vocab > 1 && logits_[1] > logits_[0]) std::swap(top1, top2);
    for (int32_t i = 2; i < vocab; ++i) {
      if (logits_[i] > logits_[top1]) {
        top2 = top1;
        top1 = i;
      } else if (logits_[i] > logits_[top2]) {
        top2 = i;
      }
    }
    std::fprintf(stderr, "[kestrel] logits pos=%d fnv1a=%016llx top1=%d (%.6f) top2=%d (%.6f) margin=%.6f backend=%s\n",
                 position_ - 1, static_cast<unsigned long long>(Fnv1a(logits_.data(), logits_.size() * 4)), top1,
                 logits_[top1], top2, logits_[top2], logits_[top1] - logits_[top2], model_.backend().name);
  }
  return absl::OkStatus();
}

void Session::PrepareInput(float* x, int32_t n, int64_t columns, std::initializer_list<DType> readers, RowStep step) {
  PrepareInput(x, nullptr, n, columns, readers, step);
}

void Session::PrepareInput(float* x, const float* norm, int32_t n, int64_t columns,
                           std::initializer_list<DType> readers, RowStep step) {
  const KernelTable& k = *model_.backend().kernels;
  const float* input = norm != nullptr ? xn_.data() : x;
  input_ = Activations{input, nullptr, n, columns};
  // Which forms the readers take: bf16 tiles for the prompt products that compute in bf16, Q8_0
  // blocks for the other quantized ones (float weights read x itself).
  bool bf16 = false, integer = false, q4_0_integer = false;
  for (const DType dtype : readers) {
    if (!IsBlockQuantized(dtype)) continue;
    const bool takes_bf16 = TakesBf16Path(k, dtype, n);
    bf16 = bf16 || takes_bf16;
    integer = integer || !takes_bf16;
    q4_0_integer = q4_0_integer || (dtype == DType::kQ4_0 && !takes_bf16);
  }
  const bool quantize = bf16 || integer;
  if (norm == nullptr && !quantize && step == RowStep::kNone) return;
  const int64_t blocks = columns / kQuantBlockSize;
  const int64_t bf16_block_stride = (n + 15) / 16 * kBf16TileElements;
  // Where only bf16 readers take the whole batch, only the last row is quantized too: the last
  // layer carries it alone past its keys and values (RowsFrom), a product of one token on the
  // integer kernels.
  const int64_t first_quantized = bf16 && !integer ? n - 1 : 0;
  // For a prompt's integer Q4_0 products only: a decode step's one token gains nothing from a table.
  const bool q4_0_offsets = q4_0_integer && n > 1 && q4_0_offset_run_ > 0;
  auto job = [&](int64_t begin, int64_t end, int /*part*/) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = x + t * columns;
      if (step == RowStep::kAddResidual) {
        const float* y = proj_.data() + t * columns;
        for (int64_t e = 0; e < columns; ++e) row[e] += y[e];
      } else if (step == RowStep::kSiluGate) {
        k.silu_mul(row, up_.data() + t * columns, columns);
      }
      if (norm != nullptr) k.rmsnorm(row, norm, xn_.data() + t * columns, columns, model_.config().norm_eps);
      const bool quantize_row = quantize && t >= first_quantized;
      if (quantize_row && k.quantize_q8_0_summarized != nullptr) {
        k.quantize_q8_0_summarized(input + t * columns, qx_.data() + t * blocks, qx_sums_.data() + t * blocks,
                                   qx_scales_.data() + t * blocks, columns);
      } else if (quantize_row) {
        k.quantize_q8_0(input + t * columns, qx_.data() + t * blocks, columns);
      }
    }
    // Chunks start on whole tiles of 16 tokens (the SpreadChunks call below), so each tile is
    // rounded by the thread that just wrote its rows.
    for (int64_t t = begin; bf16 && t < end; t += 16) {
      k.f32_to_bf16_tile(input + t * columns, columns, std::min<int64_t>(16, n - t),
                         xbf_.data() + t / 16 * kBf16TileElements, bf16_block_stride);
    }
    const int64_t q_begin = std::max(begin, first_quantized);
    if (quantize && k.quantize_q8_0_summarized == nullptr && q_begin < end) {
      SummarizeQ8_0Blocks(qx_.data() + q_begin * blocks, (end - q_begin) * blocks, qx_sums_.data() + q_begin * blocks,
                          qx_scales_.data() + q_begin * blocks);
    }
    if (q4_0_offsets) {
      FillQ4_0Offsets(qx_sums_.data(), blocks, n, q4_0_offset_run_, begin, end, qx_q4_0_offsets_.data());
    }
  };
  SpreadChunks(n, int64_t{n} * columns * 4, job, bf16 ? 16 : 1);  // prefill's many rows, not one decode row
  if (quantize) {
    input_.q8_0 = qx_.data();
    input_.q8_0_sums = qx_sums_.data();
    input_.q8_0_scales = qx_scales_.data();
    if (q4_0_offsets) {
      input_.q4_0_offsets = qx_q4_0_offsets_.data();
      input_.q4_0_offset_run = q4_0_offset_run_;
    }
    if (bf16) {
      input_.bf16 = xbf_.data();
      input_.bf16_block_stride = bf16_block_stride;
    }
  }
}

void Session::Linear(const MatrixView& w, int32_t n, float* y, TimingRole role, const NextProduct& next) {
  const LinearOutput output{&w, y};
  Linear(&output, 1, n, role, next);
}

bool Session::ReadAheadStep(void* session, int thread) {
  return static_cast<Session*>(session)->ahead_[static_cast<size_t>(thread)].Step();
}

void Session::Linear(const LinearOutput* outputs, int count, int32_t n, TimingRole role, const NextProduct& next) {
  assert(count >= 1 && count <= kMaxFusedProducts);
  const auto start = Clock::now();
  const KernelTable& k = *model_.backend().kernels;
  const Activations& x = input_;
  int64_t work = 0, rows[kMaxFusedProducts], align[kMaxFusedProducts];
  for (int i = 0; i < count; ++i) {
    work += outputs[i].w->rows * outputs[i].w->columns * int64_t{n};
    rows[i] = outputs[i].w->rows;
    align[i] = ChunkRowAlign(outputs[i].w->layout);
  }
  // Shares for the threads that will run (a product too small for the pool gets one share, walked
  // in order), all matrices' rows split together, about kChunksPerThread chunks a thread.
  const int parts = Parts(work);
  rows_.Plan(rows, align, count, parts, kChunksPerThread);
  auto job = [&](int part, int /*parts*/) {
    part_start_[static_cast<size_t>(part)] = Since(start);
    ReadAhead& ahead = ahead_[static_cast<size_t>(part)];
    ahead = {};
    RowScheduler::Chunk c{};
    while (rows_.Next(part, &c)) {
      const MatrixView& w = *outputs[c.matrix].w;
      k.matmul(w, x, outputs[c.matrix].y, w.rows, c.begin, c.end);
    }
    part_finish_[static_cast<size_t>(part)] = Since(start);
    if (parts > 1 && next.count > 0) ahead = ReadAhead::ShareStart(next.m, next.count, part, parts, ahead_bytes_);
  };
  Spread(work, job);
  if (parts > 1) {
    const double last = *std::max_element(part_finish_.begin(), part_finish_.begin() + parts);
    for (int p = 0; p < parts; ++p) {
      const double waited_to_start = part_start_[static_cast<size_t>(p)];
      timings_.product_start_wait_thread_seconds += waited_to_start;
      timings_.product_idle_thread_seconds += waited_to_start + last - part_finish_[static_cast<size_t>(p)];
    }
    timings_.product_thread_seconds += parts * last;
  }
  timings_.role_seconds[static_cast<size_t>(role)] += Since(start);
}

absl::Status Session::CheckFinite(const float* values, int64_t count, int layer, const char* op) const {
  if (!options_.check_finite) return absl::OkStatus();
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      return absl::DataLossError(absl::StrCat("non-finite value (", values[i], ") at index ", i, " of ", op,
                                              layer >= 0 ? absl::StrCat(" in layer ", layer) : std::string(),
                                              " on backend '", model_.backend().name, "'"));
    }
  }
  return absl::OkStatus();
}

void Session::ReportStats(int layer, const char* stage, const float* x, int32_t position) const {
  static const bool dump = EnvFlag("KESTREL_DUMP_LAYERS");
  if (options_.layer_stats == nullptr && !dump) return;
  const int32_t dim = model_.config().dim;
  LayerStats s{layer, stage, position, 0.0f, 0.0f, 0};
  double ss = 0.0;
  for (int32_t i = 0; i < dim; ++i) {
    if (!std::isfinite(x[i])) {
      ++s.non_finite;
      continue;
    }
    s.max_abs = std::max(s.max_abs, std::fabs(x[i]));
    ss += static_cast<double>(x[i]) * x[i];
  }
  s.rms = static_cast<float>(std::sqrt(ss / dim));
  if (options_.layer_stats != nullptr) options_.layer_stats(s, options_.layer_stats_user_data);
  if (dump) {
    std::fprintf(stderr, "[kestrel] layer=%d stage=%s pos=%d max_abs=%.6g rms=%.6g non_finite=%lld\n", layer, stage,
                 position, s.max_abs, s.rms, static_cast<long long>(s.non_finite));
  }
}

absl::Status Session::Forward(const int32_t* tokens, int32_t n, bool want_logits) {
  const ModelConfig& c = model_.config();
  const KernelTable& k = *model_.backend().kernels;
  const int64_t dim = c.dim, hd = c.head_dim;
  const int64_t q_dim = int64_t{c.n_heads} * hd, kv_dim = int64_t{c.n_kv_heads} * hd;
  const int32_t group = c.n_heads / c.n_kv_heads;
  const size_t kv_elem = DTypeBlockBytes(options_.kv_dtype);
  const int32_t pos0 = position_;
  const float score_divisor = std::sqrt(static_cast<float>(hd));
  const bool decode = n == 1;
  auto other_start = Clock::now();
  auto other_done = [&] { timings_.role_seconds[static_cast<size_t>(TimingRole::kOther)] += Since(other_start); };

  for (int32_t t = 0; t < n; ++t) k.embedding_row(model_.token_embeddings(), tokens[t], x_.data() + t * dim);
  // Each token's RoPE angles, once for all layers and for its query and key heads.
  const int64_t half = hd / 2;
  for (int32_t t = 0; t < n; ++t) {
    RopeAngles(pos0 + t, model_.rope_inv_freq().data(), half, rope_cos_.data() + t * half, rope_sin_.data() + t * half);
  }
  other_done();

  for (int layer = 0; layer < c.n_layers; ++layer) {
    const LayerWeights& w = model_.layers()[layer];
    other_start = Clock::now();
    // From the second layer on, the previous layer's FFN residual is added in the same pass.
    PrepareInput(x_.data(), w.attn_norm, n, dim, {w.q.dtype, w.k.dtype, w.v.dtype},
                 layer > 0 ? RowStep::kAddResidual : RowStep::kNone);
    if (layer > 0) ReportStats(layer - 1, "ffn", x_.data() + (n - 1) * dim, pos0 + n - 1);
    other_done();
    // Past the last layer's keys and values only the last token's row reaches an output (the logits,
    // and the next batch reads just the KV cache), so from there on that layer works on rows
    // [from, n): its queries, attention, output projection and FFN for one token instead of n (~3%
    // of a 64-token Qwen3-1.7B prefill). Each row's result is the same bits either way (the
    // batch-invariance test in backend_model_test.cc).
    const int32_t from = layer == c.n_layers - 1 ? n - 1 : 0;
    const int32_t rows = n - from;
    if (from == 0) {
      const LinearOutput qkv[] = {{&w.q, q_.data()}, {&w.k, k_.data()}, {&w.v, v_.data()}};
      Linear(qkv, 3, n, TimingRole::kQkv, decode ? NextProduct{{&w.attn_output}, 1} : NextProduct{});
    } else {
      const LinearOutput kv[] = {{&w.k, k_.data()}, {&w.v, v_.data()}};
      Linear(kv, 2, n, TimingRole::kQkv);
      input_ = RowsFrom(input_, from);
      Linear(w.q, rows, q_.data() + from * q_dim, TimingRole::kQkv);
    }
    if (auto s = CheckFinite(q_.data() + from * q_dim, rows * q_dim, layer, "attn_q matmul"); !s.ok()) return s;
    if (auto s = CheckFinite(k_.data(), n * kv_dim, layer, "attn_k matmul"); !s.ok()) return s;
    if (auto s = CheckFinite(v_.data(), n * kv_dim, layer, "attn_v matmul"); !s.ok()) return s;

    other_start = Clock::now();
    uint8_t* k_layer = k_cache_.data() + static_cast<size_t>(layer) * context_length_ * kv_dim * kv_elem;
    uint8_t* v_layer = v_cache_.data() + static_cast<size_t>(layer) * context_length_ * kv_dim * kv_elem;
    // Per token: biases, Q/K norms, RoPE and the KV cache rows; tokens are independent.
    auto qk_job = [&](int64_t begin, int64_t end, int /*part*/) {
      for (int32_t t = static_cast<int32_t>(begin); t < end; ++t) {
        const bool has_q = t >= from;
        float* q = q_.data() + t * q_dim;
        float* kk = k_.data() + t * kv_dim;
        float* vv = v_.data() + t * kv_dim;
        if (w.q_bias != nullptr) {
          if (has_q) for (int64_t i = 0; i < q_dim; ++i) q[i] += w.q_bias[i];
          for (int64_t i = 0; i < kv_dim; ++i) kk[i] += w.k_bias[i];
          for (int64_t i = 0; i < kv_dim; ++i) vv[i] += w.v_bias[i];
        }
        if (w.q_norm != nullptr) {
          if (has_q) {
            for (int32_t h = 0; h < c.n_heads; ++h) k.rmsnorm(q + h * hd, w.q_norm, q + h * hd, hd, c.norm_eps);
          }
          for (int32_t h = 0; h < c.n_kv_heads; ++h) k.rmsnorm(kk + h * hd, w.k_norm, kk + h * hd, hd, c.norm_eps);
        }
        const float* cos = rope_cos_.data() + t * half;
        const float* sin = rope_sin_.data() + t * half;
        if (has_q) k.rope(q, c.n_heads, hd, cos, sin, c.rope_style);
        k.rope(kk, c.n_kv_heads, hd, cos, sin, c.rope_style);
        for (int32_t h = 0; h < c.n_kv_heads; ++h) {
          const size_t at = (static_cast<size_t>(h) * context_length_ + pos0 + t) * hd;
          const float* kh = kk + h * hd;
          const float* vh = vv + h * hd;
          if (options_.kv_dtype == DType::kF16) {
            k.f32_to_f16(kh, reinterpret_cast<uint16_t*>(k_layer) + at, hd);
            k.f32_to_f16(vh, reinterpret_cast<uint16_t*>(v_layer) + at, hd);
          } else {
            std::memcpy(reinterpret_cast<float*>(k_layer) + at, kh, hd * sizeof(float));
            std::memcpy(reinterpret_cast<float*>(v_layer) + at, vh, hd * sizeof(float));
          }
        }
      }
    };
    SpreadChunks(n, int64_t{n} * (q_dim + 2 * kv_dim) * 8, qk_job);
    other_done();

    // Attention: every (token, KV head) pair is independent; causal over positions 0..pos0+t. The
    // `group` query heads that share a KV head go to the kernel together, so it reads each key and
    // value row once for all of them; in a prompt, so do two consecutive tokens where the backend
    // takes them together (attention_tokens). Items are numbered head by head, so each thread's
    // share is whole KV heads (the same work each, though a token's cost grows with its position;
    // contiguous halves of the tokens gave the second thread 3x the first's work), and a thread that
    // finishes first takes the other's last items (SpreadChunks).
    const auto attention_start = Clock::now();
    const int32_t tokens_per_item = rows > 1 && k.attention_tokens != nullptr ? kTokensPerAttentionCall : 1;
    const int64_t steps = (rows + tokens_per_item - 1) / tokens_per_item;  // items per KV head
    const int64_t items = steps * c.n_kv_heads;
    auto attention_job = [&](int64_t begin, int64_t end, int part) {
      float* scores = scores_.data() + static_cast<size_t>(part) * kTokensPerAttentionCall * group * context_length_;
      for (int64_t p = begin; p < end; ++p) {
        const int32_t t = from + static_cast<int32_t>(p % steps) * tokens_per_item;
        const int32_t g = static_cast<int32_t>(p / steps);
        const size_t kv_offset = static_cast<size_t>(g) * context_length_ * hd * kv_elem;
        const int64_t first_head = int64_t{g} * group;
        const float* q = q_.data() + t * q_dim + first_head * hd;
        float* out = attn_.data() + t * q_dim + first_head * hd;
        if (tokens_per_item == 1) {
          k.attention(q, group, k_layer + kv_offset, v_layer + kv_offset, options_.kv_dtype, hd, pos0 + t + 1, hd,
                      score_divisor, scores, out, /*streamed=*/n == 1);
        } else {
          const int32_t tokens = std::min(tokens_per_item, n - t);
          k.attention_tokens(q, q_dim, tokens, group, k_layer + kv_offset, v_layer + kv_offset, options_.kv_dtype, hd,
                             pos0 + t + tokens, hd, score_divisor, scores, out, q_dim);
        }
      }
    };
    SpreadChunks(items, int64_t{rows} * c.n_heads * (pos0 + n) * hd * 2, attention_job);
    timings_.role_seconds[static_cast<size_t>(TimingRole::kAttention)] += Since(attention_start);
    if (auto s = CheckFinite(attn_.data() + from * q_dim, rows * q_dim, layer, "attention"); !s.ok()) return s;

    // From here rows [from, n) of x_ and attn_ go on; the products' outputs (proj_, gate_, up_)
    // hold them from their first row, where PrepareInput's residual and gating steps look.
    other_start = Clock::now();
    PrepareInput(attn_.data() + from * q_dim, rows, q_dim, {w.attn_output.dtype});
    other_done();
    Linear(w.attn_output, rows, proj_.data(), TimingRole::kAttentionOutput,
           decode ? NextProduct{{&w.gate, &w.up}, 2} : NextProduct{});
    if (auto s = CheckFinite(proj_.data(), rows * dim, layer, "attn_output matmul"); !s.ok()) return s;
    other_start = Clock::now();
    PrepareInput(x_.data() + from * dim, w.ffn_norm, rows, dim, {w.gate.dtype, w.up.dtype}, RowStep::kAddResidual);
    ReportStats(layer, "attention", x_.data() + (n - 1) * dim, pos0 + n - 1);
    other_done();
    const LinearOutput gate_up[] = {{&w.gate, gate_.data()}, {&w.up, up_.data()}};
    Linear(gate_up, 2, rows, TimingRole::kGateUp, decode ? NextProduct{{&w.down}, 1} : NextProduct{});
    if (auto s = CheckFinite(gate_.data(), int64_t{rows} * c.ffn_dim, layer, "ffn_gate matmul"); !s.ok()) return s;
    if (auto s = CheckFinite(up_.data(), int64_t{rows} * c.ffn_dim, layer, "ffn_up matmul"); !s.ok()) return s;
    other_start = Clock::now();
    PrepareInput(gate_.data(), rows, c.ffn_dim, {w.down.dtype}, RowStep::kSiluGate);
    other_done();
    NextProduct after_down{};
    if (decode && layer + 1 < c.n_layers) {
      const LayerWeights& w1 = model_.layers()[layer + 1];
      after_down = {{&w1.q, &w1.k, &w1.v}, 3};
    } else if (decode && want_logits) {
      after_down = {{&model_.output()}, 1};
    }
    Linear(w.down, rows, proj_.data(), TimingRole::kDown, after_down);
    if (auto s = CheckFinite(proj_.data(), rows * dim, layer, "ffn_down matmul"); !s.ok()) return s;
  }
  // The last layer's FFN residual (the others' went into the next layer's first pass), on the one
  // row that layer kept.
  if (c.n_layers > 0) {
    other_start = Clock::now();
    PrepareInput(x_.data() + (n - 1) * dim, 1, dim, /*readers=*/{}, RowStep::kAddResidual);
    ReportStats(c.n_layers - 1, "ffn", x_.data() + (n - 1) * dim, pos0 + n - 1);
    other_done();
  }
  position_ += n;
  if (!want_logits) return absl::OkStatus();

  other_start = Clock::now();
  PrepareInput(x_.data() + (n - 1) * dim, model_.output_norm(), 1, dim, {model_.output().dtype});
  ReportStats(-1, "final_norm", xn_.data(), position_ - 1);
  other_done();
  NextProduct after_head{};
  if (n == 1 && c.n_layers > 0) {
    const LayerWeights& w0 = model_.layers()[0];
    after_head = {{&w0.q, &w0.k, &w0.v}, 3};
  }
  Linear(model_.output(), 1, logits_.data(), TimingRole::kLmHead, after_head);
  return CheckFinite(logits_.data(), c.vocab_size, -1, "lm_head matmul");
}

}  // namespace kestrel
