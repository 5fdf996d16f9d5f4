#include "Compare.h"

#include <cmath>
#include <limits>

namespace attnc::tools {

Tolerance toleranceFor(DType dtype) {
  return dtype == DType::F32 ? Tolerance{1e-5, 1e-5} : Tolerance{2e-2, 2e-2};
}

Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   Tolerance tolerance) {
  Comparison c;
  double maxWant = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    double error;
    if (std::isinf(w) || std::isinf(g) || std::isnan(g) || std::isnan(w))
      error = (g == w) ? 0.0 : std::numeric_limits<double>::infinity();
    else
      error = std::fabs(g - w);
    if (std::isfinite(w))
      maxWant = std::max(maxWant, std::fabs(w));
    c.maxAbsError = std::max(c.maxAbsError, error);
    bool ok = error == 0 || error <= tolerance.absolute + tolerance.relative * std::fabs(w);
    if (!ok && c.failures++ == 0)
      c.firstFailure = static_cast<int64_t>(i);
  }
  c.maxRelError = maxWant > 0 ? c.maxAbsError / maxWant : c.maxAbsError;
  return c;
}

} // namespace attnc::tools
