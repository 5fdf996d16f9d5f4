// Derivatives of score modifiers (ExprDerive.h): against central finite differences of the
// expression itself where it is smooth, and PyTorch's conventions where it is not.
#include "Expr/ExprDerive.h"

#include "Expr/ExprEval.h"
#include "Expr/ExprParse.h"
#include "TestSupport.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace attnc::expr {
namespace {

const Scope kScope{
    {{"cap", Type::Float}, {"w", Type::Int}}, {{"doc", Type::Int, 2}, {"rel", Type::Float, 2}}, {}};

Node score(const std::string& text) {
  return parseExpr("score_mod", text, Role::Score, kScope);
}

// rel[h, d] = 0.3 h - 0.2 d + 0.1, with one element's value changed by `nudge`.
struct Tables {
  std::vector<int64_t> nudged{-1, -1};
  double nudge = 0;

  Environment environment() const {
    Environment env;
    env.params = {{"cap", Value{Type::Float, 0, 3.0}}, {"w", Value{Type::Int, 4, 0}}};
    env.aux = [this](const std::string& name, std::span<const int64_t> i) {
      if (name == "doc")
        return Value{Type::Int, i[1] / 3, 0};
      double x = 0.3 * static_cast<double>(i[0]) - 0.2 * static_cast<double>(i[1]) + 0.1;
      if (i[0] == nudged[0] && i[1] == nudged[1])
        x += nudge;
      return Value{Type::Float, 0, x};
    };
    return env;
  }
};

using test::scorePoint;

double valueAt(const Node& n, const Point& p, const Tables& tables = {}) {
  return evaluate(n, p, tables.environment()).number();
}

constexpr double kStep = 1e-6;

// (f(x + step) - f(x - step)) / (2 step) for f of the nudge.
double centralDifference(const std::function<double(double)>& f) {
  return (f(kStep) - f(-kStep)) / (2 * kStep);
}

TEST(ExprDerive, ByScoreMatchesFiniteDifferences) {
  // Smooth at the points below (no score at a kink of min, max, abs, clamp or where).
  const char* const modifiers[] = {
      "score",
      "cap * tanh(score / cap)",
      "score + rel[h, clamp(kv_idx - qpos, -4, 4) + 4]",
      "score * score / (1 + abs(score))",
      "where(kv_idx <= qpos, score * 2, score - 1)",
      "exp(score / 4) + log(score * score + 1) + sqrt(score * score + 2)",
      "sigmoid(score) * min(score, 0.5) + max(score, -0.25) * w",
      "clamp(score, -1.5, 1.5) - clamp(score * 2, rel[h, 0], rel[h, 3])",
      "-score * cap / (score - 7)",
      "score + floor(score) + q_idx",
  };
  for (const char* text : modifiers) {
    const Node f = score(text);
    const Node df = derivativeByScore(f);
    for (double s : {-2.3, -0.7, -0.1, 0.3, 0.9, 2.6})
      for (auto [q, k] : {std::pair<int64_t, int64_t>{5, 2}, {2, 9}}) {
        if (std::string(text).find("floor") != std::string::npos &&
            std::fabs(s - std::round(s)) < 0.2)
          continue; // floor's steps
        const double numeric =
            centralDifference([&](double dx) { return valueAt(f, scorePoint(q, k, s + dx)); });
        EXPECT_NEAR(valueAt(df, scorePoint(q, k, s)), numeric, 1e-6 * (1 + std::fabs(numeric)))
            << text << " at score " << s << ", q " << q << ", k " << k;
      }
  }
}

TEST(ExprDerive, KinksFollowPyTorch) {
  auto slope = [](const std::string& text, double s) {
    return valueAt(derivativeByScore(score(text)), scorePoint(3, 3, s));
  };
  EXPECT_EQ(slope("min(score, 2.0)", 2.0), 0.5); // torch.minimum: half to each at a tie
  EXPECT_EQ(slope("max(score, 2.0)", 2.0), 0.5);
  EXPECT_EQ(slope("min(score, score)", 1.0), 1.0);
  EXPECT_EQ(slope("abs(score)", 0.0), 0.0); // sign(0) = 0
  EXPECT_EQ(slope("abs(score)", -3.0), -1.0);
  EXPECT_EQ(slope("clamp(score, -1, 1)", 1.0), 1.0); // both ends included
  EXPECT_EQ(slope("clamp(score, -1, 1)", -1.0), 1.0);
  EXPECT_EQ(slope("clamp(score, -1, 1)", 1.5), 0.0);
  EXPECT_EQ(slope("clamp(score, 2, 1)", 1.5), 0.0);                     // lo > hi: the result is hi
  EXPECT_EQ(slope("where(score > 0, score * 2, score * 3)", 0.0), 3.0); // the branch taken
  EXPECT_EQ(slope("floor(score) * 2.0", 0.5), 0.0);
  EXPECT_TRUE(std::isinf(slope("sqrt(score)", 0.0)));
  EXPECT_TRUE(std::isinf(slope("log(score)", 0.0)));
}

TEST(ExprDerive, ScoreFreeExpressionsHaveDerivativeZero) {
  for (const char* text : {"rel[h, 1] * cap", "q_idx - kv_idx + w", "where(kv_idx < 3, 1.5, 2)"}) {
    const Node d = derivativeByScore(score(text));
    EXPECT_EQ(d.op, Op::FloatLiteral) << text;
    EXPECT_EQ(d.floatValue, 0.0) << text;
  }
}

TEST(ExprDerive, ByAuxReadsMatchFiniteDifferences) {
  // Each float read's partial against nudging the element it reads, the other reads fixed (the
  // two reads below are of different elements at these points).
  const char* const modifiers[] = {
      "score + 2 * rel[h, clamp(kv_idx - qpos, -4, 4) + 4]",
      "rel[h, 0] * rel[h, 1] * score",
      "cap * tanh((score + rel[h, kv_idx % 3]) / cap)",
      "max(score, rel[h, 2]) + doc[b, kv_idx]",
  };
  for (const char* text : modifiers) {
    const Node f = score(text);
    for (const AuxPartial& partial : derivativesByAux(f)) {
      EXPECT_EQ(partial.read.name, "rel") << text; // doc is int: not differentiated
      for (double s : {-0.8, 0.45, 1.7}) {
        const Point p = scorePoint(5, 3, s);
        std::vector<int64_t> index;
        for (const Node& i : partial.read.args)
          index.push_back(evaluate(i, p, Tables{}.environment()).i);
        const double numeric = centralDifference([&](double dx) {
          return valueAt(f, p, Tables{index, dx});
        });
        EXPECT_NEAR(valueAt(partial.derivative, p), numeric, 1e-6 * (1 + std::fabs(numeric)))
            << text << " at score " << s;
      }
    }
  }
  EXPECT_EQ(derivativesByAux(score("rel[h, 0] * rel[h, 1] * score")).size(), 2u);
  EXPECT_TRUE(derivativesByAux(score("score * doc[b, q_idx]")).empty());
}

} // namespace
} // namespace attnc::expr
