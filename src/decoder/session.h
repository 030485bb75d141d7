// A decoding session: KV cache, scratch buffers and worker threads for one conversation.
// A session borrows its model (which must outlive it) and is used by one thread at a time.
// All buffers are allocated at creation: evaluating a token allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/model.h"
#include "decoder/read_ahead.h"
#include "decoder/row_scheduler.h"
#include "decoder/thread_pool.h"
#include "platform/huge_page_buffer.h"
#include "platform/scratch_arena.h"

namespace kestrel {

// Where time goes, accumulated over the session (seconds).
enum class TimingRole { kQkv, kAttentionOutput, kGateUp, kDown, kLmHead, kAttention, kOther, kCount };
const char* TimingRoleName(TimingRole role);

struct SessionTimings {
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  std::array<double, static_cast<size_t>(TimingRole::kCount)> role_seconds{};
  // Products run on more than one thread: thread-seconds idle (each thread's wait from the product's
  // start until it took its first chunk, plus its wait at the end for the last thread to finish),
  // the part of that spent waiting to start (a pool worker's wake-up), and thread-seconds in all
  // (threads x wall time), so idle / all is the share of the threads' time the split left idle.
  double product_idle_thread_seconds = 0, product_start_wait_thread_seconds = 0, product_thread_seconds = 0;
};

// Statistics of a hidden state for the layer-dump diagnostic.
struct LayerStats {
  int32_t layer;      // -1 for the final norm
  const char* stage;  // "attention", "ffn" or "final_norm"
  int32_t position;   // token position the statistics describe (the batch's last token)
  float max_abs;
  float rms;
  int64_t non_finite;
};
using LayerStatsCallback = void (*)(const LayerStats& stats, void* user_data);

// The context a session gets when none is asked for: a model's full context (40960 for Qwen3) would
// reserve gigabytes of KV cache that short conversations never use.
inline constexpr int32_t kDefaultContextLength = 4096;

struct SessionOptions {
  int32_t context_length = 0;  // 0: the model's, at most kDefaultContextLength
  int32_t n_threads = 0;       // 0: hardware threads (at most 8)
  // f16 (the default) halves the cache and the bytes decode reads from it per position; f32 keeps
  // keys and values exactly as computed (kestrel-bench --kv measures both: bench/README.md).
  DType kv_dtype = DType::kF16;
  int32_t batch_size = 64;     // prompt tokens per prefill step
  bool check_finite = false;   // stop at the first kernel output with a NaN or Inf
  LayerStatsCallback layer_stats = nullptr;
  void* layer_stats_user_data = nullptr;
};

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(const Model& model, const SessionOptions& options);

  // Appends tokens at the current position (prefill in batches when n > 1) and computes the
  // logits of the last one. Errors: empty input, a token outside the vocabulary, the context
  // would overflow (nothing is evaluated then), or a non-finite value under check_finite.
  // `decode` marks one-token steps of generation for the timings (prompts count as prefill).
  absl::Status Eval(const int32_t* tokens, size_t n, bool decode = false);
  const float* logits() const { return logits_.data(); }
  int32_t vocab_size() const { return model_.config().vocab_size; }
  int32_t position() const { return position_; }
  int32_t context_length() const { return context_length_; }
  int32_t n_threads() const { return pool_.size(); }
  // Forgets positions >= n_keep (0 forgets everything).
  absl::Status Truncate(int32_t n_keep);
  void Reset() { position_ = 0; }
  const SessionTimings& timings() const { return timings_; }
  void ResetTimings() { timings_ = SessionTimings{}; }
  const Model& model() const { return model_; }

