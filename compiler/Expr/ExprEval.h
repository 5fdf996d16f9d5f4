// The f64 reference's evaluation of an expression at one point of the score matrix: the
// semantics every code generator's translation is checked against.
#ifndef ATTNC_COMPILER_EXPR_EXPREVAL_H
#define ATTNC_COMPILER_EXPR_EXPREVAL_H

#include "Expr/Expr.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

namespace attnc::expr {

struct Value {
  Type type;
  int64_t i = 0;  // Int, and Bool as 0 or 1
  double f = 0;   // Float
  double number() const { return type == Type::Float ? f : static_cast<double>(i); }
  bool truth() const { return i != 0; }
};

// What an expression reads at batch entry b, head h (kv head g), query q_idx and key kv_idx.
struct Point {
  int64_t b = 0, h = 0, g = 0, qIdx = 0, kvIdx = 0, qpos = 0, tq = 0, tk = 0;
  double score = 0;
};

// The spec's params by name, and the aux tensors' elements (the indices are checked in bounds
// by the caller's tensors).
struct Environment {
  std::map<std::string, Value> params;
  std::function<Value(const std::string& name, std::span<const int64_t> indices)> aux;
};

Value evaluate(const Node& node, const Point& point, const Environment& environment);

// The language's floor of a number as an int: saturating, and 0 for NaN, so that no conversion
// is undefined.
int64_t floorToInt(double x);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPREVAL_H
