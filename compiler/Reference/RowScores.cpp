#include "Reference/RowScores.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnc {
namespace {

// Every kernel forms scores in f32 (as PyTorch does for f32 inputs): one past its range is
// infinite there, and so it is here.
double inF32Range(double x) {
  constexpr double kMaxScore = std::numeric_limits<float>::max();
  return std::fabs(x) > kMaxScore ? std::copysign(std::numeric_limits<double>::infinity(), x) : x;
}

} // namespace

RowScores::RowScores(const MaskEvaluator& mask, const ScoreFunction& score, int64_t b, int64_t h,
                     int64_t keys, double sink)
    : mask_(mask), scoreFunction_(score), b_(b), h_(h), sink_(sink), kept_(keys), scaled_(keys),
      modified_(keys), score_(keys) {}

void RowScores::form(int64_t i) {
  const double scale = mask_.spec().scale;
  // The sink joins every row as one more logit: in the max, the special values and the
  // denominator, but in no weight and no product with v.
  max_ = sink_;
  special_ = std::isnan(sink_);
  for (size_t j = 0; j < kept_.size(); ++j) {
    kept_[j] = mask_.allowed(b_, h_, i, j);
    if (!kept_[j])
      continue;
    scaled_[j] = inF32Range(scale * scoreFunction_(i, j));
    modified_[j] = mask_.modified(b_, h_, i, j, scaled_[j]);
    score_[j] = mask_.hasScoreMod() ? inF32Range(mask_.scoreModded(b_, h_, i, j, modified_[j]))
                                    : modified_[j];
    max_ = std::max(max_, score_[j]);
    special_ = special_ || std::isnan(score_[j]);
  }
  special_ = special_ || max_ == std::numeric_limits<double>::infinity();
  if (special_ || empty())
    return;
  sum_ = std::exp(sink_ - max_);
  for (size_t j = 0; j < kept_.size(); ++j)
    if (kept_[j])
      sum_ += std::exp(score_[j] - max_);
}

} // namespace attnc
