#include "Support/Threads.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace attnc {

void forEachOnThreads(int64_t threads, int64_t count,
                      const std::function<void(int64_t index, int64_t worker)>& body) {
  const int64_t workers = std::max<int64_t>(1, std::min(threads, count));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex mutex;
  auto work = [&](int64_t worker) {
    try {
      for (int64_t i = next++; i < count; i = next++)
        body(i, worker);
    } catch (...) {
      next = count;
      std::lock_guard lock(mutex);
      if (!error)
        error = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  try {
    for (int64_t w = 1; w < workers; ++w)
      helpers.emplace_back(work, w);
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one share the work.
  }
  work(0);
  for (std::thread& h : helpers)
    h.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace attnc
