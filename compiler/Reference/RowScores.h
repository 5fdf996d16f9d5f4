// One query row's scores as the forward forms them, for the keys the masks keep,
//   x0_j = scale r_ij,  x1_j = modifiers(x0_j),  s_j = score_mod(x1_j)
// (each past f32's range made infinite, as kernels form scores in f32), and the row's softmax
// with the sink: the one definition the forward and the backward share.
#ifndef ATTNC_COMPILER_REFERENCE_ROWSCORES_H
#define ATTNC_COMPILER_REFERENCE_ROWSCORES_H

#include "Reference/MaskEvaluator.h"
#include "Reference/ScoreFunction.h"

#include <cmath>
#include <limits>
#include <vector>

namespace attnc {

class RowScores {
public:
  // Head h of batch entry b, over `keys` keys; `sink` is the head's sink logit (-inf without).
  RowScores(const MaskEvaluator& mask, const ScoreFunction& score, int64_t b, int64_t h,
            int64_t keys, double sink);

  // Forms row i.
  void form(int64_t i);

  bool kept(int64_t j) const { return kept_[j]; }
  double scaled(int64_t j) const { return scaled_[j]; }
  double modified(int64_t j) const { return modified_[j]; }

  // A NaN score, or a +inf one (softmax's inf - inf), among the kept keys or the sink: the
  // row's weights, o and lse are NaN, as in PyTorch's math path.
  bool special() const { return special_; }
  // No kept key and no sink: o = 0, lse = -inf, weights 0.
  bool empty() const { return max_ == -std::numeric_limits<double>::infinity(); }
  // With L = exp(sink - m) + sum_j exp(s_j - m) in [1, keys + 1]: lse = m + log L and
  // p_j = exp(s_j - m) / L. Not p_j = exp(s_j - lse): where |m| dwarfs log L (m = -1e20, a
  // score_mod's constant shift or a -1e30 mask value), m + log L rounds to m and every p_j to
  // exp(s_j - m), weights that no longer sum to one.
  double lse() const { return max_ + std::log(sum_); }
  double probability(int64_t j) const { return std::exp(score_[j] - max_) / sum_; }
  double sinkProbability() const { return std::exp(sink_ - max_) / sum_; }

private:
  const MaskEvaluator& mask_;
  const ScoreFunction& scoreFunction_;
  int64_t b_, h_;
  double sink_;
  std::vector<char> kept_;
  std::vector<double> scaled_, modified_, score_;
  bool special_ = false;
  double max_ = 0, sum_ = 0;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_ROWSCORES_H
