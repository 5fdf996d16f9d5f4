// The unfused attention a user writes without attnc, for side-by-side benchmarks:
//   S = scale Q K^T (an OpenBLAS sgemm per head), masked entries -inf, a softmax per row,
//   O = P V (a second sgemm). It stores the whole Tq x Tk score matrix of a head.
#ifndef ATTNC_TOOLS_UNFUSEDBASELINE_H
#define ATTNC_TOOLS_UNFUSEDBASELINE_H

#include "CallSetup.h"

#include <optional>
#include <string>
#include <vector>

namespace attnc::tools {

class UnfusedBaseline {
public:
  // Why the baseline cannot run this spec (it covers sdpa with no mask, causal and padding).
  static std::optional<std::string> unsupported(const Spec& spec);

  // Copies the call's q, k, v (and lengths) to dense f32 BHSD once, outside the timing.
  explicit UnfusedBaseline(const Call& call);
  // One forward pass, heads spread over `threads` threads.
  void run(int threads);
  const std::vector<float>& output() const { return o_; } // [B, H, Tq, d_v]

private:
  Spec spec_;
  int64_t batch_, seqQ_, seqK_;
  std::vector<float> q_, k_, v_, o_;
  std::vector<float> scores_; // one Tq x Tk matrix per thread
  std::vector<int64_t> lengths_;
};

} // namespace attnc::tools

#endif // ATTNC_TOOLS_UNFUSEDBASELINE_H
