#include "Expr/ExprBounds.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace attnc::expr {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kIntMin = std::numeric_limits<int32_t>::min();
constexpr double kIntMax = std::numeric_limits<int32_t>::max();
constexpr double kFloatMax = std::numeric_limits<float>::max();
constexpr double kFloatMin = std::numeric_limits<float>::min(); // the smallest normal
constexpr double kFloatSlack = 1.0 / (1 << 20);

// Int ends past 32 bits become infinite; float ends move outwards by kFloatSlack, to ±inf past
// f32's range (a kernel's f32 overflows there) and to 0 below its smallest normal (flushed).
Bounds normalized(Bounds r) {
  if (r.type == Type::Int) {
    if (r.lo < kIntMin)
      r.lo = -kInf;
    if (r.hi > kIntMax)
      r.hi = kInf;
  } else if (r.type == Type::Float) {
    r.lo -= std::fabs(r.lo) * kFloatSlack;
    r.hi += std::fabs(r.hi) * kFloatSlack;
    if (r.lo < -kFloatMax)
      r.lo = -kInf;
    else if (r.lo > 0 && r.lo < kFloatMin)
      r.lo = 0;
    if (r.hi > kFloatMax)
      r.hi = kInf;
    else if (r.hi < 0 && r.hi > -kFloatMin)
      r.hi = 0;
  }
  return r;
}

Bounds range(Type type, double lo, double hi, bool maybeNaN) {
  Bounds r{type, lo, hi};
  r.maybeNaN = type == Type::Float && (maybeNaN || std::isnan(lo) || std::isnan(hi));
  if (std::isnan(r.lo))
    r.lo = -kInf;
  if (std::isnan(r.hi))
    r.hi = kInf;
  return normalized(r);
}

// The result of an int operation that wraps in 32-bit kernels (+, -, *, negation, abs, //): one
// that may leave 32 bits may be any int there, and is unbounded.
Bounds wrapping(const Bounds& r) {
  if (r.type == Type::Int && !(std::isfinite(r.lo) && std::isfinite(r.hi)))
    return Bounds::unknown(Type::Int);
  return r;
}

