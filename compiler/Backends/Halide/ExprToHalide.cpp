#include "Backends/Halide/ExprToHalide.h"

#include "Backends/Halide/IeeeFloat.h"
#include "Backends/Halide/StrictFloats.h"
#include "Expr/ExprPrint.h"
#include "Expr/ExprQueries.h"
#include "Semantics/Random.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace attnc::halide {
namespace {

using namespace Halide;

Type halideType(expr::Type type) {
  switch (type) {
  case expr::Type::Int: return Int(32);
  case expr::Type::Float: return Float(32);
  case expr::Type::Bool: return Bool();
  }
  return Int(32);
}

// Whether e, once Halide folds it, holds an int constant of 2^24 or more in size: a literal, a
// param or a wrapped product. Halide's solver moves constants across comparisons and min/max
// (x + c0 < c1 to x < c1 - c0, with c0 from its own splits and bounds) and takes int32 overflow
// there as impossible: it refused `q_idx < 2147483600` ("signed integer overflow occurred during
// constant-folding"). Ops on such operands are made in int64, where no such step overflows and
// every int32 result stays exact; the others stay in int32, whose vectors hold twice the lanes.
bool holdsLargeConstant(const Expr& e) {
  struct Finder : Internal::IRVisitor {
    using IRVisitor::visit;
    void visit(const Internal::IntImm* imm) override {
      found = found || imm->value >= (1 << 24) || imm->value <= -(1 << 24);
    }
    void visit(const Internal::UIntImm* imm) override { // a wrapping op's operand: as int32
      const int64_t v = static_cast<int32_t>(static_cast<uint32_t>(imm->value));
      found = found || v >= (1 << 24) || v <= -(1 << 24);
    }
    bool found = false;
  } finder;
  Internal::simplify(e).accept(&finder);
  return finder.found;
}

// a and b as int64 where an op on them in int32 could trip Halide's overflow assumption.
std::pair<Expr, Expr> widenedForConstants(Expr a, Expr b) {
  if (!a.type().is_int() || (!holdsLargeConstant(a) && !holdsLargeConstant(b)))
    return {a, b};
  return {cast<int64_t>(a), cast<int64_t>(b)};
}

class Translator {
public:
  Translator(const ExprPoint& point, const Spec& spec,
             const std::map<std::string, ImageParam>& aux, const TabledDraws& draws)
      : point_(point), spec_(spec), aux_(aux), draws_(draws) {}

