// attnc-read-bandwidth --page-orders: the read rate of one thread over a paged KV cache in the
// orders a decode kernel can take (docs/benchmarks.md, "KV caches"): f16 K and V of 8 KV heads,
// d 128 (256-byte rows), 16384 positions in pages of 16 in a shuffled order, read and summed with
// no other work, the caches flushed before each pass by reading a buffer larger than them.
#include "PageOrders.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

namespace {

constexpr int kLanes = 16;
using Vector = float __attribute__((vector_size(kLanes * sizeof(float))));
constexpr size_t kRow = 256, kHeads = 8, kPageSize = 16, kPositions = 16384;
constexpr size_t kPages = kPositions / kPageSize, kPageBytes = kPageSize * kHeads * kRow;
constexpr size_t kAhead = 64; // keys prefetched ahead, as the decode kernel's paged reads
constexpr size_t kFlushBytes = size_t{512} << 20;

// One 256-byte row added into the sums (4 cache lines).
inline void add(Vector* sums, const char* row) {
  for (size_t line = 0; line < kRow / sizeof(Vector); ++line) {
    Vector v;
    std::memcpy(&v, row + line * sizeof(Vector), sizeof v);
    sums[line] += v;
  }
}

inline void prefetchRow(const char* row) {
  for (size_t line = 0; line < kRow; line += 64)
    __builtin_prefetch(row + line, 0, 3);
}

} // namespace

int pageOrders() {
  auto* k = static_cast<char*>(std::aligned_alloc(4096, kPages * kPageBytes));
  auto* v = static_cast<char*>(std::aligned_alloc(4096, kPages * kPageBytes));
  auto* flush = static_cast<char*>(std::aligned_alloc(4096, kFlushBytes));
  if (!k || !v || !flush) {
    std::fprintf(stderr, "attnc-read-bandwidth: cannot allocate the caches\n");
    return 1;
  }
  std::memset(k, 1, kPages * kPageBytes);
  std::memset(v, 1, kPages * kPageBytes);
  std::memset(flush, 0, kFlushBytes);
  std::vector<size_t> table(kPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(1));
  // Row (position j, head g) of a page layout; a contiguous cache is [heads, positions, d].
  auto nhd = [&](size_t j, size_t g) {
    return (table[j / kPageSize] * kPageSize + j % kPageSize) * kHeads + g;
  };
  auto hnd = [&](size_t j, size_t g) {
    return (table[j / kPageSize] * kHeads + g) * kPageSize + j % kPageSize;
  };
  auto contiguous = [](size_t j, size_t g) { return g * kPositions + j; };
  using RowOf = std::function<size_t(size_t, size_t)>;
  // `heads` heads' rows at a time, key by key (two heads: two runs of 4 KiB in flight where one
  // head's is one), each key's rows kAhead keys on prefetched when asked.
  auto byHeads = [&](const RowOf& rowOf, size_t heads, bool prefetch, Vector* sums) {
    for (size_t g = 0; g < kHeads; g += heads)
      for (size_t j = 0; j < kPositions; ++j)
        for (size_t h = g; h < g + heads; ++h) {
          if (prefetch) {
            const size_t ahead = rowOf(std::min(j + kAhead, kPositions - 1), h) * kRow;
            prefetchRow(k + ahead);
            prefetchRow(v + ahead);
          }
          add(sums, k + rowOf(j, h) * kRow);
          add(sums, v + rowOf(j, h) * kRow);
        }
  };
  const std::pair<const char*, std::function<void(Vector*)>> orders[] = {
      {"contiguous, one head at a time", [&](Vector* s) { byHeads(contiguous, 1, false, s); }},
      {"nhd pages, one head at a time, 64 keys prefetched",
       [&](Vector* s) { byHeads(nhd, 1, true, s); }},
      {"hnd pages, one head at a time, 64 keys prefetched",
       [&](Vector* s) { byHeads(hnd, 1, true, s); }},
      {"hnd pages, two heads at a time, 64 keys prefetched",
       [&](Vector* s) { byHeads(hnd, 2, true, s); }},
      {"nhd pages in address order (every head of a key, then the next key)",
       [&](Vector* s) {
         for (size_t j = 0; j < kPositions; ++j)
           for (size_t g = 0; g < kHeads; ++g) {
             add(s, k + nhd(j, g) * kRow);
             add(s, v + nhd(j, g) * kRow);
           }
       }},
      // The same order over pages in place (a [positions, heads, d] cache): what the shuffle costs.
      {"nhd pages in address order, not shuffled",
       [&](Vector* s) {
         for (size_t row = 0; row < kPositions * kHeads; ++row) {
           add(s, k + row * kRow);
           add(s, v + row * kRow);
         }
       }},
  };
  std::printf("K and V of %zu positions x %zu heads x %zu bytes (%.1f MB), pages of %zu in a "
              "shuffled order, 1 thread, median of 7 passes:\n",
              kPositions, kHeads, kRow, 2.0 * kPages * kPageBytes / 1e6, kPageSize);
  for (const auto& [name, read] : orders) {
    std::vector<double> ms;
    for (int pass = 0; pass < 7; ++pass) {
      Vector flushed[kRow / sizeof(Vector)] = {};
      for (size_t at = 0; at < kFlushBytes; at += kRow)
        add(flushed, flush + at);
      Vector sums[kRow / sizeof(Vector)] = {};
      const auto start = std::chrono::steady_clock::now();
      read(sums);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      volatile float keep = sums[0][0] + flushed[0][0]; // the reads are used
      (void)keep;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("  %-72s %7.3f ms  %5.1f GB/s\n", name, ms[3],
                2.0 * kPages * kPageBytes / (ms[3] * 1e-3) / 1e9);
  }
  std::free(k);
  std::free(v);
  std::free(flush);
  return 0;
}
