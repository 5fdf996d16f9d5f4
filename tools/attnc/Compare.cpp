#include "Compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnc::tools {

Tolerance toleranceFor(DType dtype, int64_t reductionLength) {
  constexpr double kCalibratedLength = 1024;
  const double growth =
      std::sqrt(std::max(1.0, static_cast<double>(reductionLength) / kCalibratedLength));
  const double base = dtype == DType::F32 ? 1e-5 : 2e-2;
  return {base * growth, base * growth};
}

int64_t reductionLength(const Spec& spec, int64_t seqK) {
  int64_t longest = std::max({spec.dK, spec.dQ, spec.dAttn, seqK});
  if (spec.variant == Variant::Mha)
    longest = std::max(longest, spec.dModel);
  return longest;
}

int64_t gradientReductionLength(const Spec& spec, const std::string& argument, int64_t batch,
                                int64_t seqQ, int64_t seqK) {
  const int64_t forward = reductionLength(spec, seqK);
  if (spec.variant != Variant::Mha && argument == "q")
    return forward;
  if (spec.variant != Variant::Mha && (argument == "k" || argument == "v"))
    return std::max(forward, seqQ * spec.groupSize());
  return std::max(forward, batch * spec.heads * seqQ * seqK);
}

Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   Tolerance tolerance) {
  Comparison c;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    double error;
    if (std::isnan(g) || std::isnan(w))
      error = std::isnan(g) && std::isnan(w) ? 0.0 : std::numeric_limits<double>::infinity();
    else if (std::isinf(w) || std::isinf(g))
      error = (g == w) ? 0.0 : std::numeric_limits<double>::infinity();
    else
      error = std::fabs(g - w);
    // An infinite want allows nothing but itself (error 0 or inf).
    const double allowed =
        tolerance.absolute + tolerance.relative * (std::isfinite(w) ? std::fabs(w) : 0.0);
    const double share = error == 0 ? 0.0 : error / allowed;
    c.maxAbsError = std::max(c.maxAbsError, error);
    c.worstShare = std::max(c.worstShare, share);
    if (share > 1 && c.failures++ == 0)
      c.firstFailure = static_cast<int64_t>(i);
  }
  return c;
}

} // namespace attnc::tools