  Expr operator()(const expr::Node& n) const {
    using expr::Op;
    if (!draws_.empty())
      if (const auto table = draws_.find(drawIdentity(n)); table != draws_.end())
        return table->second(point_.qIdx, point_.kvIdx, point_.h, point_.b);
    auto arg = [&](size_t i) { return (*this)(n.args[i]); };
    // An operand in the node's own numeric type (ints promote to float beside a float).
    auto as = [&](size_t i, expr::Type type) { return cast(halideType(type), arg(i)); };
    const expr::Type wide = n.args.size() == 2 && (n.args[0].type == expr::Type::Float ||
                                                   n.args[1].type == expr::Type::Float)
                                ? expr::Type::Float
                                : expr::Type::Int;
    switch (n.op) {
    case Op::IntLiteral: return Expr(static_cast<int32_t>(n.intValue));
    case Op::FloatLiteral: return Expr(static_cast<float>(n.floatValue));
    case Op::BoolLiteral: return cast<bool>(n.intValue != 0);
    case Op::Variable: return variable(n.name);
    case Op::Param: return param(n.name);
    case Op::Aux: return read(n);
    case Op::Neg:
      return n.type == expr::Type::Int ? wrapping(0, arg(0), std::minus<>()) : ieeeNegate(arg(0));
    case Op::Not: return !arg(0);
    case Op::Add: return arithmetic(n, std::plus<>());
    case Op::Sub: return arithmetic(n, std::minus<>());
    case Op::Mul: return arithmetic(n, std::multiplies<>());
    case Op::Div: return ieeeDivide(as(0, expr::Type::Float), as(1, expr::Type::Float));
    case Op::Mod: return floorModulo(arg(0), arg(1));
    case Op::FloorDiv: return floorDivide(arg(0), arg(1));
    case Op::Lt: return compared(as(0, wide), as(1, wide), std::less<>());
    case Op::Le: return compared(as(0, wide), as(1, wide), std::less_equal<>());
    case Op::Gt: return compared(as(0, wide), as(1, wide), std::greater<>());
    case Op::Ge: return compared(as(0, wide), as(1, wide), std::greater_equal<>());
    case Op::Eq:
      if (n.args[0].type == expr::Type::Bool)
        return arg(0) == arg(1);
      return compared(as(0, wide), as(1, wide), std::equal_to<>());
    case Op::Ne:
      if (n.args[0].type == expr::Type::Bool)
        return arg(0) != arg(1);
      return !compared(as(0, wide), as(1, wide), std::equal_to<>());
    case Op::And: return arg(0) && arg(1);
    case Op::Or:
      if (const Expr x = outsideRange(n); x.defined())
        return x;
      return arg(0) || arg(1);
    case Op::Where: {
      if (n.type != expr::Type::Bool)
        return select(arg(0), as(1, n.type), as(2, n.type));
      // Not a select of bools: in the weights pass one gave wrong weights, the and/or form
      // right ones (found by tests/cli/test_expressions.py; Halide 14's lowering of selects of
      // bool vectors is the suspect, not reduced to a standalone case).
      const Expr c = arg(0);
      return (c && arg(1)) || (!c && arg(2));
    }
    case Op::Min: return least(as(0, n.type), as(1, n.type));
    case Op::Max: return greatest(as(0, n.type), as(1, n.type));
    case Op::Clamp: return least(greatest(as(0, n.type), as(1, n.type)), as(2, n.type));
    case Op::Abs:
      // Halide's abs of an int is unsigned; the language's stays an int, wrapping at -2^31.
      return n.type == expr::Type::Int ? reinterpret(Int(32), abs(arg(0))) : ieeeAbs(arg(0));
    case Op::Floor: return floorToInt(n.args[0]);
    case Op::Exp: return ieeeExp(as(0, expr::Type::Float));
    case Op::Log: return ieeeLog(as(0, expr::Type::Float));
    case Op::Sqrt: return sqrt(as(0, expr::Type::Float));
    case Op::Tanh: return tanh(as(0, expr::Type::Float));
    case Op::Sigmoid: return 1.0f / (1.0f + ieeeExp(-as(0, expr::Type::Float)));
    case Op::Bit: {
      // Bits 32..63 of a sign-extended 32-bit word are its sign.
      const Expr word = arg(0), index = arg(1);
      const Expr low = ((word >> clamp(index, 0, 31)) & 1) != 0;
      return index >= 0 && index < 64 && select(index < 32, low, word < 0);
    }
    case Op::Philox: {
      std::array<Expr, 4> counter;
      for (size_t i = 0; i < counter.size(); ++i)
        counter[i] = cast<uint32_t>(arg(i));
      const uint64_t key = static_cast<uint64_t>(n.intValue);
      const auto x = philox(counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
      return cast<int32_t>(philoxWord(x, arg(4)));
    }
    }
    return Expr(); // not reached: every op is handled above
  }

private:
  Expr variable(const std::string& name) const {
    const ExprPoint& p = point_;
    if (name == "b") return p.b;
    if (name == "h") return p.h;
    if (name == "g") return p.g;
    if (name == "q_idx") return p.qIdx;
    if (name == "kv_idx") return p.kvIdx;
    if (name == "qpos") return p.qpos;
    if (name == "Tq") return p.tq;
    if (name == "Tk") return p.tk;
    return p.score;
  }

  Expr param(const std::string& name) const {
    const auto p = std::find_if(spec_.params.begin(), spec_.params.end(),
                                [&](const SpecParam& q) { return q.name == name; });
    return p->value.type == expr::Type::Int ? Expr(static_cast<int32_t>(p->value.i))
                                            : Expr(static_cast<float>(p->value.f));
  }

  // Halide numbers dimensions innermost first, so index k of a rank-n tensor is dim n-1-k.
  Expr read(const expr::Node& n) const {
    const ImageParam& tensor = aux_.at(n.name);
    const int rank = static_cast<int>(n.args.size());
    std::vector<Expr> at(rank);
    for (int k = 0; k < rank; ++k)
      at[rank - 1 - k] = clamp((*this)(n.args[k]), 0, tensor.dim(rank - 1 - k).extent() - 1);
    return tensor(at);
  }

  // `x < 0 || x >= c` for an int x and a literal c >= 0, as the one unsigned comparison it is on
  // 32-bit ints: u32(x) >= c (dropout's keep test on the signed Philox word is written so).
  // Halide keeps the two tests and the or, and the vector code it makes of them runs up to
  // 1.35x slower (causal with dropout, docs/benchmarks.md); undefined for any other or.
  Expr outsideRange(const expr::Node& n) const {
    using expr::Op;
    const expr::Node &below = n.args[0], &above = n.args[1];
    const auto literal = [](const expr::Node& m, auto test) {
      return m.op == Op::IntLiteral && test(m.intValue);
    };
    // The two x's compare by their text with their draws' keys.
    if (below.op != Op::Lt || above.op != Op::Ge || below.args[0].type != expr::Type::Int ||
        !literal(below.args[1], [](int64_t v) { return v == 0; }) ||
        !literal(above.args[1], [](int64_t v) { return v >= 0 && v <= INT32_MAX; }) ||
        drawIdentity(below.args[0]) != drawIdentity(above.args[0]))
      return Expr();
    return cast<uint32_t>((*this)(below.args[0])) >=
           Expr(static_cast<uint32_t>(above.args[1].intValue));
  }

  // The language's int +, - and * wrap in two's complement, as uint32 arithmetic does; Halide
  // takes signed overflow as impossible (and refuses a constant that overflows), so the ints
  // are added as uint32 and read back. Floats are the operation itself.
  template <typename Operation> Expr arithmetic(const expr::Node& n, Operation operation) const {
    if (n.type == expr::Type::Float)
      return operation(cast<float>((*this)(n.args[0])), cast<float>((*this)(n.args[1])));
    return wrapping((*this)(n.args[0]), (*this)(n.args[1]), operation);
  }

  template <typename Operation> static Expr wrapping(Expr a, Expr b, Operation operation) {
    return reinterpret(Int(32), operation(cast<uint32_t>(a), cast<uint32_t>(b)));
  }

  // A comparison of floats is false when either is NaN (so != is true): tested on the bits,
  // since Halide's simplifier takes x <= x and x == x as true for any x.
  template <typename Comparison> static Expr compared(Expr a, Expr b, Comparison comparison) {
    if (!a.type().is_float()) {
      const auto [x, y] = widenedForConstants(a, b);
      return comparison(x, y);
    }
    return !isNaN(a) && !isNaN(b) && comparison(a, b);
  }

  // min and max as the language has them (fmin, fmax): a NaN operand is ignored, unless both
  // are NaN. Halide's min is a compare and select, which keeps one NaN operand.
  static Expr least(Expr a, Expr b) {
    if (!a.type().is_float()) {
      const auto [x, y] = widenedForConstants(a, b);
      return cast(a.type(), min(x, y));
    }
    return select(isNaN(a), b, isNaN(b), a, min(a, b));
  }

  static Expr greatest(Expr a, Expr b) {
    if (!a.type().is_float()) {
      const auto [x, y] = widenedForConstants(a, b);
      return cast(a.type(), max(x, y));
    }
    return select(isNaN(a), b, isNaN(b), a, max(a, b));
  }

  // The divisor's sign (Halide's % is Euclidean: never negative); x % 0 is 0 in both.
  static Expr floorModulo(Expr x, Expr m) {
    const Expr r = x % m;
    return select(m == 0, 0, m < 0 && r != 0, r + m, r);
  }

  // Halide's x / m is floor(x / m) for m > 0 and Euclidean for m < 0, one less than the floor
  // when m does not divide x; x / 0 is 0 in both.
  static Expr floorDivide(Expr x, Expr m) {
    const Expr q = x / m;
    return select(m < 0 && x % m != 0, q - 1, q);
  }

  Expr floorToInt(const expr::Node& operand) const {
    const Expr x = (*this)(operand);
    return operand.type == expr::Type::Int ? x : floorToInt32(x);
  }

  const ExprPoint& point_;
  const Spec& spec_;
  const std::map<std::string, ImageParam>& aux_;
  const TabledDraws& draws_;
};

} // namespace

std::string drawIdentity(const expr::Node& part) {
  std::string keys;
  const std::function<void(const expr::Node&)> collect = [&](const expr::Node& n) {
    if (n.op == expr::Op::Philox)
      keys += " #" + std::to_string(n.intValue);
    for (const expr::Node& a : n.args)
      collect(a);
  };
  collect(part);
  return expr::print(part) + keys;
}

std::array<Expr, 4> philox(std::array<Expr, 4> counter, uint32_t key0, uint32_t key1) {
  return random::philoxRounds<Expr>(
      counter, key0, key1,
      [](uint32_t m, Expr x) {
        const Expr product = cast<uint64_t>(x) * Expr(static_cast<uint64_t>(m));
        return std::pair<Expr, Expr>{cast<uint32_t>(product >> 32), cast<uint32_t>(product)};
      },
      [](Expr hi, Expr x, uint32_t key) { return hi ^ x ^ Expr(key); });
}

Expr philoxWord(const std::array<Expr, 4>& block, Expr index) {
  const Expr lane = index % 4; // Halide's % is never negative
  return select(lane == 0, block[0], lane == 1, block[1], lane == 2, block[2], block[3]);
}

Expr translate(const expr::Node& node, const ExprPoint& point, const Spec& spec,
               const std::map<std::string, ImageParam>& aux, const TabledDraws& draws) {
  return withIeeeFloats(node, Translator(point, spec, aux, draws)(node));
}

Expr withIeeeFloats(const expr::Node& node, Expr e) {
  const bool computesFloats = expr::contains(
      node, [](const expr::Node& n) { return n.type == expr::Type::Float; });
  return computesFloats ? strictFloats(e) : e;
}

} // namespace attnc::halide