// The hull of the values `f` takes at the corners: exact for + - * min max on intervals.
Bounds corners(Type type, const Bounds& a, const Bounds& b, double (*f)(double, double)) {
  double lo = kInf, hi = -kInf;
  bool nan = a.maybeNaN || b.maybeNaN;
  for (double x : {a.lo, a.hi})
    for (double y : {b.lo, b.hi}) {
      const double v = f(x, y);
      if (std::isnan(v)) {
        nan = true;
        lo = -kInf;
        hi = kInf;
      } else {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  return range(type, lo, hi, nan);
}

// A monotonically increasing function of one float.
Bounds increasing(const Bounds& a, double (*f)(double)) {
  return range(Type::Float, f(a.lo), f(a.hi), a.maybeNaN);
}

Bounds modulo(const Bounds& a, const Bounds& b) {
  if (b.lo == b.hi && std::isfinite(b.lo)) {
    const int64_t m = static_cast<int64_t>(b.lo);
    if (m == 0 || m == -1)
      return Bounds::ofInt(0, 0);
    // Within one period the result runs from x's remainder at lo to its remainder at hi.
    if (std::isfinite(a.lo) && std::isfinite(a.hi) && a.hi - a.lo < std::fabs(b.lo)) {
      const int64_t rlo = floorModulo(static_cast<int64_t>(a.lo), m);
      const int64_t rhi = floorModulo(static_cast<int64_t>(a.hi), m);
      if (rlo <= rhi)
        return Bounds::ofInt(rlo, rhi);
    }
    return m > 0 ? Bounds::ofInt(0, m - 1) : Bounds::ofInt(m + 1, 0);
  }
  const double limit = std::max(std::fabs(b.lo), std::fabs(b.hi));
  if (!std::isfinite(limit))
    return Bounds::unknown(Type::Int);
  return range(Type::Int, -(limit - 1), limit - 1, false);
}

Bounds quotient(const Bounds& a, const Bounds& b) {
  // floor(x / m) is monotone in each argument while m keeps one sign: the corners bound it.
  if (b.lo > 0 || b.hi < 0)
    return wrapping(
        corners(Type::Int, a, b, [](double x, double m) { return std::floor(x / m); }));
  // With m = 0 (x // 0 = 0) or either sign possible, |x // m| <= |x|.
  const double limit = std::max(std::fabs(a.lo), std::fabs(a.hi));
  return wrapping(range(Type::Int, -limit, limit, false));
}

Bounds hull(const Bounds& a, const Bounds& b, Type type) {
  Bounds r = range(type, std::min(a.lo, b.lo), std::max(a.hi, b.hi), a.maybeNaN || b.maybeNaN);
  r.canBeTrue = a.canBeTrue || b.canBeTrue;
  r.canBeFalse = a.canBeFalse || b.canBeFalse;
  return r;
}

Bounds compared(Op op, const Bounds& a, const Bounds& b) {
  if (a.type == Type::Bool) { // == and != of bools
    const bool aKnown = a.canBeTrue != a.canBeFalse, bKnown = b.canBeTrue != b.canBeFalse;
    if (!aKnown || !bKnown)
      return Bounds::unknown(Type::Bool);
    const bool equal = a.canBeTrue == b.canBeTrue;
    return Bounds::ofBool(equal == (op == Op::Eq), equal != (op == Op::Eq));
  }
  if (a.maybeNaN || b.maybeNaN)
    return Bounds::unknown(Type::Bool);
  bool always = false, never = false;
  switch (op) {
  case Op::Lt:
    always = a.hi < b.lo, never = a.lo >= b.hi;
    break;
  case Op::Le:
    always = a.hi <= b.lo, never = a.lo > b.hi;
    break;
  case Op::Gt:
    always = a.lo > b.hi, never = a.hi <= b.lo;
    break;
  case Op::Ge:
    always = a.lo >= b.hi, never = a.hi < b.lo;
    break;
  case Op::Eq:
    always = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo, never = a.hi < b.lo || b.hi < a.lo;
    break;
  default: // Ne
    always = a.hi < b.lo || b.hi < a.lo, never = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
    break;
  }
  return Bounds::ofBool(!never, !always);
}

double add(double x, double y) { return x + y; }
double subtract(double x, double y) { return x - y; }
double multiply(double x, double y) { return x * y; }
double divide(double x, double y) { return x / y; }
double minimum(double x, double y) { return std::min(x, y); }
double maximum(double x, double y) { return std::max(x, y); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

} // namespace

Bounds Bounds::ofInt(int64_t lo, int64_t hi) {
  return normalized({Type::Int, static_cast<double>(lo), static_cast<double>(hi)});
}
Bounds Bounds::ofFloat(double lo, double hi) { return range(Type::Float, lo, hi, false); }
Bounds Bounds::ofBool(bool canBeTrue, bool canBeFalse) {
  Bounds r{Type::Bool, 0, 1};
  r.canBeTrue = canBeTrue;
  r.canBeFalse = canBeFalse;
  return r;
}
Bounds Bounds::unknown(Type type) {
  Bounds r{type};
  r.maybeNaN = type == Type::Float;
  return r;
}

Bounds bounds(const Node& n, const Box& box) {
  auto arg = [&](size_t i) { return bounds(n.args[i], box); };
  switch (n.op) {
  case Op::IntLiteral:
    return Bounds::ofInt(n.intValue, n.intValue);
  case Op::FloatLiteral:
    return Bounds::ofFloat(n.floatValue, n.floatValue);
  case Op::BoolLiteral:
    return Bounds::ofBool(n.intValue != 0, n.intValue == 0);
  case Op::Variable:
  case Op::Param: {
    const auto& known = n.op == Op::Variable ? box.variables : box.params;
    const auto found = known.find(n.name);
    return found == known.end() ? Bounds::unknown(n.type) : found->second;
  }
  case Op::Aux:
    return Bounds::unknown(n.type);
  case Op::Neg: {
    const Bounds a = arg(0);
    return wrapping(range(a.type, -a.hi, -a.lo, a.maybeNaN));
  }
  case Op::Not: {
    const Bounds a = arg(0);
    return Bounds::ofBool(a.canBeFalse, a.canBeTrue);
  }
  case Op::And: {
    const Bounds a = arg(0), b = arg(1);
    return Bounds::ofBool(a.canBeTrue && b.canBeTrue, a.canBeFalse || b.canBeFalse);
  }
  case Op::Or: {
    const Bounds a = arg(0), b = arg(1);
    return Bounds::ofBool(a.canBeTrue || b.canBeTrue, a.canBeFalse && b.canBeFalse);
  }
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::Eq:
  case Op::Ne:
    return compared(n.op, arg(0), arg(1));
  case Op::Add:
    return wrapping(corners(n.type, arg(0), arg(1), add));
  case Op::Sub:
    return wrapping(corners(n.type, arg(0), arg(1), subtract));
  case Op::Mul:
    return wrapping(corners(n.type, arg(0), arg(1), multiply));
  case Op::Div: {
    const Bounds a = arg(0), b = arg(1);
    if (b.lo <= 0 && b.hi >= 0) // a division by zero is possible: inf or NaN
      return Bounds::unknown(Type::Float);
    return corners(Type::Float, a, b, divide);
  }
  case Op::Mod:
    return modulo(arg(0), arg(1));
  case Op::FloorDiv:
    return quotient(arg(0), arg(1));
  case Op::Min:
    return corners(n.type, arg(0), arg(1), minimum);
  case Op::Max:
    return corners(n.type, arg(0), arg(1), maximum);
  case Op::Clamp:
    return corners(n.type, corners(n.type, arg(0), arg(1), maximum), arg(2), minimum);
  case Op::Abs: {
    const Bounds a = arg(0);
    if (a.lo >= 0)
      return a;
    if (a.hi <= 0)
      return wrapping(range(a.type, -a.hi, -a.lo, a.maybeNaN));
    return wrapping(range(a.type, 0, std::max(-a.lo, a.hi), a.maybeNaN));
  }
  case Op::Where: {
    const Bounds c = arg(0);
    if (!c.canBeFalse)
      return arg(1);
    if (!c.canBeTrue)
      return arg(2);
    return hull(arg(1), arg(2), n.type);
  }
  case Op::Floor: {
    // Saturating: at 32 bits in kernels, so an end past them also takes the 32-bit end (the
    // reference saturates at 64 bits); floor of NaN is 0 (ExprEval.h).
    const Bounds a = arg(0);
    double lo = std::min(std::floor(a.lo), kIntMax), hi = std::max(std::floor(a.hi), kIntMin);
    if (a.maybeNaN)
      lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
    return range(Type::Int, lo, hi, false);
  }
  case Op::Exp:
    return increasing(arg(0), [](double x) { return std::exp(x); });
  case Op::Tanh:
    return increasing(arg(0), [](double x) { return std::tanh(x); });
  case Op::Sigmoid:
    return increasing(arg(0), sigmoid);
  case Op::Bit:
    return Bounds::ofBool(true, true);
  case Op::Philox: // a 32-bit word read as signed
    return Bounds::ofInt(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  case Op::Log:
  case Op::Sqrt: {
    const Bounds a = arg(0);
    const bool log = n.op == Op::Log;
    if (a.lo < 0) // NaN below zero
      return Bounds::unknown(Type::Float);
    return log ? increasing(a, [](double x) { return std::log(x); })
               : increasing(a, [](double x) { return std::sqrt(x); });
  }
  }
  return Bounds::unknown(n.type); // not reached: every op is handled above
}

} // namespace attnc::expr
