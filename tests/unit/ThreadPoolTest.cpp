#include "RunSupport.h"
#include "ThreadPool.h"

#include <atomic>
#include <gtest/gtest.h>
#include <stdexcept>
#include <thread>
#include <vector>

namespace attnc::runtime {
namespace {

struct Counter {
  std::vector<std::atomic<int>> hits;
  explicit Counter(int n) : hits(n) {}
};

void count(void* context, int64_t i) {
  static_cast<Counter*>(context)->hits[i]++;
}

TEST(ThreadPool, RunsEveryIndexOnce) {
  Counter c(1000);
  ThreadPool::global().parallelFor(1000, count, &c, 8);
  for (auto& h : c.hits)
    EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentAndNestedCallersFinish) {
  struct Nested {
    Counter inner{64};
  };
  auto outer = [](void* context, int64_t i) {
    auto* n = static_cast<std::vector<Nested>*>(context);
    ThreadPool::global().parallelFor(64, count, &(*n)[i].inner, 4);
  };
  // Four callers at once, each running a loop whose bodies run loops of their own.
  std::vector<std::vector<Nested>> work(4);
  for (auto& w : work)
    w = std::vector<Nested>(16);
  std::vector<std::thread> callers;
  for (auto& w : work)
    callers.emplace_back([&w, outer] { ThreadPool::global().parallelFor(16, outer, &w, 4); });
  for (std::thread& t : callers)
    t.join();
  for (auto& w : work)
    for (Nested& n : w)
      for (auto& h : n.inner.hits)
        EXPECT_EQ(h.load(), 1);
}

// The tools' own loop (the reference in attnc verify, run, bench and viz): every index once, and
// a body's exception, here an aux read out of bounds, reaches the caller; on a thread of its own
// it would end the process.
TEST(ToolThreads, RunEveryIndexOnceAndPassABodysExceptionToTheCaller) {
  Counter c(1000);
  tools::threadedFor(8)(1000, [&](int64_t i) { count(&c, i); });
  for (auto& h : c.hits)
    EXPECT_EQ(h.load(), 1);
  for (int64_t thrower : {0, 999}) // the calling thread's first index, and a helper's
    try {
      tools::threadedFor(8)(1000, [&](int64_t i) {
        if (i == thrower)
          throw std::logic_error("aux tensor x: index " + std::to_string(i));
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::logic_error& e) {
      EXPECT_EQ(std::string(e.what()), "aux tensor x: index " + std::to_string(thrower));
    }
}

} // namespace
} // namespace attnc::runtime
