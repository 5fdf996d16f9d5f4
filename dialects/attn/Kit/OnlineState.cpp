//===- OnlineState.cpp - the online softmax's state -----------------------===//
#include "attn/Kit/OnlineState.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include <limits>
#include <numbers>

using namespace mlir;

namespace attnc::attn {

namespace {

// `value` in the f32 shape of `like` (a scalar or a vector).
Value constantLike(ImplicitLocOpBuilder& b, Value like, double value) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return b.create<arith::ConstantOp>(
        DenseElementsAttr::get(vector, b.getF32FloatAttr(static_cast<float>(value))));
  return f32Constant(b, value);
}

Value equals(ImplicitLocOpBuilder& b, Value x, double value) {
  return b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, x, constantLike(b, x, value));
}

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

Value OnlineState::exp(ImplicitLocOpBuilder& b, Value x) const {
  if (exponential == Exponential::Natural)
    return b.create<math::ExpOp>(x);
  return b.create<math::Exp2Op>(
      b.create<arith::MulFOp>(x, constantLike(b, x, std::numbers::log2e)));
}

Value OnlineState::finiteMax(ImplicitLocOpBuilder& b, Value m) const {
  return b.create<arith::SelectOp>(equals(b, m, -kInf), constantLike(b, m, 0), m);
}

Value OnlineState::rescaleFactor(ImplicitLocOpBuilder& b, Value from, Value to) const {
  return b.create<arith::SelectOp>(equals(b, from, -kInf), constantLike(b, from, 0),
                                   exp(b, b.create<arith::SubFOp>(from, to)));
}

Value OnlineState::probabilityOffset(ImplicitLocOpBuilder& b, Value safeMax) const {
  Value offset =
      b.create<arith::AddFOp>(safeMax, constantLike(b, safeMax, static_cast<float>(shift)));
  if (exponential == Exponential::Natural)
    return offset;
  return b.create<arith::MulFOp>(offset, constantLike(b, offset, std::numbers::log2e));
}

Value OnlineState::probability(ImplicitLocOpBuilder& b, Value s, Value offset) const {
  if (exponential == Exponential::Natural)
    return probabilityExp(b, b.create<arith::SubFOp>(s, offset));
  return b.create<math::Exp2Op>(b.create<math::FmaOp>(s, constantLike(b, s, std::numbers::log2e),
                                                      b.create<arith::NegFOp>(offset)));
}

Value OnlineState::carriedSum(ImplicitLocOpBuilder& b, Value alpha, Value sum,
                              Value blockSum) const {
  return b.create<math::FmaOp>(alpha, sum, blockSum);
}

Value probabilityExp(ImplicitLocOpBuilder& b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto bits = type.clone(b.getI32Type());
  auto splatInt = [&](int32_t v) {
    return b.create<arith::ConstantOp>(DenseElementsAttr::get(bits, b.getI32IntegerAttr(v)));
  };
  auto splat = [&](double v) { return constantLike(b, x, v); };
  // x clamped so that 2^n stays a normal number (n >= -125).
  Value clamped = b.create<arith::MaximumFOp>(x, splat(-125 * std::numbers::ln2));
  // n = round(x log2 e) by adding 1.5 2^23: the sum's low mantissa bits hold n (|n| < 2^22).
  constexpr double kRoundingBias = 12582912.0;
  constexpr int32_t kRoundingBiasBits = 0x4B400000;
  Value biased = b.create<arith::AddFOp>(
      b.create<arith::MulFOp>(clamped, splat(std::numbers::log2e)), splat(kRoundingBias));
  Value n = b.create<arith::SubFOp>(biased, splat(kRoundingBias));
  // r = x - n ln 2 in two parts (Cody and Waite): ln2Hi has 9 significant bits, so n ln2Hi is
  // exact; |r| <= ln 2 / 2.
  constexpr double kLn2Hi = 0.693359375, kLn2Lo = std::numbers::ln2 - kLn2Hi;
  Value r = b.create<math::FmaOp>(n, splat(-kLn2Hi), clamped);
  r = b.create<math::FmaOp>(n, splat(-kLn2Lo), r);
  // e^r = sum_k r^k / k!, k <= 7 (5e-9 relative at |r| = ln 2 / 2), by Horner's rule.
  double coefficient[8];
  coefficient[0] = 1;
  for (int k = 1; k <= 7; ++k)
    coefficient[k] = coefficient[k - 1] / k;
  Value p = splat(coefficient[7]);
  for (int k = 6; k >= 0; --k)
    p = b.create<math::FmaOp>(p, r, splat(coefficient[k]));
  Value exponent =
      b.create<arith::ShLIOp>(b.create<arith::SubIOp>(b.create<arith::BitcastOp>(bits, biased),
                                                      splatInt(kRoundingBiasBits)),
                              splatInt(23));
  Value result = b.create<arith::BitcastOp>(
      type, b.create<arith::AddIOp>(b.create<arith::BitcastOp>(bits, p), exponent));
  Value nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, x, x);
  return b.create<arith::SelectOp>(nan, x, result);
}

