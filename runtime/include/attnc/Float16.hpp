// IEEE binary16 and bfloat16 to and from double, rounding to nearest even in one step: the
// compiler's reference and tools, and the runtime where it writes a cache's rows, convert
// through these.
#ifndef ATTNC_FLOAT16_HPP
#define ATTNC_FLOAT16_HPP

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attnc {
namespace float16_detail {

// x rounded to a binary format with `precision` significand bits (implicit bit included),
// smallest normal exponent minExponent and largest finite value maxFinite. Dividing by a power
// of two is exact in double, and nearbyint rounds ties to even, so rounding happens once.
inline double roundToFormat(double x, int precision, int minExponent, double maxFinite) {
  if (!std::isfinite(x) || x == 0)
    return x;
  int exponent = std::max(std::ilogb(x), minExponent);
  double quantum = std::ldexp(1.0, exponent - (precision - 1));
  double rounded = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(rounded) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

// Encodes a float that is exactly representable in binary16.
inline uint16_t exactFloatToHalf(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(f))
    return sign | 0x7E00u;
  if (std::isinf(f))
    return sign | 0x7C00u;
  float magnitude = std::fabs(f);
  if (magnitude == 0)
    return sign;
  int exponent = std::ilogb(magnitude);
  if (exponent < -14) // subnormal: magnitude = m * 2^-24
    return sign | static_cast<uint16_t>(std::ldexp(magnitude, 24));
  uint16_t mantissa = static_cast<uint16_t>(std::ldexp(magnitude, 10 - exponent) - 1024.0f);
  return sign | static_cast<uint16_t>((exponent + 15) << 10) | mantissa;
}

} // namespace float16_detail

inline double halfToDouble(uint16_t bits) {
  double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  int exponent = (bits >> 10) & 0x1F;
  int mantissa = bits & 0x3FF;
  if (exponent == 0x1F)
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

inline double bfloat16ToDouble(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

inline uint16_t doubleToHalf(double x) {
  if (std::isnan(x))
    return 0x7E00u;
  return float16_detail::exactFloatToHalf(
      static_cast<float>(float16_detail::roundToFormat(x, 11, -14, 65504.0)));
}

inline uint16_t doubleToBfloat16(double x) {
  if (std::isnan(x))
    return 0x7FC0u;
  double maxFinite = std::ldexp(255.0, 120); // (2 - 2^-7) * 2^127
  float f = static_cast<float>(float16_detail::roundToFormat(x, 8, -126, maxFinite));
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}

} // namespace attnc

#endif // ATTNC_FLOAT16_HPP
