// Linear attention's feature maps phi: R^d -> R^m for one row, and their gradients.
#ifndef ATTNC_COMPILER_REFERENCE_FEATUREMAP_H
#define ATTNC_COMPILER_REFERENCE_FEATUREMAP_H

#include "Reference/KernelTensors.h"

namespace attnc {

class FeatureMapper {
public:
  explicit FeatureMapper(const KernelTensors& tensors);

  int64_t size() const { return spec_.featureMap == FeatureMap::Favor ? spec_.features : spec_.dK; }

  // phi = phi(x), m values.
  void operator()(const double* x, double* phi) const;
  // xGradient += phiGradient's product with d phi / d x at x (d_k values), with PyTorch's
  // conventions at kinks: relu's derivative at 0 is 0, elu's is 1 from the right only.
  void addInputGradient(const double* x, const double* phiGradient, double* xGradient) const;

private:
  const Spec& spec_;
  std::vector<double> omega_;
  double rootScale_ = 1;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_FEATUREMAP_H