Value OnlineState::inverseSum(ImplicitLocOpBuilder& b, Value l) const {
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, 0),
                                   b.create<arith::DivFOp>(constantLike(b, l, 1), l));
}

Value OnlineState::finishedLse(ImplicitLocOpBuilder& b, Value m, Value l) const {
  Value c = constantLike(b, m, static_cast<float>(shift));
  Value lse = b.create<arith::AddFOp>(b.create<arith::AddFOp>(m, c), b.create<math::LogOp>(l));
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, -kInf), lse);
}

Value OnlineState::sinkShare(ImplicitLocOpBuilder& b, Value sink, Value to) const {
  return rescaleFactor(b, sink, b.create<arith::AddFOp>(to, constantLike(b, to, shift)));
}

FinishedRow OnlineState::finish(ImplicitLocOpBuilder& b, Value m, Value l, Value sink) const {
  if (!sink)
    return {m, l, inverseSum(b, l)};
  Value max = b.create<arith::MaximumFOp>(m, sink);
  Value to = finiteMax(b, max);
  Value accFactor = rescaleFactor(b, m, to);
  Value sum =
      b.create<arith::AddFOp>(b.create<arith::MulFOp>(l, accFactor), sinkShare(b, sink, to));
  return {max, sum, b.create<arith::MulFOp>(accFactor, inverseSum(b, sum))};
}

namespace {

// combine(s, running) folded over s in [0, splits), from `init`.
Value overSplits(ImplicitLocOpBuilder& b, Value splits, Value init,
                 llvm::function_ref<Value(ImplicitLocOpBuilder&, Value, Value)> combine) {
  return foldRange(b, indexConstant(b, 0), splits, init,
                   [&](ImplicitLocOpBuilder& sb, Value s, ValueRange running) {
                     return SmallVector<Value>{combine(sb, s, running[0])};
                   })
      .front();
}

} // namespace

MergedSplits OnlineState::mergeSplits(ImplicitLocOpBuilder& b, Value splits, SplitRead maxOf,
                                      SplitRead sumOf, Value sink) const {
  MergedSplits merged;
  // M = max_s m_s; a sink joins as one more split (m = sink, l = e^-c, acc = 0).
  merged.max = overSplits(b, splits, sink ? sink : f32Constant(b, -kInf),
                          [&](ImplicitLocOpBuilder& sb, Value s, Value running) -> Value {
                            return sb.create<arith::MaximumFOp>(running, maxOf(sb, s));
                          });
  merged.safeMax = finiteMax(b, merged.max);
  // L = sum_s w_s l_s.
  Value sinkSum = sink ? sinkShare(b, sink, merged.safeMax) : Value(f32Constant(b, 0));
  merged.sum = overSplits(
      b, splits, sinkSum, [&](ImplicitLocOpBuilder& sb, Value s, Value running) -> Value {
        return carriedSum(sb, splitWeight(sb, merged, maxOf(sb, s)), sumOf(sb, s), running);
      });
  merged.inverse = inverseSum(b, merged.sum);
  return merged;
}

} // namespace attnc::attn
