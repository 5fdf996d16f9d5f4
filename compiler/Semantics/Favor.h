// Performer's FAVOR+ feature map (Choromanski et al. 2021).
#ifndef ATTNC_COMPILER_SEMANTICS_FAVOR_H
#define ATTNC_COMPILER_SEMANTICS_FAVOR_H

#include <cstdint>
#include <vector>

namespace attnc::favor {

// The projection omega [features, dim], row-major: blocks of dim orthogonal Gaussian directions
// (Gram-Schmidt on Gaussian rows), each row scaled to the norm of a fresh Gaussian vector so the
// rows are marginally N(0, I). Drawn from the seed's FAVOR stream (random::GaussianStream).
std::vector<double> orthogonalFeatures(uint64_t seed, int64_t features, int64_t dim);

// phi(x) = exp(omega x - |x|^2 / 2) / sqrt(m) for x already scaled by sqrt(scale), so that
// E[phi(q) . phi(k)] = exp(scale q . k). Writes m = features values.
void positiveFeatures(const double* x, int64_t dim, const double* omega, int64_t features,
                      double* phi);

} // namespace attnc::favor

#endif // ATTNC_COMPILER_SEMANTICS_FAVOR_H
