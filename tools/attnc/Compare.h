// Comparing a kernel's outputs with the f64 reference's.
#ifndef ATTNC_TOOLS_COMPARE_H
#define ATTNC_TOOLS_COMPARE_H

#include "Spec/Spec.h"

#include <cstdint>
#include <vector>

namespace attnc::tools {

struct Tolerance {
  double absolute, relative; // |got - want| <= absolute + relative * |want|
};

// f32 kernels: 1e-5; f16/bf16 storage (inputs identical, outputs rounded, f32 accumulation):
// 2e-2. Infinities must match exactly (a fully masked row's lse is -inf in both).
Tolerance toleranceFor(DType dtype);

struct Comparison {
  double maxAbsError = 0;
  double maxRelError = 0; // max |got - want| / max |want|
  int64_t failures = 0;   // elements outside the tolerance
  int64_t firstFailure = -1;
};

Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   Tolerance tolerance);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_COMPARE_H
