#include "Backends/MLIR/ExprToMlir.h"

#include "Expr/ExprDerive.h"
#include "Semantics/Random.h"
#include "attn/IR/AttnOps.h"
#include "attn/IR/ExpressionRegion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <algorithm>
#include <array>
#include <utility>

using namespace mlir;

namespace attnc::mlirbackend {
namespace {

using expr::Node;
using expr::Op;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

class RegionBuilder {
public:
  RegionBuilder(ImplicitLocOpBuilder& b, Block& block, const Spec& spec,
                std::span<const AuxOperand> aux)
      : b_(b), block_(block), spec_(spec), aux_(aux), score_(block.getArgument(0)) {}

  // What `score` reads from now on (the value of the expression applied before).
  void setScore(Value score) { score_ = score; }

  Value operator()(const Node& n) {
    auto arg = [&](size_t i) { return (*this)(n.args[i]); };
    auto as = [&](size_t i, expr::Type type) { return convert(arg(i), n.args[i].type, type); };
    const expr::Type wide = n.args.size() == 2 && (n.args[0].type == expr::Type::Float ||
                                                   n.args[1].type == expr::Type::Float)
                                ? expr::Type::Float
                                : expr::Type::Int;
    const bool floats = n.type == expr::Type::Float;
    switch (n.op) {
    case Op::IntLiteral: return i32(n.intValue);
    case Op::FloatLiteral: return f32(n.floatValue);
    case Op::BoolLiteral: return b_.create<arith::ConstantIntOp>(n.intValue != 0, 1);
    case Op::Variable: return variable(n.name);
    case Op::Param: return param(n.name);
    case Op::Aux: return read(n);
    case Op::Neg:
      return floats ? Value(b_.create<arith::NegFOp>(arg(0)))
                    : Value(b_.create<arith::SubIOp>(i32(0), arg(0)));
    case Op::Not: return b_.create<arith::XOrIOp>(arg(0), b_.create<arith::ConstantIntOp>(1, 1));
    case Op::Add:
      return floats ? Value(b_.create<arith::AddFOp>(as(0, n.type), as(1, n.type)))
                    : Value(b_.create<arith::AddIOp>(arg(0), arg(1)));
    case Op::Sub:
      return floats ? Value(b_.create<arith::SubFOp>(as(0, n.type), as(1, n.type)))
                    : Value(b_.create<arith::SubIOp>(arg(0), arg(1)));
    case Op::Mul:
      return floats ? Value(b_.create<arith::MulFOp>(as(0, n.type), as(1, n.type)))
                    : Value(b_.create<arith::MulIOp>(arg(0), arg(1)));
    case Op::Div:
      return b_.create<arith::DivFOp>(as(0, expr::Type::Float), as(1, expr::Type::Float));
    case Op::Mod: return floorModulo(arg(0), arg(1));
    case Op::FloorDiv: return floorDivide(arg(0), arg(1));
    case Op::Lt: return compare(n, wide, P::slt, F::OLT);
    case Op::Le: return compare(n, wide, P::sle, F::OLE);
    case Op::Gt: return compare(n, wide, P::sgt, F::OGT);
    case Op::Ge: return compare(n, wide, P::sge, F::OGE);
    case Op::Eq: return compare(n, wide, P::eq, F::OEQ);
    case Op::Ne: return compare(n, wide, P::ne, F::UNE); // NaN != NaN, as in the reference
    case Op::And: return b_.create<arith::AndIOp>(arg(0), arg(1));
    case Op::Or: return b_.create<arith::OrIOp>(arg(0), arg(1));
    case Op::Where: {
      const Value c = arg(0);
      if (n.type == expr::Type::Bool)
        return b_.create<arith::SelectOp>(c, arg(1), arg(2));
      return b_.create<arith::SelectOp>(c, as(1, n.type), as(2, n.type));
    }
    case Op::Min: return minimum(as(0, n.type), as(1, n.type), floats);
    case Op::Max: return maximum(as(0, n.type), as(1, n.type), floats);
    case Op::Clamp:
      return minimum(maximum(as(0, n.type), as(1, n.type), floats), as(2, n.type), floats);
    case Op::Abs:
      return floats ? Value(b_.create<math::AbsFOp>(arg(0)))
                    : Value(b_.create<math::AbsIOp>(arg(0)));
    case Op::Floor: return floorToInt(n.args[0]);
    case Op::Exp: return b_.create<math::ExpOp>(as(0, expr::Type::Float));
    case Op::Log: return b_.create<math::LogOp>(as(0, expr::Type::Float));
    case Op::Sqrt: return b_.create<math::SqrtOp>(as(0, expr::Type::Float));
    case Op::Tanh: return b_.create<math::TanhOp>(as(0, expr::Type::Float));
    case Op::Sigmoid: {
      // 1 / (1 + e^-x)
      const Value e = b_.create<math::ExpOp>(b_.create<arith::NegFOp>(as(0, expr::Type::Float)));
      return b_.create<arith::DivFOp>(f32(1), b_.create<arith::AddFOp>(f32(1), e));
    }
    case Op::Bit: return bit(arg(0), arg(1));
    case Op::Philox: return philox(n);
    }
    return {}; // not reached: every op is handled above
  }

private:
  Value i32(int64_t value) {
    return b_.create<arith::ConstantIntOp>(static_cast<int32_t>(value), 32);
  }
  Value f32(double value) {
    return b_.create<arith::ConstantFloatOp>(APFloat(static_cast<float>(value)), b_.getF32Type());
  }

