// The runtime's thread pool: one per process, shared by every bundle and every caller.
#ifndef ATTNC_RUNTIME_THREADPOOL_H
#define ATTNC_RUNTIME_THREADPOOL_H

#include "attnc/attnc.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace attnc::runtime {

// Runs parallel loops for kernels. Several callers may run loops at once: each loop is a job in
// a queue that idle workers join, and the calling thread always works on its own job, so a loop
// finishes even when every worker is busy elsewhere (and nested loops cannot deadlock).
class ThreadPool {
public:
  static ThreadPool& global();
  ~ThreadPool();

  // task(context, i) for i in [0, count), on at most maxThreads threads including the caller.
  void parallelFor(int64_t count, attnc_task_fn task, void* context, int32_t maxThreads);

  // The attnc_parallel_for_fn handed to kernels, with `pool` the ThreadPool.
  static void parallelForEntry(void* pool, int64_t count, attnc_task_fn task, void* context,
                               int32_t maxThreads);

  static int32_t hardwareThreads();

private:
  struct Job;
  explicit ThreadPool(int workers);
  void workerLoop();
  // Runs the job's remaining indices; returns when none is left to take.
  static void drain(Job& job);

  std::mutex mutex_;
  std::condition_variable workAvailable_;
  std::condition_variable jobFinished_;
  std::deque<Job*> queue_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_THREADPOOL_H
