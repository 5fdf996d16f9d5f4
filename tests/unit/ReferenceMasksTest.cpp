// Every symbolic mask equals the explicit mask tensor written out from its definition.
#include "TestSupport.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>

namespace attnc {
namespace {

using test::randomCall;
using test::runReferenceOn;
using Predicate = std::function<bool(int64_t h, int64_t i, int64_t j)>;

constexpr int64_t kB = 2, kH = 2, kTq = 13, kTk = 19;

// Runs `spec` and "mask=tensor" with the tensor built from `keep`, on the same inputs.
void expectSameAsTensorMask(const std::string& spec, const std::string& extra, Predicate keep,
                            const std::function<void(tools::Call&)>& setUp = {}) {
  tools::Call symbolic = randomCall("heads=2 d_k=4 lse=true weights=true " + spec, kB, kTq, kTk);
  if (setUp)
    setUp(symbolic);
  tools::Call explicitMask =
      randomCall("heads=2 d_k=4 lse=true weights=true mask=tensor " + extra, kB, kTq, kTk);
  for (const char* name : {"q", "k", "v"})
    explicitMask.tensor(name).assign(symbolic.tensor(name).values());
  std::vector<double> bits(kB * kH * kTq * kTk);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t i = 0; i < kTq; ++i)
        for (int64_t j = 0; j < kTk; ++j)
          bits[test::at4(kH, kTq, kTk, b, h, i, j)] = keep(h, i, j);
  explicitMask.tensor("mask").assign(bits);
  test::Outputs a = runReferenceOn(symbolic), b = runReferenceOn(explicitMask);
  ASSERT_EQ(a.o.size(), b.o.size());
  for (size_t i = 0; i < a.o.size(); ++i)
    EXPECT_NEAR(a.o[i], b.o[i], 1e-13) << spec << " at " << i;
  for (size_t i = 0; i < a.lse.size(); ++i)
    EXPECT_TRUE(a.lse[i] == b.lse[i] || std::fabs(a.lse[i] - b.lse[i]) < 1e-13) << spec;
  EXPECT_EQ(a.weights.size(), b.weights.size());
}

const int64_t kBottomRight = kTk - kTq; // query i sits at i + kBottomRight

TEST(ReferenceMasks, CausalBottomRightEqualsLowerTriangle) {
  expectSameAsTensorMask("mask=causal", "",
                         [](int64_t, int64_t i, int64_t j) { return j <= i + kBottomRight; });
}

TEST(ReferenceMasks, CausalTopLeftEqualsLowerTriangle) {
  expectSameAsTensorMask("mask=causal causal_align=top_left", "",
                         [](int64_t, int64_t i, int64_t j) { return j <= i; });
}

TEST(ReferenceMasks, SlidingWindow) {
  expectSameAsTensorMask("mask=window window_left=3 window_right=1", "",
                         [](int64_t, int64_t i, int64_t j) {
                           int64_t q = i + kBottomRight;
                           return j >= q - 3 && j <= q + 1;
                         });
}

TEST(ReferenceMasks, CausalIntersectsWindow) {
  expectSameAsTensorMask("mask=causal+window window_left=2 window_right=4", "",
                         [](int64_t, int64_t i, int64_t j) {
                           int64_t q = i + kBottomRight;
                           return j <= q && j >= q - 2;
                         });
}

TEST(ReferenceMasks, WindowUnitesGlobal) {
  expectSameAsTensorMask("mask=window+global window_left=1 window_right=1 global_tokens=2", "",
                         [](int64_t, int64_t i, int64_t j) {
                           int64_t q = i + kBottomRight;
                           return (j >= q - 1 && j <= q + 1) || q < 2 || j < 2;
                         });
}

TEST(ReferenceMasks, StridedAndDilated) {
  expectSameAsTensorMask("mask=strided stride=3", "", [](int64_t, int64_t i, int64_t j) {
    return ((i + kBottomRight - j) % 3 + 3) % 3 == 0;
  });
  expectSameAsTensorMask("mask=dilated window_left=2 window_right=1 dilation=3", "",
                         [](int64_t, int64_t i, int64_t j) {
                           int64_t d = i + kBottomRight - j;
                           return (d % 3 + 3) % 3 == 0 && d <= 6 && d >= -3;
                         });
}

TEST(ReferenceMasks, BlockSparseFollowsTheLayout) {
  // 4-blocks: Tq 13 -> 4 query blocks, Tk 19 -> 5 key blocks; head 1 keeps the diagonal only.
  std::vector<double> layout(kH * 4 * 5);
  for (int qb = 0; qb < 4; ++qb)
    for (int kb = 0; kb < 5; ++kb) {
      layout[(0 * 4 + qb) * 5 + kb] = (qb + kb) % 2;
      layout[(1 * 4 + qb) * 5 + kb] = qb == kb;
    }
  expectSameAsTensorMask(
      "mask=block_sparse block=4", "",
      [&](int64_t h, int64_t i, int64_t j) { return layout[(h * 4 + i / 4) * 5 + j / 4] != 0; },
      [&](tools::Call& call) { call.tensor("block_layout").assign(layout); });
}

TEST(ReferenceMasks, BigBirdStructuredBlocks) {
  // block 3: 5 query blocks, 7 key blocks; window of 3 blocks, first and last block global.
  expectSameAsTensorMask("mask=bigbird block=3 window_blocks=3 global_blocks=2 random_blocks=0", "",
                         [](int64_t, int64_t i, int64_t j) {
                           int64_t qb = i / 3, kb = j / 3;
                           return std::abs(qb - kb) <= 1 || qb == 0 || qb == 4 || kb == 0 ||
                                  kb == 6;
                         });
}

TEST(ReferenceMasks, BigBirdRandomBlocksAddKeys) {
  tools::Call structured = randomCall(
      "d_k=4 weights=true mask=bigbird block=2 global_blocks=0 random_blocks=0", 1, 16, 32);
  tools::Call random = randomCall(
      "d_k=4 weights=true mask=bigbird block=2 global_blocks=0 random_blocks=2 seed=7", 1, 16, 32);
  test::Outputs a = runReferenceOn(structured), b = runReferenceOn(random);
  int64_t extra = 0, lost = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    extra += a.weights[i] == 0 && b.weights[i] != 0;
    lost += a.weights[i] != 0 && b.weights[i] == 0;
  }
  EXPECT_GT(extra, 0);
  EXPECT_EQ(lost, 0);
}

TEST(ReferenceMasks, PaddingIntersectsCausal) {
  expectSameAsTensorMask(
      "mask=causal+padding", "",
      [](int64_t, int64_t i, int64_t j) { return j <= i + kBottomRight && j < 9; },
      [](tools::Call& call) {
        call.tensor("lengths").assign({9, 9});
      });
}

} // namespace
} // namespace attnc