  Value convert(Value v, expr::Type from, expr::Type to) {
    if (from == expr::Type::Int && to == expr::Type::Float)
      return b_.create<arith::SIToFPOp>(b_.getF32Type(), v);
    return v;
  }

  Value compare(const Node& n, expr::Type wide, P ints, F floats) {
    if (n.args[0].type == expr::Type::Bool) // == and != of bools
      return b_.create<arith::CmpIOp>(ints, (*this)(n.args[0]), (*this)(n.args[1]));
    const Value a = convert((*this)(n.args[0]), n.args[0].type, wide);
    const Value c = convert((*this)(n.args[1]), n.args[1].type, wide);
    if (wide == expr::Type::Float)
      return b_.create<arith::CmpFOp>(floats, a, c);
    return b_.create<arith::CmpIOp>(ints, a, c);
  }

  // fmin and fmax (a NaN operand gives the other), as the reference computes them.
  Value minimum(Value a, Value c, bool floats) {
    return floats ? Value(b_.create<arith::MinNumFOp>(a, c))
                  : Value(b_.create<arith::MinSIOp>(a, c));
  }
  Value maximum(Value a, Value c, bool floats) {
    return floats ? Value(b_.create<arith::MaxNumFOp>(a, c))
                  : Value(b_.create<arith::MaxSIOp>(a, c));
  }

  // The result takes the divisor's sign, and x % 0 is 0. The divisor is made 1 where it is 0
  // or -1 (every x is a multiple of -1) so remsi never traps or overflows.
  Value floorModulo(Value x, Value m) {
    const Value trivial = b_.create<arith::OrIOp>(b_.create<arith::CmpIOp>(P::eq, m, i32(0)),
                                                  b_.create<arith::CmpIOp>(P::eq, m, i32(-1)));
    const Value divisor = b_.create<arith::SelectOp>(trivial, i32(1), m);
    const Value r = b_.create<arith::RemSIOp>(x, divisor);
    const Value signsDiffer = b_.create<arith::XOrIOp>(b_.create<arith::CmpIOp>(P::slt, r, i32(0)),
                                                       b_.create<arith::CmpIOp>(P::slt, m, i32(0)));
    const Value adjust =
        b_.create<arith::AndIOp>(b_.create<arith::CmpIOp>(P::ne, r, i32(0)), signsDiffer);
    return b_.create<arith::SelectOp>(adjust, b_.create<arith::AddIOp>(r, m), r);
  }

  // floor(x / m): the truncated quotient, one less when the remainder is nonzero and its sign
  // differs from m's; x // 0 is 0 and x // -1 is -x, where divsi would trap or overflow.
  Value floorDivide(Value x, Value m) {
    const Value isZero = b_.create<arith::CmpIOp>(P::eq, m, i32(0));
    const Value isMinusOne = b_.create<arith::CmpIOp>(P::eq, m, i32(-1));
    const Value divisor =
        b_.create<arith::SelectOp>(b_.create<arith::OrIOp>(isZero, isMinusOne), i32(1), m);
    const Value q = b_.create<arith::DivSIOp>(x, divisor);
    const Value r = b_.create<arith::RemSIOp>(x, divisor);
    const Value signsDiffer = b_.create<arith::XOrIOp>(b_.create<arith::CmpIOp>(P::slt, r, i32(0)),
                                                       b_.create<arith::CmpIOp>(P::slt, m, i32(0)));
    const Value adjust =
        b_.create<arith::AndIOp>(b_.create<arith::CmpIOp>(P::ne, r, i32(0)), signsDiffer);
    const Value floored =
        b_.create<arith::SelectOp>(adjust, b_.create<arith::SubIOp>(q, i32(1)), q);
    const Value negated = b_.create<arith::SubIOp>(i32(0), x);
    return b_.create<arith::SelectOp>(isZero, i32(0),
                                      b_.create<arith::SelectOp>(isMinusOne, negated, floored));
  }

