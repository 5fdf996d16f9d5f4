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

// x's sign bit at bit 15, and x rounded once (ties to even) to a binary format with
// `mantissaBits` stored bits and smallest normal exponent minExponent, as the format's bits
// without the sign: the exponent field, then the mantissa (overflow carries into the exponent,
// so the largest finite value rounds up to infinity's bits). x is finite and nonzero.
inline uint16_t roundedBits(double x, int mantissaBits, int minExponent, int maxExponent,
                            uint16_t* sign) {
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  *sign = static_cast<uint16_t>((bits >> 48) & 0x8000u);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  const int exponent = biased - 1023;
  const uint16_t infinity = static_cast<uint16_t>((maxExponent - minExponent + 2) << mantissaBits);
  if (biased == 0) // a double subnormal, far below either format's smallest value
    return 0;
  if (exponent > maxExponent)
    return infinity;
  // x = significand * 2^(exponent - 52); the format keeps mantissaBits + 1 bits of it when
  // normal, fewer below minExponent.
  const uint64_t significand = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = 52 - mantissaBits + std::max(0, minExponent - exponent);
  if (shift > 60)
    return 0;
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  if (exponent < minExponent) // subnormal: the mantissa alone (a carry makes the smallest normal)
    return static_cast<uint16_t>(kept);
  // (exponent - minExponent + 1) << mantissaBits plus the mantissa, kept holding the implicit bit.
  return static_cast<uint16_t>((static_cast<uint64_t>(exponent - minExponent) << mantissaBits) +
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
  if (std::isnan(x))
    return 0x7E00u;
  if (std::isinf(x) || x == 0)
    return static_cast<uint16_t>((std::signbit(x) ? 0x8000u : 0u) | (std::isinf(x) ? 0x7C00u : 0u));
  uint16_t sign = 0;
  return sign | float16_detail::roundedBits(x, 10, -14, 15, &sign);
}

inline uint16_t doubleToBfloat16(double x) {
  if (std::isnan(x))
    return 0x7FC0u;
  if (std::isinf(x) || x == 0)
    return static_cast<uint16_t>((std::signbit(x) ? 0x8000u : 0u) | (std::isinf(x) ? 0x7F80u : 0u));
  uint16_t sign = 0;
  return sign | float16_detail::roundedBits(x, 7, -126, 127, &sign);
}

} // namespace attnc

#endif // ATTNC_FLOAT16_HPP