 private:
  absl::Status AllocateKvCache();  // the K and V caches, for context_length_ positions
  Session(const Model& model, const SessionOptions& options, int n_threads);
  absl::Status Forward(const int32_t* tokens, int32_t n, bool want_logits);
  // The matrices of the product that comes next at decode, whose first rows the threads read
  // ahead while they would otherwise wait (ReadAhead).
  static constexpr int kMaxFusedProducts = 3;  // Linear's matrices sharing one input
  struct NextProduct {
    const MatrixView* m[kMaxFusedProducts];  // no member initializers: value-initialized ({}) to none
    int count;
  };
  // y[n][w.rows] = W x, split over threads by rows in chunks (RowScheduler); x must have been
  // prepared by PrepareInput. At decode, `next` is the product after this one.
  void Linear(const MatrixView& w, int32_t n, float* y, TimingRole role, const NextProduct& next = {});
  // The same for up to kMaxFusedProducts matrices that share the input (Q, K and V; gate and up),
  // as one job: the threads split all their rows together, so a matrix's last chunk is not a wait.
  struct LinearOutput {
    const MatrixView* w;
    float* y;
  };
  void Linear(const LinearOutput* outputs, int count, int32_t n, TimingRole role, const NextProduct& next = {});
  // One step of thread `thread`'s read-ahead (ThreadPool::SetIdleWork).
  static bool ReadAheadStep(void* session, int thread);
  // How many threads a job of this many multiply-adds runs on: the whole pool when the work is worth
  // waking the workers for (about 64K per thread), else 1.
  int Parts(int64_t multiply_adds) const {
    return pool_.size() > 1 && multiply_adds >= int64_t{65536} * pool_.size() ? pool_.size() : 1;
  }
  // Runs job(i, parts) over Parts(multiply_adds) threads.
  template <typename Job>
  void Spread(int64_t multiply_adds, Job& job) {
    if (Parts(multiply_adds) > 1) {
      pool_.Run(job);
    } else {
      job(0, 1);
    }
  }
  // Runs fn(begin, end, part) over [0, n) in chunks on Parts(multiply_adds) threads, handed out by
  // rows_: each thread walks its own contiguous share, then takes what is left at the back of the
  // other's. Why not fixed halves: on the shared host one vCPU often runs 20-50% slower than the
  // other for a while, and with fixed halves the per-token passes and attention waited for it
  // (bench/README.md). `part` indexes per-thread scratch; chunks start on multiples of `align`.
  template <typename Fn>
  void SpreadChunks(int64_t n, int64_t multiply_adds, Fn& fn, int64_t align = 1) {
    const int parts = Parts(multiply_adds);
    if (parts == 1 || n < 2) {
      fn(int64_t{0}, n, 0);
      return;
    }
    rows_.Plan(n, parts, kPassChunksPerThread, align);
    auto job = [&](int part, int /*parts*/) {
      RowScheduler::Chunk c{};
      while (rows_.Next(part, &c)) fn(c.begin, c.end, part);
    };
    pool_.Run(job);
  }
  // What PrepareInput first does to each of its rows, in the same pass. Row by row, so a kernel's
  // tail handling falls on the same elements whatever the thread count or batching (SiLU over a
  // thread's whole span made AVX2 logits depend on the thread count); one pool job instead of two
  // (no speed change measured, bench/README.md).
  enum class RowStep {
    kNone,
    kAddResidual,  // x += proj_ (a residual connection; x is x_)
    kSiluGate,     // x = silu(x) * up_ (x is gate_)
  };
  // The input of the next products, whose weights have the dtypes `readers`: x itself (after
  // `step`), or with `norm`, RMSNorm(x) with that weight (into xn_); in the forms those products
  // read (Q8_0 blocks, bf16 tiles: KernelTable::matmul, TakesBf16Path). Spread over the pool in
  // chunks of tokens for prefill (SpreadChunks).
  void PrepareInput(float* x, int32_t n, int64_t columns, std::initializer_list<DType> readers,
                    RowStep step = RowStep::kNone);
  void PrepareInput(float* x, const float* norm, int32_t n, int64_t columns, std::initializer_list<DType> readers,
                    RowStep step = RowStep::kNone);
  absl::Status CheckFinite(const float* values, int64_t count, int layer, const char* op) const;
  void ReportStats(int layer, const char* stage, const float* x, int32_t position) const;

  const Model& model_;
  SessionOptions options_;
  // Per thread, written and read only by that thread (in its product jobs and idle steps). Before
  // pool_, so that it outlives the workers' last idle steps.
  std::unique_ptr<ReadAhead[]> ahead_;
  // Bytes of its share of the next product a thread reads ahead at decode (0: none).
  int64_t ahead_bytes_ = 0;
  ThreadPool pool_;
  // Full-size chunks per thread in a matrix product (plus the short ones of each share's last
  // quarter, RowScheduler): enough for a slow thread to hand work over, few enough that per-call
  // set-up in the kernels stays negligible.
  static constexpr int kChunksPerThread = 8;
  // The same for SpreadChunks' passes over tokens and attention items.
  static constexpr int kPassChunksPerThread = 8;
  RowScheduler rows_;
  // Per thread: seconds from a product's start to its job's start, and to its last chunk's end.
  std::vector<double> part_start_, part_finish_;
  int32_t context_length_;
  int32_t position_ = 0;
  SessionTimings timings_;
  bool dump_logits_ = false;

  // Per-batch working arrays, all in scratch_ (allocated by Create).
  ScratchArena scratch_;
  ScratchArray<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, logits_, scores_;
  ScratchArray<float> rope_cos_, rope_sin_;  // per token of a Forward: its position's RoPE angles
  ScratchArray<BlockQ8_0> qx_;
  ScratchArray<int32_t> qx_sums_;  // per block of qx_: sum of quants, scale as f32
  ScratchArray<float> qx_scales_;
  // Prompt rows rounded to bf16 in tiles of 16 tokens, where the backend reads them (Activations::bf16).
  ScratchArray<uint16_t> xbf_;
  ScratchArray<int32_t> qx_q4_0_offsets_;  // for prompts, where the backend reads them (FillQ4_0Offsets)
  int64_t q4_0_offset_run_ = 0;            // their run of blocks; 0: no table
  HugePageBuffer k_cache_, v_cache_;
  Activations input_;
};

}  // namespace kestrel
