#include "Semantics/Positions.h"

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
  return static_cast<double>(pos) *
         std::pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(rotaryDims));
}

std::pair<int64_t, int64_t> ropePairDims(int64_t pair, int64_t rotaryDims, RopeStyle style) {
  if (style == RopeStyle::Half)
    return {pair, pair + rotaryDims / 2};
  return {2 * pair, 2 * pair + 1};
}

void applyRope(double* x, int64_t pos, int64_t rotaryDims, double theta, RopeStyle style) {
  for (int64_t p = 0; p < rotaryDims / 2; ++p) {
    const double angle = ropeAngle(pos, p, rotaryDims, theta);
    const double c = std::cos(angle), s = std::sin(angle);
    const auto [a, b] = ropePairDims(p, rotaryDims, style);
    const double xa = x[a], xb = x[b];
    x[a] = xa * c - xb * s;
    x[b] = xa * s + xb * c;
  }
}

double sinusoidal(int64_t pos, int64_t dim, int64_t dModel) {
  double frequency =
      std::pow(10000.0, -static_cast<double>(dim - dim % 2) / static_cast<double>(dModel));
  double angle = static_cast<double>(pos) * frequency;
  return dim % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

} // namespace attnc::positions
