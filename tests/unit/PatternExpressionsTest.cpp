// The sparsity patterns written in the expression language (Spec/PatternExpressions) keep the
// same scores as their definitions in Semantics/Masks.h and random::bigbirdRandomBlock, under
// both alignments and with Tq != Tk.
#include "Expr/ExprEval.h"
#include "Semantics/Masks.h"
#include "Semantics/Random.h"
#include "Spec/PatternExpressions.h"

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

// The layout a block_sparse test reads: head-dependent, [H, ceil(Tq/4), ceil(Tk/4)] at most.
int64_t layoutElement(std::span<const int64_t> at) {
  return (at[0] + 2 * at[1] + at[2]) % 3 == 0;
}

// Under both alignments for a pattern of positions; block patterns read raw rows (qpos unused).
void expectSameScores(const std::string& text, const Predicate& keep, bool positional = true) {
  for (int64_t tq : {1, 13, 40})
    for (int64_t tk : {1, 19, 40}) {
      for (const char* align : {"bottom_right", "top_left"}) {
        if (!positional && std::string(align) == "top_left")
          continue;
        const std::string alignment = positional ? " causal_align=" + std::string(align) : "";
        const Spec spec = parseSpec("heads=2 d_k=4 " + text + alignment);
        const std::optional<expr::Node> mask = patternsAsExpression(spec, kExpressiblePatterns);
        ASSERT_TRUE(mask) << text;
        expr::Environment environment;
        environment.aux = [](const std::string&, std::span<const int64_t> at) {
          return expr::Value{expr::Type::Int, layoutElement(at), 0};
        };
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

TEST(PatternExpressions, AgreeWithTheMaskDefinitions) {
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
TEST(PatternExpressions, BigBirdDrawsTheSameRandomBlocks) {
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

} // namespace
} // namespace attnc
