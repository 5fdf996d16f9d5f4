// A KV cache row quantized as int8 and fp8_e4m3 caches store it: symmetric, one f32 scale per
// row (a position and KV head). The runtime's kv_append writes rows so, and the reference
// computes with the rows as written, through these.
#ifndef ATTNC_QUANTIZEDROWS_HPP
#define ATTNC_QUANTIZEDROWS_HPP

#include "attnc/Float8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

namespace attnc {

// What a quantized row's elements hold: int8 values, or E4M3 bytes.
enum class RowCode { Int8, E4m3 };

// Replaces x by its codes, round(x / s) clamped to [-127, 127] or the E4M3 byte of x / s, and
// returns s = max|x| / (127 or 448) in f32 (0 for a zero row, whose codes are 0). A row holding
// NaN or ±inf, which int8 cannot hold and E4M3 holds only in part (NaN, no infinity), gets codes
// 0 and s = NaN: it reads as NaN throughout, never as numbers.
inline float quantizeRow(std::span<double> x, RowCode code) {
  if (!std::all_of(x.begin(), x.end(), [](double v) { return std::isfinite(v); })) {
    std::fill(x.begin(), x.end(), 0.0);
    return std::numeric_limits<float>::quiet_NaN();
  }
  double largest = 0;
  for (double v : x)
    largest = std::max(largest, std::fabs(v));
  const auto scale = static_cast<float>(largest / (code == RowCode::Int8 ? 127 : kE4m3Largest));
  for (double& v : x)
    v = scale <= 0                 ? 0
        : code == RowCode::E4m3 ? doubleToE4m3(v / scale)
                                 : std::clamp(std::nearbyint(v / scale), -127.0, 127.0);
  return scale;
}

// The number a code stands for before its row's scale: an int8 value itself, an E4M3 byte
// decoded.
inline double codeValue(double code, RowCode rowCode) {
  return rowCode == RowCode::E4m3 ? e4m3ToDouble(static_cast<uint8_t>(code)) : code;
}

} // namespace attnc

#endif // ATTNC_QUANTIZEDROWS_HPP
