#include "Expr/ExprIndexCheck.h"

#include "Expr/ExprBounds.h"
#include "Expr/ExprPrint.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace attnc::expr {
namespace {

// At most this many bounds are kept per side: min and max of nested clamps would otherwise
// multiply them.
constexpr size_t kMaxBounds = 6;

Affine operator+(Affine a, const Affine& b) {
  return {a.constant + b.constant, a.batch + b.batch, a.seqQ + b.seqQ, a.seqK + b.seqK};
}
Affine scaled(const Affine& a, double k) {
  return {a.constant * k, a.batch * k, a.seqQ * k, a.seqK * k};
}
Affine operator-(const Affine& a, const Affine& b) {
  return a + scaled(b, -1);
}
Affine constant(double c) {
  return {c, 0, 0, 0};
}
bool isConstant(const Affine& a) {
  return a.batch == 0 && a.seqQ == 0 && a.seqK == 0;
}

// a >= 0 for every B, Tq, Tk >= 1: no coefficient negative, and a >= 0 at the smallest sizes.
bool nonNegative(const Affine& a) {
  return a.batch >= 0 && a.seqQ >= 0 && a.seqK >= 0 &&
         a.constant + a.batch + a.seqQ + a.seqK >= 0;
}

// Sound lower and upper bounds of a node's value; an empty side is unbounded.
struct Range {
  std::vector<Affine> lower, upper;
};

void keep(std::vector<Affine>& bounds, const Affine& a) {
  if (bounds.size() < kMaxBounds && std::isfinite(a.constant) &&
      std::find(bounds.begin(), bounds.end(), a) == bounds.end())
    bounds.push_back(a);
}

Range exactly(const Affine& a) {
  return {{a}, {a}};
}

Range negated(const Range& r) {
  Range n;
  for (const Affine& u : r.upper)
    keep(n.lower, scaled(u, -1));
  for (const Affine& l : r.lower)
    keep(n.upper, scaled(l, -1));
  return n;
}

Range sum(const Range& a, const Range& b) {
  Range r;
  for (const Affine& x : a.lower)
    for (const Affine& y : b.lower)
      keep(r.lower, x + y);
  for (const Affine& x : a.upper)
    for (const Affine& y : b.upper)
      keep(r.upper, x + y);
  return r;
}

// A bound on both sides' extreme: for max's upper bound, of an upper bound of each side the
// one that is provably the larger; for min's lower bound, the provably smaller.
std::vector<Affine> dominating(const std::vector<Affine>& a, const std::vector<Affine>& b,
                               bool larger) {
  std::vector<Affine> result;
  for (const Affine& x : a)
    for (const Affine& y : b) {
      const Affine xMinusY = x - y;
      if (nonNegative(larger ? xMinusY : scaled(xMinusY, -1)))
        keep(result, x);
      else if (nonNegative(larger ? scaled(xMinusY, -1) : xMinusY))
        keep(result, y);
    }
  return result;
}

std::vector<Affine> either(std::vector<Affine> a, const std::vector<Affine>& b) {
  for (const Affine& y : b)
    keep(a, y);
  return a;
}

Range minimum(const Range& a, const Range& b) {
  return {dominating(a.lower, b.lower, false), either(a.upper, b.upper)};
}

Range maximum(const Range& a, const Range& b) {
  return {either(a.lower, b.lower), dominating(a.upper, b.upper, true)};
}

class IndexChecker {
public:
  IndexChecker(std::string_view key, std::string_view text, const IndexFacts& facts)
      : key_(key), text_(text), facts_(facts) {
    box_.variables["h"] = Bounds::ofInt(0, facts.heads - 1);
    box_.variables["g"] = Bounds::ofInt(0, facts.kvHeads - 1);
    for (const auto& [name, value] : facts.params)
      box_.params[name] = value.type == Type::Float ? Bounds::ofFloat(value.f, value.f)
                                                    : Bounds::ofInt(value.i, value.i);
  }

