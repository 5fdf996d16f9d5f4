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

// x rounded once (ties to even) to a binary format with `mantissaBits` stored bits and
// exponents minExponent..maxExponent for its normal numbers, as the format's bits: a NaN as
// `nan`, past the largest finite value infinity (a carry out of the mantissa reaches it too).
inline uint16_t roundToFormat(double x, uint16_t nan, int mantissaBits, int minExponent,
                              int maxExponent) {
  if (std::isnan(x))
    return nan;
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const auto sign = static_cast<uint16_t>((bits >> 48) & 0x8000u);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF), exponent = biased - 1023;
  if (exponent > maxExponent) // infinity too
    return sign | static_cast<uint16_t>((maxExponent - minExponent + 2) << mantissaBits);
  if (biased == 0) // zero, or a double subnormal: far below either format's smallest value
    return sign;
  // x = significand * 2^(exponent - 52); the format keeps mantissaBits + 1 bits of it when
  // normal, fewer below minExponent.
  const uint64_t significand = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = 52 - mantissaBits + std::max(0, minExponent - exponent);
  if (shift > 60)
    return sign;
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  if (exponent < minExponent) // subnormal: the mantissa alone (a carry makes the smallest normal)
    return sign | static_cast<uint16_t>(kept);
  // The exponent field (exponent - minExponent + 1) and the mantissa: kept holds the implicit
  // bit, which adds the 1.
  return sign | static_cast<uint16_t>((static_cast<uint64_t>(exponent - minExponent)
                                       << mantissaBits) +
                                      kept);
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
  return float16_detail::roundToFormat(x, 0x7E00u, 10, -14, 15);
}

inline uint16_t doubleToBfloat16(double x) {
  return float16_detail::roundToFormat(x, 0x7FC0u, 7, -126, 127);
}

} // namespace attnc

#endif // ATTNC_FLOAT16_HPP
