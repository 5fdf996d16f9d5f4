#include "attnc/Float16.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace attnc {
namespace {

TEST(Float16, ExactValuesRoundTrip) {
  for (double x : {0.0, 1.0, -2.5, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)})
    EXPECT_EQ(halfToDouble(doubleToHalf(x)), x) << x;
  EXPECT_EQ(doubleToHalf(1.0), 0x3C00);
  EXPECT_EQ(doubleToHalf(-2.0), 0xC000);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -24)), 0x0001); // smallest subnormal
}

TEST(Float16, RoundsOnceToNearestEven) {
  // Halfway between 1 and 1 + 2^-10 goes to the even 1; just above goes up.
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3C00);
  EXPECT_EQ(doubleToHalf(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  // A value a float32 conversion would round up to the halfway point, then to even (double
  // rounding): rounded once it stays below.
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40)), 0x3C00);
  EXPECT_EQ(doubleToHalf(65520.0), 0x7C00); // rounds to infinity
  EXPECT_TRUE(std::isnan(halfToDouble(doubleToHalf(std::numeric_limits<double>::quiet_NaN()))));
}

TEST(Bfloat16, RoundsOnceToNearestEven) {
  EXPECT_EQ(doubleToBfloat16(1.0), 0x3F80);
  EXPECT_EQ(bfloat16ToDouble(0x3F80), 1.0);
  EXPECT_EQ(doubleToBfloat16(1.0 + std::ldexp(1.0, -8)), 0x3F80);     // tie -> even
  EXPECT_EQ(doubleToBfloat16(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82); // tie -> even (up)
  EXPECT_EQ(doubleToBfloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3F81);
  EXPECT_EQ(doubleToBfloat16(-0.0), 0x8000);
}

} // namespace
} // namespace attnc