  // Checks every aux read under `node`, then returns the node's range.
  Range range(const Node& n) {
    Range r = n.op == Op::Aux ? checkRead(n) : symbolic(n);
    // Whatever the symbolic rules miss, constant bounds from interval arithmetic may still give
    // (floor(sigmoid(x) * 8) is within [0, 8]).
    if (n.type != Type::Bool) {
      const Bounds b = bounds(n, box_);
      if (!b.maybeNaN && std::isfinite(b.lo))
        keep(r.lower, constant(b.lo));
      if (!b.maybeNaN && std::isfinite(b.hi))
        keep(r.upper, constant(b.hi));
    }
    return r;
  }

private:
  Range symbolic(const Node& n) {
    auto arg = [&](size_t i) { return range(n.args[i]); };
    switch (n.op) {
    case Op::IntLiteral:
      return exactly(constant(static_cast<double>(n.intValue)));
    case Op::FloatLiteral:
      return exactly(constant(n.floatValue));
    case Op::Param: {
      const Value& v = facts_.params.at(n.name);
      return exactly(constant(v.number()));
    }
    case Op::Variable:
      return variable(n.name);
    case Op::Neg:
      return negated(arg(0));
    case Op::Add:
      return sum(arg(0), arg(1));
    case Op::Sub:
      return sum(arg(0), negated(arg(1)));
    case Op::Mul:
    case Op::Div: {
      const Range a = arg(0), b = arg(1);
      const auto k = constantOf(b);
      if (!k || (n.op == Op::Div && *k == 0))
        return n.op == Op::Mul && constantOf(a) ? scaledRange(b, *constantOf(a)) : Range{};
      return scaledRange(a, n.op == Op::Mul ? *k : 1 / *k);
    }
    case Op::Min:
      return minimum(arg(0), arg(1));
    case Op::Max:
      return maximum(arg(0), arg(1));
    case Op::Clamp:
      return minimum(maximum(arg(0), arg(1)), arg(2));
    case Op::Where: {
      (void)arg(0);
      const Range a = arg(1), b = arg(2);
      return {dominating(a.lower, b.lower, false), dominating(a.upper, b.upper, true)};
    }
    case Op::Abs: {
      const Range a = arg(0);
      Range r;
      keep(r.lower, constant(0));
      r.upper = dominating(a.upper, negated(a).upper, true);
      return r;
    }
    case Op::Floor: {
      // x - 1 < floor(x) <= x; and floor(x) >= 0 whenever x >= 0.
      const Range a = arg(0);
      Range r;
      for (const Affine& l : a.lower) {
        if (nonNegative(l))
          keep(r.lower, constant(isConstant(l) ? std::floor(l.constant) : 0));
        keep(r.lower, isConstant(l) ? constant(std::floor(l.constant)) : l - constant(1));
      }
      r.upper = a.upper;
      return r;
    }
    case Op::Mod: {
      (void)arg(0);
      const auto m = constantOf(arg(1));
      if (!m || *m == 0)
        return {};
      return *m > 0 ? Range{{constant(0)}, {constant(*m - 1)}}
                    : Range{{constant(*m + 1)}, {constant(0)}};
    }
    case Op::FloorDiv: {
      // By a constant m != 0: x / m - 1 < x // m <= x / m, the bounds of x / m swapping sides
      // for m < 0; and x // m >= 0 whenever x and m are >= 0.
      const Range a = arg(0);
      const auto m = constantOf(arg(1));
      if (!m || *m == 0)
        return {};
      const Range divided = *m > 0 ? a : negated(a);
      const double k = 1 / std::fabs(*m);
      Range r;
      for (const Affine& l : divided.lower)
        keep(r.lower, *m > 0 && nonNegative(l) ? constant(0) : scaled(l, k) - constant(1));
      for (const Affine& u : divided.upper)
        keep(r.upper, scaled(u, k));
      return r;
    }
    default:
      for (size_t i = 0; i < n.args.size(); ++i)
        (void)arg(i);
      return {}; // aux values, transcendental functions, bools: the constant bounds decide
    }
  }

  Range variable(const std::string& name) const {
    const Affine zero = constant(0);
    if (name == "b")
      return {{zero}, {Affine{-1, 1, 0, 0}}};
    if (name == "h")
      return {{zero}, {constant(static_cast<double>(facts_.heads - 1))}};
    if (name == "g")
      return {{zero}, {constant(static_cast<double>(facts_.kvHeads - 1))}};
    if (name == "q_idx")
      return {{zero}, {Affine{-1, 0, 1, 0}}};
    if (name == "kv_idx")
      return {{zero}, {Affine{-1, 0, 0, 1}}};
    if (name == "qpos")
      return facts_.bottomRight ? Range{{Affine{0, 0, -1, 1}}, {Affine{-1, 0, 0, 1}}}
                                : Range{{zero}, {Affine{-1, 0, 1, 0}}};
    if (name == "Tq")
      return exactly(Affine{0, 0, 1, 0});
    if (name == "Tk")
      return exactly(Affine{0, 0, 0, 1});
    return {}; // score
  }

  static std::optional<double> constantOf(const Range& r) {
    for (const Affine& l : r.lower)
      for (const Affine& u : r.upper)
        if (isConstant(l) && isConstant(u) && l.constant == u.constant)
          return l.constant;
    return std::nullopt;
  }

  static Range scaledRange(const Range& r, double k) {
    Range s;
    const Range& source = k >= 0 ? r : negated(r);
    for (const Affine& l : source.lower)
      keep(s.lower, scaled(l, std::fabs(k)));
    for (const Affine& u : source.upper)
      keep(s.upper, scaled(u, std::fabs(k)));
    return s;
  }

  // An aux read's value is unknown; its indices must be in bounds.
  Range checkRead(const Node& read) {
    const std::vector<Affine>& shape = facts_.auxShapes.at(read.name);
    for (size_t d = 0; d < read.args.size(); ++d) {
      const Node& index = read.args[d];
      const Range r = range(index);
      const Affine last = shape[d] - constant(1);
      bool low = false, high = false;
      for (const Affine& l : r.lower)
        low = low || nonNegative(l);
      for (const Affine& u : r.upper)
        high = high || nonNegative(last - u);
      if (low && high)
        continue;
      const std::string dim = dimText(shape[d]);
      throw ExprError(std::string(key_) + "=\"" + std::string(text_) + "\": column " +
                      std::to_string(index.column) + ": index " + std::to_string(d + 1) + " of " +
                      read.name + " (" + print(index) + ") is not provably " +
                      (low ? "below " + dim : high ? "at least 0" : "within [0, " + dim + ")") +
                      " for every B, Tq and Tk; write clamp(" + print(index) + ", 0, " + dim +
                      " - 1)");
    }
    return {};
  }

  static std::string dimText(const Affine& a) {
    if (a.batch == 1)
      return "B";
    if (a.seqQ == 1)
      return "Tq";
    if (a.seqK == 1)
      return "Tk";
    return std::to_string(static_cast<int64_t>(a.constant));
  }

  std::string_view key_, text_;
  const IndexFacts& facts_;
  Box box_;
};

} // namespace

void checkAuxIndices(std::string_view key, std::string_view text, const Node& root,
                     const IndexFacts& facts) {
  IndexChecker(key, text, facts).range(root);
}

} // namespace attnc::expr
