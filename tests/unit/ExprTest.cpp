// The expression language: parsing and types, the canonical text, evaluation, and the messages
// of bad expressions (each names the key, the text, the column and the problem).
#include "Expr/ExprEval.h"
#include "Expr/ExprParse.h"
#include "Expr/ExprPrint.h"
#include "TestSupport.h"

#include <cmath>
#include <gtest/gtest.h>
#include <string>

namespace attnc::expr {
namespace {

const Scope kScope{{{"cap", Type::Float}, {"w", Type::Int}},
                   {{"doc", Type::Int, 2}, {"rel", Type::Float, 2}},
                   {}};

Node mask(const std::string& text) { return parseExpr("mask_mod", text, Role::Mask, kScope); }
Node score(const std::string& text) { return parseExpr("score_mod", text, Role::Score, kScope); }

// doc[b, i] = i / 3 (three tokens per document); rel[h, d] = h + d / 10.
Environment environment() {
  Environment env;
  env.params = {{"cap", Value{Type::Float, 0, 30.0}}, {"w", Value{Type::Int, 4, 0}}};
  env.aux = [](const std::string& name, std::span<const int64_t> i) {
    return name == "doc" ? Value{Type::Int, i[1] / 3, 0}
                         : Value{Type::Float, 0, static_cast<double>(i[0]) + i[1] / 10.0};
  };
  return env;
}

Value at(const Node& n, int64_t q, int64_t k, double s = 0) {
  return evaluate(n, test::scorePoint(q, k, s), environment());
}

TEST(Expr, CanonicalTextIsStableAndReparses) {
  for (auto [text, canonical] : {std::pair{"kv_idx<=qpos", "kv_idx <= qpos"},
                                  {"((q_idx - kv_idx)) % 4 == 0", "(q_idx - kv_idx) % 4 == 0"},
                                  {"q_idx//64==(kv_idx // 64)", "q_idx // 64 == kv_idx // 64"}}) {
    EXPECT_EQ(print(mask(text)), canonical);
    EXPECT_EQ(print(mask(print(mask(text)))), canonical);
  }
  EXPECT_EQ(print(score("cap * tanh(score / cap)")), "cap * tanh(score / cap)");
  EXPECT_EQ(print(score("score - (1 - 2)")), "score - (1 - 2)");
  EXPECT_EQ(print(score("(score - 1) - 2")), "score - 1 - 2");
  EXPECT_EQ(print(score("score + 1.50")), "score + 1.5");
  EXPECT_EQ(print(score("score + 2e0")), "score + 2.0");
  EXPECT_EQ(print(mask("!(q_idx < kv_idx) && (true || false)")),
            "!(q_idx < kv_idx) && (true || false)");
  EXPECT_EQ(print(mask("doc[b,q_idx]==doc[ b , kv_idx ]")), "doc[b, q_idx] == doc[b, kv_idx]");
  EXPECT_EQ(print(score("where(kv_idx>qpos, -1e30, score)")),
            "where(kv_idx > qpos, -1e+30, score)");
}

TEST(Expr, Types) {
  EXPECT_EQ(score("q_idx - kv_idx").type, Type::Int);
  EXPECT_EQ(score("(q_idx - kv_idx) / 2").type, Type::Float);
  EXPECT_EQ(score("w * 2").type, Type::Int);
  EXPECT_EQ(score("cap * 2").type, Type::Float);
  EXPECT_EQ(score("floor(score)").type, Type::Int);
  EXPECT_EQ(score("min(q_idx, 2.5)").type, Type::Float);
  EXPECT_EQ(score("rel[h, clamp(q_idx - kv_idx + 128, 0, 256)]").type, Type::Float);
  EXPECT_EQ(mask("where(q_idx > 3, true, kv_idx == 0)").type, Type::Bool);
}

TEST(Expr, Evaluation) {
  const Node causal = mask("kv_idx <= qpos");
  EXPECT_TRUE(at(causal, 5, 5).truth());
  EXPECT_FALSE(at(causal, 5, 6).truth());
  // Floor modulo: the divisor's sign, for negative differences too; x % 0 is 0.
  EXPECT_EQ(at(score("(q_idx - kv_idx) % 4"), 1, 6).i, 3);
  EXPECT_EQ(at(score("(q_idx - kv_idx) % -4"), 6, 1).i, -3);
  EXPECT_EQ(at(score("q_idx % 0"), 6, 1).i, 0);
  // Floor division, the quotient of that modulo; x // 0 is 0.
  EXPECT_EQ(at(score("(q_idx - kv_idx) // 4"), 1, 6).i, -2);
  EXPECT_EQ(at(score("(q_idx - kv_idx) // -4"), 6, 1).i, -2);
  EXPECT_EQ(at(score("(q_idx - kv_idx) // 4"), 9, 1).i, 2);
  EXPECT_EQ(at(score("q_idx // 0"), 6, 1).i, 0);
  // -2^63 // -1 wraps to -2^63 (-2^63 from 32-bit literals: -2^31 * 2^31 * 2).
  EXPECT_EQ(at(score("(-2147483647 - 1) * (2147483647 + 1) * 2 // -1"), 0, 0).i, INT64_MIN);
  EXPECT_DOUBLE_EQ(at(score("q_idx / 4"), 6, 1).f, 1.5);
  EXPECT_DOUBLE_EQ(at(score("cap * tanh(score / cap)"), 0, 0, 60).f, 30 * std::tanh(2.0));
  EXPECT_TRUE(at(mask("doc[b, q_idx] == doc[b, kv_idx]"), 4, 5).truth());
  EXPECT_FALSE(at(mask("doc[b, q_idx] == doc[b, kv_idx]"), 2, 3).truth());
  EXPECT_DOUBLE_EQ(at(score("score + rel[h, 3]"), 0, 0, 1).f, 2.3);
  EXPECT_EQ(at(score("floor(-0.5)"), 0, 0).i, -1);
  EXPECT_EQ(at(score("abs(q_idx - kv_idx)"), 2, 9).i, 7);
  EXPECT_EQ(at(score("clamp(q_idx - kv_idx, -2, 2)"), 2, 9).i, -2);
  EXPECT_DOUBLE_EQ(at(score("sigmoid(0)"), 0, 0).f, 0.5);
  EXPECT_DOUBLE_EQ(at(score("where(kv_idx > qpos, 0, score)"), 1, 2, 7).f, 0.0);
  // Int arithmetic wraps instead of overflowing: 2^31 * 2^31 * 2 = 2^63 is -2^63.
  EXPECT_EQ(at(score("(2147483647 + 1) * (2147483647 + 1) * 2"), 0, 0).i, INT64_MIN);
}

// Floats are computed in f64 within f32's range, from f32 constants, as kernels compute them.
TEST(Expr, FloatsHaveTheKernelsConstantsAndRange) {
  EXPECT_EQ(at(score("0.7"), 0, 0).f, static_cast<double>(0.7f));
  EXPECT_EQ(print(score("score + 0.7")), "score + 0.7");
  EXPECT_EQ(print(score("score + 0.70000001")), "score + 0.7"); // the same f32
  EXPECT_EQ(at(score("2e38 * 2.0"), 0, 0).f, INFINITY);
  EXPECT_EQ(at(score("-2e38 - 2e38"), 0, 0).f, -INFINITY);
  EXPECT_TRUE(std::isnan(at(score("exp(100.0) * 0.0"), 0, 0).f));
  EXPECT_EQ(at(score("1e-30 * 1e-30 * 1e30"), 0, 0).f, 0.0);
  EXPECT_EQ(at(score("1.0 / (1e-30 * 1e-30)"), 0, 0).f, INFINITY);
  EXPECT_EQ(at(score("exp(-100.0)"), 0, 0).f, std::exp(-100.0)); // an f32 subnormal stays
}

// Each bad expression's message names the key and text, the column and the problem.
TEST(Expr, BadExpressionsSayWhatIsWrongAndWhere) {
  struct Case {
    Role role;
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {Role::Mask, "", "column 1: expected a value, found the end"},
      {Role::Mask, "kv_idx <=", "column 10: expected a value, found the end"},
      {Role::Mask, "kv_idx = qpos", "column 8: expected an operator or the end, found '='"},
      {Role::Mask, "kv_idx <= qpos)", "column 15: expected an operator or the end, found ')'"},
      {Role::Mask, "(kv_idx <= qpos", "column 16: expected ')' to close the '(' at column 1"},
      {Role::Mask, "kv_idx <= qpos @", "found '@'"},
      {Role::Mask, "kv_idx <= #", "column 11: expected a value, found '#'"},
      {Role::Mask, "kv <= qpos", "column 1: unknown name 'kv'; the names are b, h, g, q_idx"},
      {Role::Mask, "kv_idx <= foo(1)", "column 11: unknown function 'foo'; the functions are"},
      {Role::Mask, "kv_idx <= qpos + 1.2.3", "'1.2.3' is not a number"},
      {Role::Mask, "kv_idx <= 99999999999999999999", "column 11: '99999999999999999999' does "
                                                        "not fit 32 bits"},
      {Role::Mask, "kv_idx <= 2147483648",
       "'2147483648' does not fit 32 bits (kernels compute ints in 32 bits; an int literal is at "
       "most 2147483647)"},
      {Role::Mask, "kv_idx <= 12ab", "'12ab' is not a number"},
      {Role::Mask, "kv_idx", "a mask_mod is a bool (true keeps the score); this is int"},
      {Role::Mask, "score > 0", "column 1: a mask_mod cannot read score"},
      {Role::Score, "kv_idx <= qpos", "a score_mod is a number; this is a bool"},
      {Role::Score, "score + (q_idx < 2)", "column 10: '+' takes numbers, not bool"},
      {Role::Score, "score % 2", "column 1: '%' takes ints, not float"},
      {Role::Score, "q_idx // 2.0", "column 10: '//' takes ints, not float"},
      {Role::Mask, "q_idx && kv_idx", "column 1: '&&' joins bools, not int"},
      {Role::Mask, "q_idx == 1 || 2", "column 15: '||' joins bools, not int"},
      {Role::Mask, "!q_idx", "column 2: '!' negates a bool, not int"},
      {Role::Score, "-(q_idx < 1)", "'-' negates a number, not bool"},
      {Role::Mask, "(q_idx < 1) < true", "'<' compares numbers, not bool and bool"},
      {Role::Mask, "q_idx == true", "'==' compares two numbers or two bools, not int and bool"},
      {Role::Score, "where(q_idx, score, 0)", "where's condition is a bool, not int"},
      {Role::Score, "where(q_idx > 1, score, true)", "where's two values are both numbers or"},
      {Role::Score, "min(score)", "column 1: min takes 2 arguments, not 1"},
      {Role::Score, "exp(score, 1)", "exp takes 1 argument, not 2"},
      {Role::Score, "tanh(q_idx > 1)", "tanh takes numbers, not bool"},
      {Role::Mask, "doc[b] == 0", "column 1: doc has 2 dimensions, indexed with 1"},
      {Role::Mask, "doc[b, 1.5] == 0", "column 8: an index of doc is an int, not float"},
      {Role::Mask, "tree[b, q_idx] == 0",
       "'tree' is not an aux tensor of the spec; declared: doc, rel"},
      {Role::Mask, "doc == 0", "aux tensor 'doc' is read with indices: doc[...]"},
      {Role::Mask, "doc[b, q_idx == 0", "expected ']' to close doc["},
      {Role::Score, "score * capp", "unknown name 'capp'"},
  };
  for (const Case& c : cases) {
    const char* key = c.role == Role::Mask ? "mask_mod" : "score_mod";
    try {
      parseExpr(key, c.text, c.role, kScope);
      ADD_FAILURE() << c.text << ": accepted";
    } catch (const ExprError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string(key) + "=\"" + c.text + "\": "), std::string::npos)
          << message;
      EXPECT_NE(message.find(c.message), std::string::npos) << c.text << " -> " << message;
    }
  }
}

// Nesting is bounded, so no text exhausts the parser's stack (found by SpecTextFuzzer).
TEST(Expr, NestingDeeperThan64IsRefused) {
  const auto nested = [](int depth) {
    return std::string(depth, '(') + "kv_idx <= qpos" + std::string(depth, ')');
  };
  EXPECT_NO_THROW(parseExpr("mask_mod", nested(63), Role::Mask, Scope{}));
  for (const std::string& text : {nested(64), nested(5000), std::string(5000, '-') + "score"}) {
    try {
      parseExpr("score_mod", text, Role::Score, Scope{});
      ADD_FAILURE() << text.substr(0, 80) << ": accepted";
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("nested more than 64 deep"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Expr, NoAuxOrParamsDeclaredSaysHowToDeclareThem) {
  try {
    parseExpr("mask_mod", "doc[b, kv_idx] == 0", Role::Mask, Scope{});
    ADD_FAILURE() << "accepted";
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("it declares none: aux=\"name:i32[B,Tk]\""),
              std::string::npos)
        << e.what();
  }
  try {
    parseExpr("score_mod", "score * cap", Role::Score, Scope{});
    ADD_FAILURE() << "accepted";
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("named scalars come from params=\"name=value\""),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace attnc::expr
