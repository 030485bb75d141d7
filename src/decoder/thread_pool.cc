// Persistent workers: spin on the generation counter for a while, then sleep on a condition
// variable. The job pointer is published before the generation is bumped (release/acquire).
#include "decoder/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KESTREL_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define KESTREL_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define KESTREL_CPU_RELAX() ((void)0)
#endif

namespace kestrel {
namespace {
// How long an idle worker spins before it sleeps. By the clock, not by a count of pauses: a pause
// takes 10 to 140 cycles depending on the core (26 ns on the Zen 5 CI machine, where the old 2000
// pauses were 51 us, shorter than the gap a decode step leaves between tokens, so the first product
// of every token waited ~150 us for a sleeping worker to wake: 6 us a call on average for the
// Q/K/V product against ~1 us for the others). 200 us covers the gaps of a token and costs an idle
// core at most that much spinning after the last job. Two-thread Q4_0 decode and prefill ~1%
// faster (bench/README.md).
constexpr auto kIdleSpin = std::chrono::microseconds(200);
// How long the caller spins for a straggler before yielding its core to it.
constexpr auto kStragglerSpin = std::chrono::microseconds(50);

// Spins with the CPU's pause hint until done() or `budget` has passed; returns done(). Reads the
// clock once every 64 pauses (a vDSO call, ~20 ns).
template <typename Done>
bool SpinFor(std::chrono::microseconds budget, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int spin = 1;; ++spin) {
    if (done()) return true;
    KESTREL_CPU_RELAX();
    if (spin % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunRaw(void (*fn)(void*, int, int), void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  job_ = fn;
  job_ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // No lock while the workers spin. A worker about to sleep counts itself in sleepers_ and then
  // checks the generation; this bumps the generation and then checks sleepers_ (both sequentially
  // consistent), so at least one of the two sees the other's write: the worker does not sleep, or
  // this notifies it, under the mutex, which it holds from its check until it waits.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_cv_.notify_all();
  }
  fn(ctx, 0, n_threads_);
  // Spin for a straggler briefly, then yield: on a busy machine a worker may be descheduled, and
  // spinning would keep it off the core it needs.
  const auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (idle_step_ != nullptr) {
    while (!finished() && idle_step_(idle_ctx_, 0)) {
    }
  }
  if (!SpinFor(kStragglerSpin, finished)) {
    while (!finished()) std::this_thread::yield();
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = seen;
    if (!SpinFor(kIdleSpin, [&] { return (now = generation_.load(std::memory_order_acquire)) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    job_(job_ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    if (idle_step_ != nullptr) {
      while (generation_.load(std::memory_order_acquire) == seen && idle_step_(idle_ctx_, index)) {
      }
    }
  }
}

}  // namespace kestrel
