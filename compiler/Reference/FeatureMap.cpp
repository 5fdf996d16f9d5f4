#include "Reference/FeatureMap.h"

#include "Semantics/Favor.h"

#include <algorithm>
#include <cmath>

namespace attnc {

FeatureMapper::FeatureMapper(const KernelTensors& t) : spec_(t.spec()) {
  if (spec_.featureMap == FeatureMap::Favor) {
    omega_ = t.dense("omega");
    rootScale_ = std::sqrt(spec_.scale);
  }
}

void FeatureMapper::operator()(const double* x, double* phi) const {
  const int64_t d = spec_.dK;
  switch (spec_.featureMap) {
  case FeatureMap::Elu1: // elu(x) + 1
    for (int64_t e = 0; e < d; ++e)
      phi[e] = x[e] > 0 ? x[e] + 1 : std::exp(x[e]);
    break;
  case FeatureMap::Relu:
    for (int64_t e = 0; e < d; ++e)
      phi[e] = std::max(x[e], 0.0);
    break;
  case FeatureMap::Favor: {
    // q and k each take sqrt(scale), so phi(q).phi(k) estimates exp(scale q.k).
    std::vector<double> scaled(x, x + d);
    for (double& value : scaled)
      value *= rootScale_;
    favor::positiveFeatures(scaled.data(), d, omega_.data(), spec_.features, phi);
    break;
  }
  }
}

void FeatureMapper::addInputGradient(const double* x, const double* phiGradient,
                                     double* xGradient) const {
  const int64_t d = spec_.dK;
  switch (spec_.featureMap) {
  case FeatureMap::Elu1:
    for (int64_t e = 0; e < d; ++e)
      xGradient[e] += phiGradient[e] * (x[e] > 0 ? 1 : std::exp(x[e]));
    break;
  case FeatureMap::Relu:
    for (int64_t e = 0; e < d; ++e)
      xGradient[e] += x[e] > 0 ? phiGradient[e] : 0;
    break;
  case FeatureMap::Favor: {
    // phi_f = exp(w_f . x' - |x'|^2 / 2) / sqrt(m) with x' = sqrt(scale) x:
    // d phi_f / d x = sqrt(scale) phi_f (w_f - x').
    std::vector<double> phi(spec_.features);
    (*this)(x, phi.data());
    for (int64_t f = 0; f < spec_.features; ++f) {
      const double common = phiGradient[f] * phi[f] * rootScale_;
      for (int64_t e = 0; e < d; ++e)
        xGradient[e] += common * (omega_[f * d + e] - rootScale_ * x[e]);
    }
    break;
  }
  }
}

} // namespace attnc
