// The built-in masks and modifiers written in the expression language (Spec/BuiltinExpressions)
// agree with their definitions written apart (MaskPredicates.h, the ALiBi slopes of
// Semantics/Positions.h, random::bigbirdRandomBlock and random::dropoutKeeps), under both
// alignments and with Tq != Tk.
#include "Expr/ExprEval.h"
#include "MaskPredicates.h"
#include "Semantics/Positions.h"
#include "Semantics/Random.h"
#include "Spec/BuiltinExpressions.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <span>
#include <string>

namespace attnc {
namespace {

// Whether (h, i, j) is kept, the query at qpos, in a Tq x Tk score matrix.
struct Element {
  int64_t h, i, j, qpos, tq, tk;
};
using Predicate = std::function<bool(const Element&)>;

constexpr int64_t kHeads = 2;

// The kernel inputs a test reads, as functions of their indices: block_layout [H, ceil(Tq/4),
// ceil(Tk/4)] at most, lengths [B], the tensor mask and the bias [B, H, Tq, Tk].
int64_t layoutElement(std::span<const int64_t> at) {
  return (at[0] + 2 * at[1] + at[2]) % 3 == 0;
}
int64_t lengthOf(int64_t b) { return 5 + 7 * b; }
int64_t maskElement(std::span<const int64_t> at) {
  return (at[0] + at[1] + 3 * at[2] + at[3]) % 4 != 0;
}
double biasElement(std::span<const int64_t> at) {
  return 0.25 * static_cast<double>(at[0] - at[1]) + 0.01 * static_cast<double>(at[2] * at[3]);
}

expr::Environment kernelInputs() {
  expr::Environment environment;
  environment.aux = [](const std::string& name, std::span<const int64_t> at) {
    if (name == "bias")
      return expr::Value{expr::Type::Float, 0, biasElement(at)};
    const int64_t value = name == "lengths" ? lengthOf(at[0])
                          : name == "mask"  ? maskElement(at)
                                            : layoutElement(at);
    return expr::Value{expr::Type::Int, value, 0};
  };
  return environment;
}

// Under both alignments for a mask of positions; the others read raw rows (qpos unused).
void expectSameScores(const std::string& text, const Predicate& keep, bool positional = true) {
  for (int64_t tq : {1, 13, 40})
    for (int64_t tk : {1, 19, 40}) {
      for (const char* align : {"bottom_right", "top_left"}) {
        if (!positional && std::string(align) == "top_left")
          continue;
        const std::string alignment = positional ? " causal_align=" + std::string(align) : "";
        const Spec spec = parseSpec("heads=2 d_k=4 " + text + alignment);
        const std::optional<expr::Node> mask = masksAsExpression(spec, kBuiltinMasks);
        ASSERT_TRUE(mask) << text;
        const expr::Environment environment = kernelInputs();
        const int64_t offset = std::string(align) == "bottom_right" ? tk - tq : 0;
        for (int64_t h = 0; h < kHeads; ++h)
          for (int64_t i = 0; i < tq; ++i)
            for (int64_t j = 0; j < tk; ++j) {
              const expr::Point p{0, h, h, i, j, i + offset, tq, tk, 0};
              ASSERT_EQ(expr::evaluate(*mask, p, environment).truth(),
                        keep({h, i, j, i + offset, tq, tk}))
                  << text << " " << align << " Tq=" << tq << " Tk=" << tk << " at h=" << h
                  << " i=" << i << " j=" << j;
            }
      }
    }
}

TEST(BuiltinExpressions, ConstraintsAgreeWithTheMaskDefinitions) {
  expectSameScores("mask=causal",
                   [](const Element& e) { return masks::causal<int64_t>(e.qpos, e.j); });
  expectSameScores("mask=padding+tensor", [](const Element& e) {
    const int64_t at[] = {0, e.h, e.i, e.j};
    return e.j < lengthOf(0) && maskElement(at) != 0;
  }, false);
  // Constraints intersect the union of the patterns.
  expectSameScores("mask=causal+strided+global stride=3 global_tokens=2", [](const Element& e) {
    return masks::causal<int64_t>(e.qpos, e.j) &&
           (masks::strided<int64_t>(e.qpos, e.j, 3) || masks::global<int64_t>(e.qpos, e.j, 2));
  });
}

TEST(BuiltinExpressions, PatternsAgreeWithTheMaskDefinitions) {
  expectSameScores("mask=strided stride=3",
                   [](const Element& e) { return masks::strided<int64_t>(e.qpos, e.j, 3); });
  expectSameScores("mask=dilated window_left=3 window_right=1 dilation=2", [](const Element& e) {
    return masks::dilated<int64_t>(e.qpos, e.j, 3, 1, 2);
  });
  expectSameScores("mask=window+global window_left=2 window_right=0 global_tokens=2",
                   [](const Element& e) {
                     return masks::window<int64_t>(e.qpos, e.j, 2, 0) ||
                            masks::global<int64_t>(e.qpos, e.j, 2);
                   });
  expectSameScores("mask=block_sparse block=4", [](const Element& e) {
    const int64_t at[] = {e.h, e.i / 4, e.j / 4};
    return layoutElement(at) != 0;
  }, false);
}

// Seeds whose high word sets the sign bit of Philox's key, and block counts that are not
// powers of two, so the unsigned word's remainder is taken through the signed one.
TEST(BuiltinExpressions, BigBirdDrawsTheSameRandomBlocks) {
  for (uint64_t seed : {uint64_t{9}, uint64_t{0xFFFFFFFF12345678}})
    for (int64_t block : {3, 4}) {
      const auto keep = [&](const Element& e) {
        const int64_t qb = e.i / block, kb = e.j / block;
        const int64_t queryBlocks = (e.tq + block - 1) / block;
        const int64_t keyBlocks = (e.tk + block - 1) / block;
        if (masks::bigbirdStructured<int64_t>(qb, kb, queryBlocks, keyBlocks, 1, 1))
          return true;
        for (int64_t r = 0; r < 5; ++r)
          if (random::bigbirdRandomBlock(seed, e.h, qb, r, keyBlocks) == kb)
            return true;
        return false;
      };
      expectSameScores("mask=bigbird block=" + std::to_string(block) +
                           " window_blocks=1 global_blocks=1 random_blocks=5 seed=" +
                           std::to_string(seed),
                       keep, false);
    }
}

// softcap, then ALiBi (for a head count that is not a power of two), then the bias.
TEST(BuiltinExpressions, ModifiersAgreeWithTheirDefinitions) {
  const Spec spec = parseSpec("heads=6 d_k=4 softcap=7.5 alibi=true bias=true");
  const std::optional<expr::Node> modifiers = modifiersAsExpression(spec);
  ASSERT_TRUE(modifiers);
  const std::vector<double> slopes = positions::alibiSlopes(6);
  const expr::Environment environment = kernelInputs();
  for (int64_t h = 0; h < 6; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 9; ++j)
        for (double score : {-40.0, -1.5, 0.0, 3.25, 100.0}) {
          const int64_t qpos = i + 4, at[] = {1, h, i, j};
          const double expected = 7.5 * std::tanh(score / 7.5) -
                                  slopes[h] * static_cast<double>(std::abs(qpos - j)) +
                                  biasElement(at);
          const expr::Point p{1, h, h, i, j, qpos, 5, 9, score};
          EXPECT_DOUBLE_EQ(expr::evaluate(*modifiers, p, environment).number(), expected)
              << "h=" << h << " i=" << i << " j=" << j << " score=" << score;
        }
  EXPECT_FALSE(modifiersAsExpression(parseSpec("heads=6 d_k=4")));
}

// Thresholds below and above 2^31 (where the signed word's comparison changes form), and a
// seed whose high word sets the key's sign bit.
TEST(BuiltinExpressions, DropoutKeepsWhatRandomKeeps) {
  for (double p : {0.1, 0.5, 0.9})
    for (uint64_t seed : {uint64_t{3}, uint64_t{0xF00DFACE12345678}}) {
      const Spec spec =
          parseSpec("heads=2 d_k=4 dropout=" + std::to_string(p) + " seed=" + std::to_string(seed));
      const std::optional<expr::Node> factor = dropoutAsExpression(spec);
      ASSERT_TRUE(factor);
      const uint32_t threshold = random::dropoutThreshold(spec.dropout);
      int64_t kept = 0, total = 0;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < 7; ++i)
            for (int64_t j = 0; j < 23; ++j) {
              const bool keeps = random::dropoutKeeps(seed, threshold, b, h, i, j);
              const expr::Point at{b, h, h, i, j, i, 7, 23, 0};
              EXPECT_DOUBLE_EQ(expr::evaluate(*factor, at, {}).number(),
                               keeps ? static_cast<float>(1.0 / (1.0 - spec.dropout)) : 0.0)
                  << "p=" << p << " seed=" << seed << " at " << b << h << i << j;
              kept += keeps;
              ++total;
            }
      EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(total), 1 - p, 0.1) << p;
    }
  EXPECT_FALSE(dropoutAsExpression(parseSpec("heads=2 d_k=4")));
}

} // namespace
} // namespace attnc
