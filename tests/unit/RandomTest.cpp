#include "Semantics/Random.h"

#include <gtest/gtest.h>

namespace attnc {
namespace {

// Known-answer tests of Random123's philox4x32-10.
TEST(Philox, KnownAnswers) {
  random::Block zero = random::philox4x32({0, 0, 0, 0}, 0, 0);
  EXPECT_EQ(zero, (random::Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  random::Block ones = random::philox4x32({~0u, ~0u, ~0u, ~0u}, ~0u, ~0u);
  EXPECT_EQ(ones, (random::Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  random::Block pi = random::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                                        0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi, (random::Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Dropout, ThresholdAndRate) {
  EXPECT_EQ(random::dropoutThreshold(0.0), 0u);
  EXPECT_EQ(random::dropoutThreshold(0.5), 0x80000000u);
  int64_t kept = 0, total = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 256; ++j, ++total)
      kept += random::dropoutKeeps(99, random::dropoutThreshold(0.25), 0, 1, i, j);
  EXPECT_NEAR(static_cast<double>(kept) / total, 0.75, 0.02);
}

TEST(BigBird, RandomBlocksAreInRangeAndSeeded) {
  for (int r = 0; r < 16; ++r) {
    int64_t block = random::bigbirdRandomBlock(5, 2, 3, r, 7);
    EXPECT_GE(block, 0);
    EXPECT_LT(block, 7);
    EXPECT_EQ(block, random::bigbirdRandomBlock(5, 2, 3, r, 7));
  }
}

} // namespace
} // namespace attnc
