// A pool of persistent workers for data-parallel loops. The calling thread takes part, so a pool
// of N threads starts N-1 workers. Dispatch allocates nothing. Idle workers spin on an atomic
// generation counter for a fixed time (thread_pool.cc) before sleeping, because a decoded token
// dispatches hundreds of short jobs and waking a sleeping thread costs tens to hundreds of
// microseconds each time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace kestrel {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index, n_threads) once on each thread and returns when all are done.
  // `fn` must not call Run recursively. Takes any callable by reference: no allocation.
  template <typename Fn>
  void Run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    RunRaw([](void* ctx, int i, int n) { (*static_cast<F*>(ctx))(i, n); },
           const_cast<void*>(static_cast<const void*>(&fn)));
  }
  void RunRaw(void (*fn)(void*, int, int), void* ctx);
  // Work for idle threads between jobs, in short steps: step(ctx, thread_index) does one and
  // returns whether more is left. A worker runs steps after each job until none is left or the next
  // job comes; the caller runs its own (index 0) while it waits for the workers to finish a job.
  // Set it before the jobs that should see it (no job may be running).
  void SetIdleWork(bool (*step)(void*, int), void* ctx) {
    idle_step_ = step;
    idle_ctx_ = ctx;
  }
  // Workers asleep now (idle past their spin), for tests and diagnostics.
  int sleeping_workers() const { return sleepers_.load(std::memory_order_acquire); }

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::atomic<int> sleepers_{0};
  // What a spinning worker reads and the caller writes each dispatch. The job and the generation
  // share one cache line, the one the workers spin on, so a worker that sees the new generation
  // has the job with it; the count of workers still running (written by the workers as they
  // finish, spun on by the caller) has a line of its own. When these shared a line with the mutex
  // and each other, the caller's writes made the spinning threads fetch the line several times a
  // dispatch (bench/README.md).
  alignas(64) std::atomic<uint64_t> generation_{0};
  void (*job_)(void*, int, int) = nullptr;
  void* job_ctx_ = nullptr;
  bool (*idle_step_)(void*, int) = nullptr;
  void* idle_ctx_ = nullptr;
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<int> pending_{0};  // the class's alignment pads the rest of its line
};

}  // namespace kestrel