  // floor to a 32-bit int: NaN gives 0, values past the int range saturate.
  Value floorToInt(const Node& operand) {
    const Value x = (*this)(operand);
    if (operand.type == expr::Type::Int)
      return x;
    const Value floored = b_.create<math::FloorOp>(x);
    const Value saturated = b_.create<arith::MinNumFOp>(
        b_.create<arith::MaxNumFOp>(floored, f32(-2147483648.0)), f32(2147483520.0));
    const Value isNaN = b_.create<arith::CmpFOp>(F::UNO, x, x);
    return b_.create<arith::SelectOp>(isNaN, i32(0),
                                      b_.create<arith::FPToSIOp>(b_.getI32Type(), saturated));
  }

  // Bit i of the word sign-extended to 64 bits: bits 32..63 are its sign; false outside [0, 63].
  Value bit(Value word, Value index) {
    const Value shift =
        b_.create<arith::MinSIOp>(b_.create<arith::MaxSIOp>(index, i32(0)), i32(31));
    const Value low = b_.create<arith::CmpIOp>(
        P::ne, b_.create<arith::AndIOp>(b_.create<arith::ShRSIOp>(word, shift), i32(1)), i32(0));
    const Value sign = b_.create<arith::CmpIOp>(P::slt, word, i32(0));
    const Value value =
        b_.create<arith::SelectOp>(b_.create<arith::CmpIOp>(P::slt, index, i32(32)), low, sign);
    const Value inRange =
        b_.create<arith::AndIOp>(b_.create<arith::CmpIOp>(P::sge, index, i32(0)),
                                 b_.create<arith::CmpIOp>(P::slt, index, i32(64)));
    return b_.create<arith::AndIOp>(inRange, value);
  }

  // Semantics/Random.h's Philox rounds over i32 values, the 32 x 32 -> 64-bit products in i64
  // and the key words as constants.
  Value philox(const Node& n) {
    std::array<Value, 4> counter;
    for (size_t i = 0; i < counter.size(); ++i)
      counter[i] = (*this)(n.args[i]);
    const uint64_t key = static_cast<uint64_t>(n.intValue);
    auto mulHiLo = [&](uint32_t m, Value x) {
      const Value product = b_.create<arith::MulIOp>(
          b_.create<arith::ExtUIOp>(b_.getI64Type(), x),
          b_.create<arith::ConstantIntOp>(static_cast<int64_t>(m), 64));
      const Value high =
          b_.create<arith::ShRUIOp>(product, b_.create<arith::ConstantIntOp>(32, 64));
      return std::pair<Value, Value>{b_.create<arith::TruncIOp>(b_.getI32Type(), high),
                                     b_.create<arith::TruncIOp>(b_.getI32Type(), product)};
    };
    auto mix = [&](Value hi, Value x, uint32_t k) -> Value {
      return b_.create<arith::XOrIOp>(b_.create<arith::XOrIOp>(hi, x),
                                      i32(static_cast<int32_t>(k)));
    };
    const std::array<Value, 4> c = random::philoxRounds<Value>(
        counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32), mulHiLo, mix);
    const Value lane = floorModulo((*this)(n.args[4]), i32(4));
    Value word = c[3];
    for (int k = 2; k >= 0; --k)
      word = b_.create<arith::SelectOp>(b_.create<arith::CmpIOp>(P::eq, lane, i32(k)), c[k], word);
    return word;
  }

  Value variable(const std::string& name) {
    if (name == "score")
      return score_;
    const auto& names = attn::kExpressionArgumentNames;
    return block_.getArgument(
        static_cast<unsigned>(std::find(names.begin(), names.end(), name) - names.begin()));
  }

  Value param(const std::string& name) {
    const auto p = std::find_if(spec_.params.begin(), spec_.params.end(),
                                [&](const SpecParam& q) { return q.name == name; });
    return p->value.type == expr::Type::Int ? i32(p->value.i) : f32(p->value.f);
  }

  Value read(const Node& n) {
    const auto tensor = std::find_if(aux_.begin(), aux_.end(),
                                     [&](const AuxOperand& a) { return a.name == n.name; });
    SmallVector<Value> indices;
    for (const Node& index : n.args)
      indices.push_back((*this)(index));
    const Value element = b_.create<attn::AuxLoadOp>(
        tensor->element, b_.getI64IntegerAttr(tensor - aux_.begin()), indices);
    if (tensor->element.isInteger(8))
      return b_.create<arith::ExtUIOp>(b_.getI32Type(), element);
    if (tensor->element.isF16() || tensor->element.isBF16())
      return b_.create<arith::ExtFOp>(b_.getF32Type(), element);
    return element;
  }

