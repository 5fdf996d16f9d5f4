// attnc-read-bandwidth: the rate at which this machine's cores read memory, the denominator of
// the decode kernels' "fraction of bandwidth" figures in docs/benchmarks.md (a decode step reads
// the KV cache once). Each thread sums its share of a buffer far larger than the last-level
// cache with the widest vectors this build targets (-march=native), several independent sums
// so the loads, not the adds, set the pace; the best of five timed passes is reported, for one
// thread and for every hardware thread. With --page-orders, the read rate of a paged KV cache in
// the orders a decode kernel can take instead (PageOrders.cpp).
#include "PageOrders.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kLanes = 16; // 64-byte vectors: a cache line per load
using Vector = float __attribute__((vector_size(kLanes * sizeof(float))));
constexpr size_t kBytes = size_t{1} << 30; // 1 GiB: no cache holds it
constexpr int kSums = 8;

float sumOf(const Vector* begin, const Vector* end) {
  Vector sums[kSums] = {};
  for (const Vector* p = begin; p + kSums <= end; p += kSums)
    for (int s = 0; s < kSums; ++s)
      sums[s] += p[s];
  float total = 0;
  for (const Vector& s : sums)
    for (int lane = 0; lane < kLanes; ++lane)
      total += s[lane];
  return total;
}

// GB/s of one pass over the buffer by `threads` threads, each reading a contiguous share.
double passRate(const Vector* data, size_t vectors, unsigned threads) {
  std::vector<float> results(threads);
  std::vector<std::thread> workers;
  const size_t share = vectors / threads / kSums * kSums;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { results[t] = sumOf(data + t * share, data + (t + 1) * share); });
  for (std::thread& w : workers)
    w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float keep = results[0]; // the sums are used, so the reads are not removed
  (void)keep;
  return static_cast<double>(share * threads * sizeof(Vector)) / seconds / 1e9;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--page-orders") == 0)
    return pageOrders();
  if (argc != 1) {
    std::fprintf(stderr, "usage: attnc-read-bandwidth [--page-orders]\n");
    return 2;
  }
  auto* data = static_cast<Vector*>(std::aligned_alloc(64, kBytes));
  if (!data) {
    std::fprintf(stderr, "attnc-read-bandwidth: cannot allocate %zu bytes\n", kBytes);
    return 1;
  }
  std::memset(data, 0, kBytes); // every page mapped before the timed passes
  const size_t vectors = kBytes / sizeof(Vector);
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned threads : {1u, hardware}) {
    double best = 0;
    for (int pass = 0; pass < 5; ++pass)
      best = std::max(best, passRate(data, vectors, threads));
    std::printf("memory read bandwidth, %u thread%s: %.1f GB/s\n", threads,
                threads == 1 ? "" : "s", best);
    if (hardware == 1)
      break;
  }
  std::free(data);
  return 0;
}
