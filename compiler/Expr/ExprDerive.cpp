#include "Expr/ExprDerive.h"

#include <functional>
#include <optional>

namespace attnc::expr {
namespace {

// A derivative, or nullopt where it is identically 0 (which keeps the trees small: most nodes
// of a score modifier do not depend on the score).
using Partial = std::optional<Node>;

Node floatLiteral(double value) {
  Node n{Op::FloatLiteral, Type::Float};
  n.floatValue = value;
  return n;
}

Node node(Op op, Type type, std::vector<Node> args) {
  Node n{op, type};
  n.args = std::move(args);
  return n;
}

Node floatNode(Op op, std::vector<Node> args) {
  return node(op, Type::Float, std::move(args));
}
Node condition(Op op, const Node& a, const Node& b) {
  return node(op, Type::Bool, {a, b});
}

Partial sum(Partial a, Partial b) {
  if (!a || !b)
    return a ? a : b;
  return floatNode(Op::Add, {*a, *b});
}

Partial difference(Partial a, Partial b) {
  if (!b)
    return a;
  if (!a)
    return floatNode(Op::Neg, {*b});
  return floatNode(Op::Sub, {*a, *b});
}

Partial product(const Node& factor, Partial d) {
  return d ? Partial(floatNode(Op::Mul, {factor, *d})) : std::nullopt;
}

Partial quotient(Partial d, const Node& divisor) {
  return d ? Partial(floatNode(Op::Div, {*d, divisor})) : std::nullopt;
}

// where(c, a, b) of two partials.
Partial select(const Node& c, Partial a, Partial b) {
  if (!a && !b)
    return std::nullopt;
  return floatNode(Op::Where, {c, a ? *a : floatLiteral(0), b ? *b : floatLiteral(0)});
}

Node orZero(const Partial& d) {
  return d ? *d : floatLiteral(0);
}

class Deriver {
public:
  explicit Deriver(std::function<bool(const Node&)> isTarget) : isTarget_(std::move(isTarget)) {}

  Partial of(const Node& n) const {
    if (n.type != Type::Float)
      return std::nullopt; // ints and bools: floor, %, //, comparisons, bit, philox
    if (isTarget_(n))
      return floatLiteral(1);
    const std::vector<Node>& a = n.args;
    switch (n.op) {
    case Op::Neg: {
      Partial d = of(a[0]);
      return d ? Partial(floatNode(Op::Neg, {*d})) : std::nullopt;
    }
    case Op::Add: return sum(of(a[0]), of(a[1]));
    case Op::Sub: return difference(of(a[0]), of(a[1]));
    case Op::Mul: return sum(product(a[1], of(a[0])), product(a[0], of(a[1])));
    case Op::Div: // (x / y)' = x' / y - (x / y) y' / y
      return difference(quotient(of(a[0]), a[1]), quotient(product(n, of(a[1])), a[1]));
    case Op::Where: return select(a[0], of(a[1]), of(a[2]));
    case Op::Min:
    case Op::Max: return extremum(n.op, a[0], a[1]);
    case Op::Abs: return absolute(a[0]);
    case Op::Clamp: return clamped(a[0], a[1], a[2]);
    case Op::Exp: return product(n, of(a[0]));
    case Op::Log: return quotient(of(a[0]), a[0]);
    case Op::Sqrt: return quotient(of(a[0]), floatNode(Op::Mul, {floatLiteral(2), n}));
    case Op::Tanh: // 1 - tanh^2
      return product(floatNode(Op::Sub, {floatLiteral(1), floatNode(Op::Mul, {n, n})}), of(a[0]));
    case Op::Sigmoid: // s (1 - s)
      return product(floatNode(Op::Mul, {n, floatNode(Op::Sub, {floatLiteral(1), n})}), of(a[0]));
    default: return std::nullopt; // literals, params, variables, aux reads not differentiated
    }
  }

private:
  // min(x, y): x' where x < y, y' where y < x, (x' + y') / 2 where they are equal; max alike.
  Partial extremum(Op op, const Node& x, const Node& y) const {
    Partial dx = of(x), dy = of(y);
    if (!dx && !dy)
      return std::nullopt;
    const Op xWins = op == Op::Min ? Op::Lt : Op::Gt;
    Partial tie = quotient(sum(dx, dy), floatLiteral(2));
    return select(condition(xWins, x, y), dx, select(condition(xWins, y, x), dy, tie));
  }

  // |x|' = sign(x) x', 0 at x = 0.
  Partial absolute(const Node& x) const {
    Partial dx = of(x);
    if (!dx)
      return std::nullopt;
    const Node zero = floatLiteral(0);
    return select(condition(Op::Gt, x, zero), dx,
                  select(condition(Op::Lt, x, zero), floatNode(Op::Neg, {*dx}), std::nullopt));
  }

  // clamp(x, lo, hi) = min(max(x, lo), hi): x' where lo <= x <= hi, lo' where x < lo < hi, hi'
  // where x > hi or hi < lo.
  Partial clamped(const Node& x, const Node& lo, const Node& hi) const {
    const Node inside =
        node(Op::And, Type::Bool, {condition(Op::Ge, x, lo), condition(Op::Le, x, hi)});
    const Node belowLo =
        node(Op::And, Type::Bool, {condition(Op::Lt, x, lo), condition(Op::Lt, lo, hi)});
    return select(inside, of(x), select(belowLo, of(lo), of(hi)));
  }

  std::function<bool(const Node&)> isTarget_;
};

void collectFloatReads(const Node& n, std::vector<const Node*>& reads) {
  if (n.op == Op::Aux && n.type == Type::Float)
    reads.push_back(&n);
  for (const Node& arg : n.args)
    collectFloatReads(arg, reads);
}

} // namespace

Node derivativeByScore(const Node& expr) {
  const Deriver deriver([](const Node& n) { return n.op == Op::Variable && n.name == "score"; });
  return orZero(deriver.of(expr));
}

std::vector<AuxPartial> derivativesByAux(const Node& expr) {
  std::vector<const Node*> reads;
  collectFloatReads(expr, reads);
  std::vector<AuxPartial> partials;
  for (const Node* read : reads) {
    const Deriver deriver([read](const Node& n) { return &n == read; });
    partials.push_back({*read, orZero(deriver.of(expr))});
  }
  return partials;
}

} // namespace attnc::expr
