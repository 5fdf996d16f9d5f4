// OCP FP8 E4M3 ("e4m3fn": 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinity,
// NaN only as S.1111.111, largest finite 448) to and from double: the reference and the tools
// read an fp8 KV cache's bytes through these, and the compiler's kernels decode them to the same
// values (the MLIR kernel kit's toF32, dialects/attn/Kit/Elements.h).
#ifndef ATTNC_FLOAT8_HPP
#define ATTNC_FLOAT8_HPP

#include "attnc/Float16.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attnc {

inline constexpr double kE4m3Largest = 448.0;

inline double e4m3ToDouble(uint8_t bits) {
  const double sign = (bits & 0x80u) ? -1.0 : 1.0;
  const int exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  if ((bits & 0x7Fu) == 0x7Fu)
    return std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -9);
  return sign * std::ldexp(8 + mantissa, exponent - 10);
}

// x rounded once to nearest even, saturating at ±448 (the format has no infinity; a cache row
// is scaled into range before it is stored, so saturation only meets rounding at the edge).
inline uint8_t doubleToE4m3(double x) {
  if (std::isnan(x))
    return 0x7F;
  // The format's bits as roundToFormat gives them, the sign at bit 15: moved to bit 7.
  const uint16_t bits = float16_detail::roundToFormat(
      std::clamp(x, -kE4m3Largest, kE4m3Largest), 0x7F, /*mantissaBits=*/3, /*minExponent=*/-6,
      /*maxExponent=*/8);
  return static_cast<uint8_t>(((bits >> 8) & 0x80u) | (bits & 0x7Fu));
}

} // namespace attnc

#endif // ATTNC_FLOAT8_HPP
