#include "Semantics/Positions.h"

#include "attnc/Rope.hpp"

#include <cmath>

namespace attnc::positions {
namespace {

std::vector<double> powerOfTwoSlopes(int64_t n) {
  std::vector<double> slopes(n);
  for (int64_t h = 0; h < n; ++h)
    slopes[h] = std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n));
  return slopes;
}

} // namespace

std::vector<double> alibiSlopes(int64_t heads) {
  int64_t lower = 1;
  while (lower * 2 <= heads)
    lower *= 2;
  std::vector<double> slopes = powerOfTwoSlopes(lower);
  std::vector<double> upper = powerOfTwoSlopes(2 * lower);
  for (int64_t k = 0; static_cast<int64_t>(slopes.size()) < heads; ++k)
    slopes.push_back(upper[2 * k]);
  return slopes;
}

double ropeAngle(int64_t pos, int64_t pair, int64_t rotaryDims, double theta) {
  return rope::angle(pos, pair, rotaryDims, theta);
}

std::pair<int64_t, int64_t> ropePairDims(int64_t pair, int64_t rotaryDims, RopeStyle style) {
  return rope::pairDims(pair, rotaryDims, style == RopeStyle::Interleaved);
}

void applyRope(double* x, int64_t pos, int64_t rotaryDims, double theta, RopeStyle style) {
  rope::apply(x, pos, rotaryDims, theta, style == RopeStyle::Interleaved);
}

double sinusoidalFrequency(int64_t dim, int64_t dModel) {
  return std::pow(10000.0, -static_cast<double>(dim - dim % 2) / static_cast<double>(dModel));
}

double sinusoidal(int64_t pos, int64_t dim, int64_t dModel) {
  double angle = static_cast<double>(pos) * sinusoidalFrequency(dim, dModel);
  return dim % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

} // namespace attnc::positions
