#include "Semantics/Favor.h"

#include "Semantics/Random.h"

#include <cmath>

namespace attnc::favor {

std::vector<double> orthogonalFeatures(uint64_t seed, int64_t features, int64_t dim) {
  random::GaussianStream gaussian(seed, random::kFavorStream);
  std::vector<double> omega(features * dim);
  for (int64_t row = 0; row < features; ++row) {
    double* w = &omega[row * dim];
    for (int64_t d = 0; d < dim; ++d)
      w[d] = gaussian.next();
    // Orthogonalise against the earlier rows of the same block of dim rows (modified
    // Gram-Schmidt), then normalise.
    for (int64_t prev = row - row % dim; prev < row; ++prev) {
      const double* u = &omega[prev * dim];
      double dot = 0;
      for (int64_t d = 0; d < dim; ++d)
        dot += w[d] * u[d];
      for (int64_t d = 0; d < dim; ++d)
        w[d] -= dot * u[d];
    }
    double norm = 0;
    for (int64_t d = 0; d < dim; ++d)
      norm += w[d] * w[d];
    norm = std::sqrt(norm);
    for (int64_t d = 0; d < dim; ++d)
      w[d] /= norm;
  }
  // The unit rows above are needed for Gram-Schmidt; only now take the chi-distributed lengths.
  for (int64_t row = 0; row < features; ++row) {
    double length = 0;
    for (int64_t d = 0; d < dim; ++d) {
      double g = gaussian.next();
      length += g * g;
    }
    length = std::sqrt(length);
    for (int64_t d = 0; d < dim; ++d)
      omega[row * dim + d] *= length;
  }
  return omega;
}

void positiveFeatures(const double* x, int64_t dim, const double* omega, int64_t features,
                      double* phi) {
  double halfNorm = 0;
  for (int64_t d = 0; d < dim; ++d)
    halfNorm += 0.5 * x[d] * x[d];
  double normaliser = 1.0 / std::sqrt(static_cast<double>(features));
  for (int64_t m = 0; m < features; ++m) {
    double dot = 0;
    for (int64_t d = 0; d < dim; ++d)
      dot += omega[m * dim + d] * x[d];
    phi[m] = std::exp(dot - halfNorm) * normaliser;
  }
}

} // namespace attnc::favor
