// Persistent workers: spin on the generation counter for a while, then sleep on a condition
// variable. The job pointer is published before the generation is bumped (release/acquire).
#include "decoder/thread_pool.h"

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
// A pause takes 10 to 140 cycles depending on the core, so this is tens of microseconds: long
// enough to bridge the gap between the jobs of one token, short enough not to starve other work.
constexpr int kSpinIterations = 2000;
}

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
  {
    // Bumping under the mutex pairs with a worker's check-then-wait, so no wake-up is lost.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) wake_cv_.notify_all();
  fn(ctx, 0, n_threads_);
  // Spin for a straggler briefly, then yield: on a busy machine a worker may be descheduled, and
  // spinning would keep it off the core it needs.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      KESTREL_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      KESTREL_CPU_RELAX();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_acq_rel);
      wake_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    job_(job_ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kestrel
