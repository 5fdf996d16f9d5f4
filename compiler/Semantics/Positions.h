// Position-dependent modifiers: alignment, ALiBi, RoPE and the sinusoidal encoding.
#ifndef ATTNC_COMPILER_SEMANTICS_POSITIONS_H
#define ATTNC_COMPILER_SEMANTICS_POSITIONS_H

#include "Spec/Spec.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace attnc::positions {

// Query row i sits at position i + offset among the keys.
inline int64_t alignmentOffset(const Spec& spec, int64_t seqQ, int64_t seqK) {
  return spec.causalAlign == CausalAlign::BottomRight ? seqK - seqQ : 0;
}

// ALiBi slopes (Press et al. 2022): for n heads a power of two, slope_h = 2^(-8(h+1)/n); for
// other n, the slopes of the power of two below n, then every other slope of the one above.
// The score of (qpos, j) gets -slope_h * |qpos - j| (for causal rows, -slope_h * (qpos - j)).
std::vector<double> alibiSlopes(int64_t heads);

// RoPE (Su et al. 2021) on the first rotaryDims dims of x, at position pos: pair p rotates by
// the angle pos * theta^(-2p / rotaryDims). Half style pairs (x_p, x_{p + rotaryDims/2});
// interleaved pairs (x_{2p}, x_{2p+1}). The spec's terms for attnc/Rope.hpp, the one definition.
void applyRope(double* x, int64_t pos, int64_t rotaryDims, double theta, RopeStyle style);
// Pair p's angle at position pos, and the two dims it rotates (x_a, x_b) -> (x_a c - x_b s,
// x_a s + x_b c): what applyRope does, for code that tabulates the angles.
double ropeAngle(int64_t pos, int64_t pair, int64_t rotaryDims, double theta);
std::pair<int64_t, int64_t> ropePairDims(int64_t pair, int64_t rotaryDims, RopeStyle style);

// Vaswani et al. 2017: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...).
double sinusoidal(int64_t pos, int64_t dim, int64_t dModel);
// Its frequency 10000^(-(dim - dim mod 2) / d_model): what sinusoidal does, for code that
// tabulates the angles.
double sinusoidalFrequency(int64_t dim, int64_t dModel);

} // namespace attnc::positions

#endif // ATTNC_COMPILER_SEMANTICS_POSITIONS_H
