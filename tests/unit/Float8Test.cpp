#include "attnc/Float8.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace attnc {
namespace {

TEST(Float8E4m3, DecodesEveryKindOfByte) {
  EXPECT_EQ(e4m3ToDouble(0x00), 0.0);
  EXPECT_EQ(e4m3ToDouble(0x01), std::ldexp(1.0, -9)); // smallest subnormal
  EXPECT_EQ(e4m3ToDouble(0x07), 7 * std::ldexp(1.0, -9));
  EXPECT_EQ(e4m3ToDouble(0x08), std::ldexp(1.0, -6)); // smallest normal
  EXPECT_EQ(e4m3ToDouble(0x38), 1.0);
  EXPECT_EQ(e4m3ToDouble(0x3C), 1.5);
  EXPECT_EQ(e4m3ToDouble(0x7E), 448.0); // largest finite
  EXPECT_EQ(e4m3ToDouble(0xFE), -448.0);
  EXPECT_EQ(e4m3ToDouble(0xB8), -1.0);
  EXPECT_TRUE(std::isnan(e4m3ToDouble(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3ToDouble(0xFF)));
}

TEST(Float8E4m3, EncodingRoundTripsEveryFiniteByte) {
  for (int bits = 0; bits < 256; ++bits) {
    const double x = e4m3ToDouble(static_cast<uint8_t>(bits));
    if (std::isnan(x))
      continue;
    const uint8_t back = doubleToE4m3(x);
    EXPECT_TRUE(back == bits || (x == 0 && (back | bits) == 0x80)) << bits; // -0 may be +0
  }
}

TEST(Float8E4m3, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(doubleToE4m3(1.0625), 0x38); // halfway between 1 and 1.125: the even 1
  EXPECT_EQ(doubleToE4m3(1.1875), 0x3A); // halfway between 1.125 and 1.25: the even 1.25
  EXPECT_EQ(doubleToE4m3(std::ldexp(1.0, -10)), 0x00); // half the smallest subnormal: even 0
  EXPECT_EQ(doubleToE4m3(3 * std::ldexp(1.0, -10)), 0x02); // 1.5 subnormal steps: even 2
  EXPECT_EQ(doubleToE4m3(15 * std::ldexp(1.0, -10)), 0x08); // up into the smallest normal
  EXPECT_EQ(doubleToE4m3(1000.0), 0x7E);  // past 448: 448, no infinity
  EXPECT_EQ(doubleToE4m3(-1e30), 0xFE);
  EXPECT_EQ(doubleToE4m3(std::numeric_limits<double>::quiet_NaN()), 0x7F);
}

} // namespace
} // namespace attnc
