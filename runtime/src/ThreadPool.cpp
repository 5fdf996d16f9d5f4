#include "ThreadPool.h"

#include <algorithm>
#include <atomic>

namespace attnc::runtime {

struct ThreadPool::Job {
  attnc_task_fn task;
  void* context;
  int64_t count;
  int32_t maxHelpers;               // workers that may join, besides the caller
  std::atomic<int64_t> next{0};     // the next index to hand out
  std::atomic<int64_t> finished{0}; // indices done
  int32_t helpers = 0;              // workers that joined (guarded by the pool mutex)
  int32_t active = 0;               // workers still inside drain() (guarded by the pool mutex)
};

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(hardwareThreads() - 1);
  return pool;
}

int32_t ThreadPool::hardwareThreads() {
  return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int workers) {
  for (int w = 0; w < workers; ++w)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  workAvailable_.notify_all();
  for (std::thread& worker : workers_)
    worker.join();
}

void ThreadPool::drain(Job& job) {
  for (int64_t i = job.next.fetch_add(1); i < job.count; i = job.next.fetch_add(1)) {
    job.task(job.context, i);
    job.finished.fetch_add(1);
  }
}

void ThreadPool::workerLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    workAvailable_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    Job& job = *queue_.front();
    // A job leaves the queue once it has all the helpers it may have.
    if (++job.helpers >= job.maxHelpers)
      queue_.pop_front();
    ++job.active;
    lock.unlock();
    drain(job);
    lock.lock();
    // The caller waits for active == 0 before its Job goes out of scope.
    if (--job.active == 0)
      jobFinished_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t count, attnc_task_fn task, void* context, int32_t maxThreads) {
  if (count <= 0)
    return;
  int32_t helpers =
      std::min<int64_t>({static_cast<int64_t>(workers_.size()),
                         static_cast<int64_t>(std::max(1, maxThreads)) - 1, count - 1});
  Job job{task, context, count, helpers};
  if (helpers > 0) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(&job);
    }
    workAvailable_.notify_all();
  }
  drain(job);
  if (helpers == 0)
    return;
  std::unique_lock lock(mutex_);
  auto queued = std::find(queue_.begin(), queue_.end(), &job);
  if (queued != queue_.end())
    queue_.erase(queued);
  jobFinished_.wait(lock, [&] { return job.active == 0 && job.finished.load() == job.count; });
}

void ThreadPool::parallelForEntry(void* pool, int64_t count, attnc_task_fn task, void* context,
                                  int32_t maxThreads) {
  static_cast<ThreadPool*>(pool)->parallelFor(count, task, context, maxThreads);
}

} // namespace attnc::runtime
