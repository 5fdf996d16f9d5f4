#include "Expr/ExprEval.h"

#include "Semantics/Random.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnc::expr {
namespace {

Value intValue(int64_t v) { return {Type::Int, v, 0}; }

// A float the expression computes has f64's precision but f32's range, as in the kernels: a
// value f32 rounds past its largest number is ±inf, and one it rounds to zero is ±0, so that
// exp(100.0) * 0.0 is NaN and 1e-30 * 1e-30 * 1e30 is 0 here too.
Value floatValue(double v) {
  const float nearest = static_cast<float>(v);
  return {Type::Float, 0, std::isinf(nearest) || nearest == 0 ? nearest : v};
}
Value boolValue(bool v) { return {Type::Bool, v ? 1 : 0, 0}; }

int64_t variable(const std::string& name, const Point& p) {
  if (name == "b")
    return p.b;
  if (name == "h")
    return p.h;
  if (name == "g")
    return p.g;
  if (name == "q_idx")
    return p.qIdx;
  if (name == "kv_idx")
    return p.kvIdx;
  if (name == "qpos")
    return p.qpos;
  if (name == "Tq")
    return p.tq;
  return p.tk; // the parser admits no other int variable
}

// a op b for two values of the node's numeric type.
Value arithmetic(Op op, Type type, const Value& a, const Value& b) {
  if (type == Type::Int) {
    const uint64_t x = static_cast<uint64_t>(a.i), y = static_cast<uint64_t>(b.i);
    switch (op) {
    case Op::Add:
      return intValue(wrapped(x + y));
    case Op::Sub:
      return intValue(wrapped(x - y));
    case Op::Mul:
      return intValue(wrapped(x * y));
    case Op::Mod:
      return intValue(floorModulo(a.i, b.i));
    case Op::FloorDiv:
      return intValue(floorDivide(a.i, b.i));
    case Op::Min:
      return intValue(std::min(a.i, b.i));
    default:
      return intValue(std::max(a.i, b.i));
    }
  }
  const double x = a.number(), y = b.number();
  switch (op) {
  case Op::Add:
    return floatValue(x + y);
  case Op::Sub:
    return floatValue(x - y);
  case Op::Mul:
    return floatValue(x * y);
  case Op::Div:
    return floatValue(x / y);
  case Op::Min:
    return floatValue(std::fmin(x, y));
  default:
    return floatValue(std::fmax(x, y));
  }
}

// Bools take == and != only; an int and a float compare as numbers.
bool compared(Op op, const Value& a, const Value& b) {
  return withComparison(op, [&](auto compare) {
    return a.type == b.type && a.type != Type::Float ? compare(a.i, b.i)
                                                     : compare(a.number(), b.number());
  });
}

} // namespace

int64_t floorToInt(double x) {
  if (std::isnan(x))
    return 0;
  const double f = std::floor(x);
  if (f >= 9223372036854775807.0)
    return INT64_MAX;
  if (f <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(f);
}

Value evaluate(const Node& n, const Point& p, const Environment& env) {
  auto arg = [&](size_t i) { return evaluate(n.args[i], p, env); };
  switch (n.op) {
  case Op::IntLiteral:
    return intValue(n.intValue);
  case Op::FloatLiteral:
    return floatValue(n.floatValue);
  case Op::BoolLiteral:
    return boolValue(n.intValue != 0);
  case Op::Variable:
    return n.name == "score" ? floatValue(p.score) : intValue(variable(n.name, p));
  case Op::Param:
    return env.params.at(n.name);
  case Op::Aux: {
    std::vector<int64_t> indices;
    for (size_t i = 0; i < n.args.size(); ++i)
      indices.push_back(arg(i).i);
    return env.aux(n.name, indices);
  }
  case Op::Neg: {
    const Value a = arg(0);
    return n.type == Type::Int ? intValue(wrapped(0 - static_cast<uint64_t>(a.i)))
                               : floatValue(-a.f);
  }
  case Op::Not:
    return boolValue(!arg(0).truth());
  case Op::And:
    return boolValue(arg(0).truth() && arg(1).truth());
  case Op::Or:
    return boolValue(arg(0).truth() || arg(1).truth());
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::Eq:
  case Op::Ne:
    return boolValue(compared(n.op, arg(0), arg(1)));
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Mod:
  case Op::FloorDiv:
  case Op::Min:
  case Op::Max:
    return arithmetic(n.op, n.type, arg(0), arg(1));
  case Op::Where: {
    const Value chosen = arg(0).truth() ? arg(1) : arg(2);
    return n.type == Type::Float ? floatValue(chosen.number()) : chosen;
  }
  case Op::Abs: {
    const Value a = arg(0);
    return n.type == Type::Int ? intValue(a.i < 0 ? wrapped(0 - static_cast<uint64_t>(a.i)) : a.i)
                               : floatValue(std::fabs(a.f));
  }
  case Op::Clamp:
    return arithmetic(Op::Min, n.type, arithmetic(Op::Max, n.type, arg(0), arg(1)), arg(2));
  case Op::Floor:
    return intValue(floorToInt(arg(0).number()));
  case Op::Exp:
    return floatValue(std::exp(arg(0).number()));
  case Op::Log:
    return floatValue(std::log(arg(0).number()));
  case Op::Sqrt:
    return floatValue(std::sqrt(arg(0).number()));
  case Op::Tanh:
    return floatValue(std::tanh(arg(0).number()));
  case Op::Sigmoid:
    return floatValue(1 / (1 + std::exp(-arg(0).number())));
  case Op::Bit: {
    const Value word = arg(0), index = arg(1);
    return boolValue(index.i >= 0 && index.i < 64 &&
                     ((static_cast<uint64_t>(word.i) >> index.i) & 1) != 0);
  }
  case Op::Philox: {
    const uint64_t key = static_cast<uint64_t>(n.intValue);
    auto word = [&](size_t i) { return static_cast<uint32_t>(arg(i).i); };
    const random::Block x = random::philox4x32({word(0), word(1), word(2), word(3)},
                                               static_cast<uint32_t>(key),
                                               static_cast<uint32_t>(key >> 32));
    return intValue(static_cast<int32_t>(x[floorModulo(arg(4).i, 4)]));
  }
  }
  return intValue(0); // not reached: every op is handled above
}

} // namespace attnc::expr
