// Bounds of expressions over boxes: tiles of common masks are classified as expected, and the
// bounds hold at every sampled point (the f64 evaluation lies inside them).
#include "Expr/ExprBounds.h"
#include "Expr/ExprEval.h"
#include "Expr/ExprParse.h"

#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <string>

namespace attnc::expr {
namespace {

const Scope kScope{{{"w", Type::Int}, {"cap", Type::Float}}, {{"doc", Type::Int, 2}}, {}};

Node mask(const std::string& text) { return parseExpr("mask_mod", text, Role::Mask, kScope); }

// A query tile [q0, q1] and key block [k0, k1], qpos = q_idx, any lengths.
Box tile(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  Box box;
  box.variables = {{"q_idx", Bounds::ofInt(q0, q1)},
                   {"qpos", Bounds::ofInt(q0, q1)},
                   {"kv_idx", Bounds::ofInt(k0, k1)},
                   {"b", Bounds::ofInt(0, 3)},
                   {"h", Bounds::ofInt(0, 7)}};
  box.params = {{"w", Bounds::ofInt(16, 16)}, {"cap", Bounds::ofFloat(30, 30)}};
  return box;
}

enum class TileClass { AllKept, AllMasked, Partial };

// A mask over a box: all kept (true at every point), all masked (false at every point), or
// partial.
TileClass classifyMask(const Node& mask, const Box& box) {
  const Bounds b = bounds(mask, box);
  return !b.canBeFalse ? TileClass::AllKept
         : !b.canBeTrue ? TileClass::AllMasked
                        : TileClass::Partial;
}

TEST(ExprBounds, ClassifiesTilesOfCommonMasks) {
  const Node causal = mask("kv_idx <= qpos");
  EXPECT_EQ(classifyMask(causal, tile(64, 127, 0, 63)), TileClass::AllKept);
  EXPECT_EQ(classifyMask(causal, tile(64, 127, 128, 191)), TileClass::AllMasked);
  EXPECT_EQ(classifyMask(causal, tile(64, 127, 64, 127)), TileClass::Partial);

  const Node window = mask("abs(q_idx - kv_idx) <= w");
  EXPECT_EQ(classifyMask(window, tile(100, 103, 96, 110)), TileClass::AllKept);
  EXPECT_EQ(classifyMask(window, tile(100, 103, 0, 50)), TileClass::AllMasked);
  EXPECT_EQ(classifyMask(window, tile(100, 163, 0, 127)), TileClass::Partial);

  const Node sliding = mask("kv_idx <= qpos && qpos - kv_idx < w");
  EXPECT_EQ(classifyMask(sliding, tile(64, 79, 0, 31)), TileClass::AllMasked);
  EXPECT_EQ(classifyMask(sliding, tile(64, 79, 80, 95)), TileClass::AllMasked);
  EXPECT_EQ(classifyMask(sliding, tile(64, 79, 64, 79)), TileClass::Partial);

  const Node strided = mask("(qpos - kv_idx) % 4 == 0");
  EXPECT_EQ(classifyMask(strided, tile(9, 9, 5, 5)), TileClass::AllKept);
  EXPECT_EQ(classifyMask(strided, tile(9, 9, 6, 6)), TileClass::AllMasked);
  EXPECT_EQ(classifyMask(strided, tile(0, 63, 0, 63)), TileClass::Partial);

  // An aux tensor's values are unknown at compile time: the kernel summarises such blocks.
  EXPECT_EQ(classifyMask(mask("doc[b, q_idx] == doc[b, kv_idx]"), tile(0, 63, 0, 63)),
            TileClass::Partial);
  EXPECT_EQ(classifyMask(mask("true || doc[b, q_idx] == 0"), tile(0, 63, 0, 63)),
            TileClass::AllKept);
}

TEST(ExprBounds, ScoresThatMayBeNaNCompareEitherWay) {
  const Node m = parseExpr("mask_mod", "sqrt(q_idx - kv_idx) < 100", Role::Mask, kScope);
  EXPECT_EQ(classifyMask(m, tile(0, 3, 0, 3)), TileClass::Partial); // sqrt(-3) is NaN
  EXPECT_EQ(classifyMask(m, tile(10, 13, 0, 3)), TileClass::AllKept);
}

// Kernels compute ints in 32 bits and wrap them, the reference in 64: an int +, -, *, negation,
// abs or // that may leave 32 bits has no bounds, and floor saturates at either width.
TEST(ExprBounds, IntsThatMayLeave32BitsAreUnbounded) {
  auto over = [](const std::string& text, int64_t k0, int64_t k1, double s0 = 0, double s1 = 0) {
    Box box = tile(0, 0, k0, k1);
    box.variables["score"] = Bounds::ofFloat(s0, s1);
    return bounds(parseExpr("score_mod", text, Role::Score, kScope), box);
  };
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t max = std::numeric_limits<int32_t>::max();
  const int64_t min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(over("kv_idx + 1", 0, 100).hi, 101);
  for (const char* text :
       {"kv_idx + 1", "kv_idx * 2", "-kv_idx - 2", "kv_idx - 2147483647 - 2"}) {
    const Bounds b = over(text, 0, max);
    EXPECT_TRUE(b.lo == -inf && b.hi == inf) << text << ": [" << b.lo << ", " << b.hi << "]";
  }
  for (const char* text : {"-kv_idx", "abs(kv_idx)", "kv_idx // -1"}) {
    const Bounds b = over(text, min, 0);
    EXPECT_TRUE(b.lo == -inf && b.hi == inf) << text << ": [" << b.lo << ", " << b.hi << "]";
  }
  // min, max and clamp pick an operand's value, whatever it is.
  EXPECT_EQ(over("min(kv_idx + 1, 7)", 0, max).hi, 7);
  // floor(3e9) is 2^31 - 1 in a kernel and 3e9 in the reference.
  const Bounds floored = over("floor(score)", 0, 0, 3e9, 4e9);
  EXPECT_LE(floored.lo, max);
  EXPECT_EQ(floored.hi, inf);
}

// Kernels compute floats in f32: past its largest value a result may be inf, and below its
// smallest normal 0.
TEST(ExprBounds, FloatsAllowForF32sRange) {
  Box box = tile(0, 0, 0, 0);
  auto over = [&](const std::string& text) {
    return bounds(parseExpr("score_mod", text, Role::Score, kScope), box);
  };
  EXPECT_EQ(over("2e38 * 2.0").hi, std::numeric_limits<double>::infinity());
  EXPECT_EQ(over("1e-30 * 1e-30").lo, 0.0);
  EXPECT_EQ(over("-1e-30 * 1e-30").hi, 0.0);
  EXPECT_TRUE(bounds(mask("1e-30 * 1e-30 > 0.0"), box).canBeFalse);
  EXPECT_TRUE(bounds(mask("2e38 * 2.0 < 3e38"), box).canBeFalse);
}

// At random points of random boxes, every expression's value lies within its bounds.
TEST(ExprBounds, HoldAtSampledPoints) {
  const char* expressions[] = {
      "q_idx - kv_idx",
      "(q_idx - kv_idx) % 5",
      "(kv_idx - q_idx) % -3",
      "q_idx * kv_idx - h * 7",
      "abs(q_idx - 2 * kv_idx)",
      "clamp(q_idx - kv_idx, -w, w)",
      "min(q_idx, kv_idx) + max(b, h)",
      "floor((q_idx - kv_idx) / 3)",
      "cap * tanh((q_idx - kv_idx) / cap)",
      "exp(-(q_idx - kv_idx) / 16.0) + sigmoid(kv_idx - 8)",
      "where(kv_idx <= qpos, q_idx / (kv_idx + 1), -1.5)",
      "log(q_idx + 1) - sqrt(kv_idx)",
  };
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> start(-40, 200), size(0, 70);
  for (const char* text : expressions) {
    const Node n = parseExpr("score_mod", text, Role::Score, kScope);
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t q0 = start(rng), k0 = start(rng);
      const Box box = tile(q0, q0 + size(rng), k0, k0 + size(rng));
      const Bounds r = bounds(n, box);
      for (int sample = 0; sample < 20; ++sample) {
        Point p;
        p.qIdx = p.qpos = std::uniform_int_distribution<int64_t>(
            static_cast<int64_t>(box.variables.at("q_idx").lo),
            static_cast<int64_t>(box.variables.at("q_idx").hi))(rng);
        p.kvIdx = std::uniform_int_distribution<int64_t>(
            static_cast<int64_t>(box.variables.at("kv_idx").lo),
            static_cast<int64_t>(box.variables.at("kv_idx").hi))(rng);
        p.b = std::uniform_int_distribution<int64_t>(0, 3)(rng);
        p.h = std::uniform_int_distribution<int64_t>(0, 7)(rng);
        Environment env;
        env.params = {{"w", Value{Type::Int, 16, 0}}, {"cap", Value{Type::Float, 0, 30}}};
        const Value v = evaluate(n, p, env);
        const double x = v.number();
        if (std::isnan(x)) {
          EXPECT_TRUE(r.maybeNaN) << text;
          continue;
        }
        EXPECT_LE(r.lo, x) << text << " at q=" << p.qIdx << " k=" << p.kvIdx;
        EXPECT_GE(r.hi, x) << text << " at q=" << p.qIdx << " k=" << p.kvIdx;
      }
    }
  }
}

} // namespace
} // namespace attnc::expr