  ImplicitLocOpBuilder& b_;
  Block& block_;
  const Spec& spec_;
  std::span<const AuxOperand> aux_;
  Value score_;
};

// The region's block (score: f32, then the i32 coordinates), with a builder at its end.
Block& expressionBlock(Region& region, ImplicitLocOpBuilder& b) {
  Block* block = new Block();
  region.push_back(block);
  block->addArgument(b.getF32Type(), b.getLoc());
  for (size_t i = 1; i < attn::kExpressionArgumentNames.size(); ++i)
    block->addArgument(b.getI32Type(), b.getLoc());
  b.setInsertionPointToEnd(block);
  return *block;
}

// A tree's value as f32 (a score_mod may be an int expression: a float score).
Value floatValue(ImplicitLocOpBuilder& b, RegionBuilder& builder, const expr::Node& tree) {
  Value value = builder(tree);
  return tree.type == expr::Type::Int ? b.create<arith::SIToFPOp>(b.getF32Type(), value) : value;
}

// The region's block, its values made by `body` from the region's builder, and yielded.
void buildRegion(
    Region& region, const Spec& spec, std::span<const AuxOperand> aux,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, RegionBuilder&)> body) {
  MLIRContext* ctx = region.getContext();
  ImplicitLocOpBuilder b(UnknownLoc::get(ctx), ctx);
  Block& block = expressionBlock(region, b);
  RegionBuilder builder(b, block, spec, aux);
  b.create<gpu::YieldOp>(body(b, builder));
}

} // namespace

void buildExpressionRegion(Region& region, std::span<const expr::Node* const> trees,
                           const Spec& spec, std::span<const AuxOperand> aux) {
  buildRegion(region, spec, aux, [&](ImplicitLocOpBuilder& b, RegionBuilder& builder) {
    Value value;
    for (const expr::Node* tree : trees) {
      value = floatValue(b, builder, *tree);
      builder.setScore(value);
    }
    return SmallVector<Value>{value};
  });
}

void buildScoreGradientRegion(Region& region, std::span<const expr::Node* const> trees,
                              const Spec& spec, std::span<const AuxOperand> aux) {
  buildRegion(region, spec, aux, [&](ImplicitLocOpBuilder& b, RegionBuilder& builder) {
    // The chain rule: (f_n o ... o f_1)'(x) = prod_k f_k'(x_(k-1)), x_k = f_k(x_(k-1)).
    Value slope;
    for (const expr::Node* tree : trees) {
      Value factor = floatValue(b, builder, expr::derivativeByScore(*tree));
      slope = slope ? Value(b.create<arith::MulFOp>(slope, factor)) : factor;
      builder.setScore(floatValue(b, builder, *tree));
    }
    return SmallVector<Value>{slope};
  });
}

std::vector<int64_t> buildAuxGradientRegion(Region& region,
                                            std::span<const expr::Node* const> trees,
                                            const Spec& spec, std::span<const AuxOperand> aux,
                                            std::span<const std::string> learned) {
  std::vector<int64_t> targets;
  buildRegion(region, spec, aux, [&](ImplicitLocOpBuilder& b, RegionBuilder& builder) {
    // Tree k's reads at its input x_(k-1), each partial times the later trees' slopes
    // prod_(l > k) f_l'(x_(l-1)): d (f_n o ... o f_1) / d element.
    struct Read {
      SmallVector<Value> indices;
      Value partial;
      size_t tree;
    };
    std::vector<Read> reads;
    SmallVector<Value> slopes;
    for (auto [k, tree] : llvm::enumerate(trees)) {
      for (const expr::AuxPartial& partial : expr::derivativesByAux(*tree)) {
        auto target = std::find(learned.begin(), learned.end(), partial.read.name);
        if (target == learned.end())
          continue; // a built-in's (bias): the reference's gradient
        targets.push_back(target - learned.begin());
        Read read{{}, floatValue(b, builder, partial.derivative), k};
        for (const expr::Node& index : partial.read.args)
          read.indices.push_back(builder(index));
        reads.push_back(std::move(read));
      }
      slopes.push_back(floatValue(b, builder, expr::derivativeByScore(*tree)));
      builder.setScore(floatValue(b, builder, *tree));
    }
    SmallVector<Value> yielded;
    for (Read& read : reads) {
      for (size_t later = read.tree + 1; later < slopes.size(); ++later)
        read.partial = b.create<arith::MulFOp>(read.partial, slopes[later]);
      yielded.append(read.indices);
      yielded.push_back(read.partial);
    }
    return yielded;
  });
  return targets;
}

void buildExpressionRegion(Region& region, const expr::Node& tree, const Spec& spec,
                           std::span<const AuxOperand> aux) {
  const expr::Node* const trees[] = {&tree};
  buildExpressionRegion(region, trees, spec, aux);
}

} // namespace attnc::mlirbackend
