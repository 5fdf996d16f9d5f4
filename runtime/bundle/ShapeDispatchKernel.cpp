// The entry of a shape-dispatch bundle: several kernels of one spec, each with the schedule
// tuned for a range of sequence lengths, and an attnc_kernel_run that picks one per call.
//
// ShapeDispatch.cpp generates the table in each bundle (hidden, so bundles never share it):
//   attnc_shape_count: int64; attnc_shape_entries: per kernel 8-byte words,
//     Tq lo, Tq hi, Tk lo, Tk hi, only inside (0 or 1), runner (KernelRunner.h),
//     kernels[0 .. ATTNC_KERNEL_SYMBOLS)
// The pick: the entry whose ranges hold (Tq, Tk); else the nearest on a log scale, where an
// entry's distance is |log2 Tq - log2 clamp(Tq, lo, hi)| + the same for Tk (a tile that suits
// 1024 keys suits 1500 better than 16), among the entries not marked "only inside" (the decode
// kernel runs short queries only); ties go to the earlier entry, and entries come longest
// first. With ATTNC_TRACE_DISPATCH set, each pick is printed on stderr.
#include "KernelRunner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace {

struct ShapeEntry {
  int64_t seqQLo, seqQHi, seqKLo, seqKHi, onlyInside;
  attnc_kernel_runner runner;
  void* kernels[ATTNC_KERNEL_SYMBOLS];
};

double distance(int64_t size, int64_t lo, int64_t hi) {
  return std::fabs(std::log2(static_cast<double>(size)) -
                   std::log2(static_cast<double>(std::clamp(size, lo, hi))));
}

} // namespace

extern "C" {
extern const int64_t attnc_shape_count;
extern const ShapeEntry attnc_shape_entries[];

int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize) {
  const ShapeEntry* pick = &attnc_shape_entries[0];
  double nearest = INFINITY;
  for (int64_t i = 0; i < attnc_shape_count; ++i) {
    const ShapeEntry& e = attnc_shape_entries[i];
    const double d =
        distance(call->seq_q, e.seqQLo, e.seqQHi) + distance(call->seq_k, e.seqKLo, e.seqKHi);
    if (e.onlyInside && d > 0)
      continue;
    if (d < nearest) {
      nearest = d;
      pick = &e;
    }
  }
  static const bool trace = std::getenv("ATTNC_TRACE_DISPATCH") != nullptr;
  if (trace)
    std::fprintf(stderr,
                 "attnc: Tq=%lld Tk=%lld runs kernel %lld of %lld (Tq %lld-%lld, Tk %lld-%lld)\n",
                 static_cast<long long>(call->seq_q), static_cast<long long>(call->seq_k),
                 static_cast<long long>(pick - attnc_shape_entries),
                 static_cast<long long>(attnc_shape_count), static_cast<long long>(pick->seqQLo),
                 static_cast<long long>(pick->seqQHi), static_cast<long long>(pick->seqKLo),
                 static_cast<long long>(pick->seqKHi));
  return pick->runner(call, message, messageSize, pick->kernels);
}
}
