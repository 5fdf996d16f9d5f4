//===- Angles.cpp - cosines and sines of positions' angles ----------------===//
#include "attn/Kit/Angles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <numbers>

using namespace mlir;

namespace attnc::attn {

namespace {

// `angle` (f64) reduced modulo 2 pi into [-pi, pi], as f32.
Value reduced(ImplicitLocOpBuilder& b, Value angle) {
  auto f64 = [&](double x) { return b.create<arith::ConstantOp>(b.getF64FloatAttr(x)); };
  const double twoPi = 2 * std::numbers::pi;
  Value turns = b.create<math::RoundEvenOp>(b.create<arith::MulFOp>(angle, f64(1 / twoPi)));
  Value x = b.create<arith::SubFOp>(angle, b.create<arith::MulFOp>(turns, f64(twoPi)));
  return b.create<arith::TruncFOp>(b.getF32Type(), x);
}

} // namespace

std::pair<Value, Value> cosSin(ImplicitLocOpBuilder& b, Value angle) {
  Value x = reduced(b, angle);
  return {b.create<math::CosOp>(x), b.create<math::SinOp>(x)};
}

Value sinOf(ImplicitLocOpBuilder& b, Value angle) {
  return b.create<math::SinOp>(reduced(b, angle));
}

Value positionAsF64(ImplicitLocOpBuilder& b, Value position) {
  return b.create<arith::SIToFPOp>(b.getF64Type(),
                                   b.create<arith::IndexCastOp>(b.getI64Type(), position));
}

} // namespace attnc::attn
