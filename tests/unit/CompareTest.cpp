// verify's comparison: the figure it prints and its verdict come from one rule.
#include "Compare.h"

#include <cmath>
#include <gtest/gtest.h>

namespace attnc::tools {
namespace {

const Tolerance kF32{1e-5, 1e-5};

// Once: max |got - want| / max |want| was printed as the relative error, 3e-9 beside a row that
// cancels ±3e38 down to 1 and misses it by 1e30, which the per-element rule fails: "rel err
// 3e-09 ... FAIL". The worst element's share of its own tolerance is past 1 exactly when
// verify fails.
TEST(Compare, TheWorstShareOfTheToleranceMatchesTheVerdict) {
  const std::vector<double> want = {3e38, -3e38, 1.0};
  Comparison c = compare({3e38, -3e38, 1.0 + 1e30}, want, kF32);
  EXPECT_EQ(c.failures, 1);
  EXPECT_EQ(c.firstFailure, 2);
  EXPECT_GT(c.worstShare, 1e30);
  c = compare({3e38 * (1 + 5e-6), -3e38, 1.0 + 1e-5}, want, kF32);
  EXPECT_EQ(c.failures, 0);
  EXPECT_LE(c.worstShare, 1);
  EXPECT_GT(c.worstShare, 0.4);
}

// Infinities and NaNs must match exactly. An infinite want once allowed any got (its tolerance,
// abs + rel · inf, was infinite): a finite lse passed where the reference had -inf.
TEST(Compare, InfinitiesAndNaNsMatchExactly) {
  const double inf = INFINITY, nan = std::nan("");
  EXPECT_EQ(compare({-inf, inf, nan}, {-inf, inf, nan}, kF32).failures, 0);
  for (double got : {0.0, inf, nan}) {
    const Comparison c = compare({got}, {-inf}, kF32);
    EXPECT_EQ(c.failures, 1) << got;
    EXPECT_EQ(c.worstShare, inf) << got;
  }
  EXPECT_EQ(compare({1.0}, {nan}, kF32).failures, 1);
}

} // namespace
} // namespace attnc::tools
