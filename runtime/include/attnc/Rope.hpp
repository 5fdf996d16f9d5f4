// Rotary position embedding (Su et al. 2021), the one definition the f64 reference, the code
// generators' angle tables and the runtime (which rotates keys it writes into a KV cache) use:
// pair p of the first `dims` dims of a row rotates by the angle pos * theta^(-2p / dims); the
// "half" style pairs (x_p, x_{p + dims/2}), the interleaved style (x_{2p}, x_{2p+1}).
#ifndef ATTNC_ROPE_HPP
#define ATTNC_ROPE_HPP

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace attnc::rope {

inline double angle(int64_t pos, int64_t pair, int64_t dims, double theta) {
  return static_cast<double>(pos) *
         std::pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(dims));
}

// The two dims pair p rotates: (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c).
inline std::pair<int64_t, int64_t> pairDims(int64_t pair, int64_t dims, bool interleaved) {
  if (!interleaved)
    return {pair, pair + dims / 2};
  return {2 * pair, 2 * pair + 1};
}

// Rotates the first `dims` elements of x by the pairs' angles, given as their cosines and sines
// (dims / 2 each), in f64.
inline void rotate(double* x, const double* cosines, const double* sines, int64_t dims,
                   bool interleaved) {
  for (int64_t p = 0; p < dims / 2; ++p) {
    const auto [first, second] = pairDims(p, dims, interleaved);
    const double x0 = x[first], x1 = x[second];
    x[first] = x0 * cosines[p] - x1 * sines[p];
    x[second] = x0 * sines[p] + x1 * cosines[p];
  }
}

// The cosines and sines of the pairs' angles at position pos (dims / 2 each).
inline void angles(int64_t pos, int64_t dims, double theta, double* cosines, double* sines) {
  for (int64_t p = 0; p < dims / 2; ++p) {
    const double a = angle(pos, p, dims, theta);
    cosines[p] = std::cos(a);
    sines[p] = std::sin(a);
  }
}

// Rotates the first `dims` elements of x at position pos, in f64.
inline void apply(double* x, int64_t pos, int64_t dims, double theta, bool interleaved) {
  std::vector<double> cosines(static_cast<size_t>(dims / 2)), sines(cosines.size());
  angles(pos, dims, theta, cosines.data(), sines.data());
  rotate(x, cosines.data(), sines.data(), dims, interleaved);
}

} // namespace attnc::rope

#endif // ATTNC_ROPE_HPP
