//===- ApproximateMath.cpp - vectorisable exp, log, tanh and bf16 rounding ---===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATH
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

// `value` as a constant of `type` (an f32 or i32 scalar, or a vector of them).
Value splat(OpBuilder& b, Location loc, Type type, Attribute value) {
  if (auto vector = dyn_cast<VectorType>(type))
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(vector, value));
  return b.create<arith::ConstantOp>(loc, cast<TypedAttr>(value));
}

// e^NaN = NaN. MLIR's polynomial converts round(x log2 e) to an int by fptosi, which LLVM makes
// poison for a NaN x: where LLVM knows x is NaN (a score_mod's exp(log(-1.0))), it folds the
// exponential to any value, and the rows came out masked. The select passes a NaN x on and keeps
// the poison out of the lanes it does not pick, as the softmax's own exponential does
// (the kit's probabilityExp, Kit/OnlineState.h).
void keepNaNThroughExp(Operation* root) {
  root->walk([](math::ExpOp exp) {
    if (!getElementTypeOrSelf(exp.getType()).isF32())
      return;
    OpBuilder b(exp);
    b.setInsertionPointAfter(exp);
    Value x = exp.getOperand();
    Value nan = b.create<arith::CmpFOp>(exp.getLoc(), arith::CmpFPredicate::UNO, x, x);
    auto kept = b.create<arith::SelectOp>(exp.getLoc(), nan, x, exp.getResult());
    exp.getResult().replaceAllUsesExcept(kept, kept);
  });
}

// i32, or a vector of i32 of `type`'s shape: the bits of an f32 scalar or vector.
Type i32Like(Builder& b, Type type) {
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.clone(b.getI32Type());
  return b.getI32Type();
}

// floor(x) on f32 with no libdevice, in place of MLIR 19's expansion, trunc(x) - 1 for every
// x < 0 (floor(-2.0) = -3), through an fptosi to i64 that LLVM makes poison for NaN, infinities
// and |x| >= 2^63. An f32 of magnitude 2^23 or more is an integer, its own floor, as NaN and the
// infinities are; below, t = trunc(x) through i32 is exact, and the floor is t, or t - 1 where
// t > x (a negative x with a fraction), with x's sign (floor(-0.0) = -0.0).
struct ExpandFloorF32 : OpRewritePattern<math::FloorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FloorOp op, PatternRewriter& rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return failure();
    Type intType = i32Like(rewriter, type);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto constant = [&](float value) {
      return splat(b, b.getLoc(), type, b.getF32FloatAttr(value));
    };
    Value x = op.getOperand();
    Value small = b.create<arith::CmpFOp>(arith::CmpFPredicate::OLT, b.create<math::AbsFOp>(x),
                                          constant(0x1p23f));
    Value inRange = b.create<arith::SelectOp>(small, x, constant(0));
    Value t = b.create<arith::SIToFPOp>(type, b.create<arith::FPToSIOp>(intType, inRange));
    Value above = b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, t, inRange);
    Value floored = b.create<arith::SelectOp>(above, b.create<arith::SubFOp>(t, constant(1)), t);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, small, b.create<math::CopySignOp>(floored, x),
                                                 x);
    return success();
  }
};

// |x| = bits(x) & 0x7fffffff for f32 (scalars and vectors).
struct ExpandAbsF32 : OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsFOp op, PatternRewriter& rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return failure();
    Type intType = i32Like(rewriter, type);
    Location loc = op.getLoc();
    Value bits = rewriter.create<arith::BitcastOp>(loc, intType, op.getOperand());
    Value mask = splat(rewriter, loc, intType, rewriter.getI32IntegerAttr(0x7fffffff));
    Value cleared = rewriter.create<arith::AndIOp>(loc, bits, mask);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, type, cleared);
    return success();
  }
};

// f32 -> bf16 rounded to nearest even, as integer ops whose select is on the f32's bits: NaN
// becomes the quiet 0x7fc0 before the rounding, then (bits + 0x7fff + lsb) >> 16. MLIR's
// expansion selects the NaN after truncating to i16, and LLVM then moves that select onto
// bf16 values, which x86 without AVX512-BF16 promotes to f32 and truncates back through
// __truncsfbf2, a function no libgcc of Debian 12 has.
struct TruncF32ToBf16 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op, PatternRewriter& rewriter) const override {
    Type type = op.getIn().getType();
    if (!getElementTypeOrSelf(type).isF32() || !getElementTypeOrSelf(op.getType()).isBF16() ||
        op.getRoundingmodeAttr()) // another rounding than to nearest even: arith-expand's
      return failure();
    Type intType = i32Like(rewriter, type);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto constant = [&](int32_t value) {
      return splat(b, b.getLoc(), intType, b.getI32IntegerAttr(value));
    };
    Value bits = b.create<arith::BitcastOp>(intType, op.getIn());
    Value nan = b.create<arith::CmpIOp>(arith::CmpIPredicate::ugt,
                                        b.create<arith::AndIOp>(bits, constant(0x7fffffff)),
                                        constant(0x7f800000));
    bits = b.create<arith::SelectOp>(nan, constant(0x7fc00000), bits);
    Value lsb = b.create<arith::AndIOp>(b.create<arith::ShRUIOp>(bits, constant(16)), constant(1));
    Value rounded = b.create<arith::ShRUIOp>(
        b.create<arith::AddIOp>(bits, b.create<arith::AddIOp>(lsb, constant(0x7fff))),
        constant(16));
    Type halfType = isa<VectorType>(type) ? Type(cast<VectorType>(type).clone(b.getI16Type()))
                                          : Type(b.getI16Type());
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(),
                                                  b.create<arith::TruncIOp>(halfType, rounded));
    return success();
  }
};

struct ApproximateMathPass : attnc::attn::impl::AttnApproximateMathBase<ApproximateMathPass> {
  using AttnApproximateMathBase::AttnApproximateMathBase;
  void runOnOperation() override {
    keepNaNThroughExp(getOperation());
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    patterns.add<TruncF32ToBf16>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (!noLibdevice)
      return;
    RewritePatternSet expansions(&getContext());
    expansions.add<ExpandFloorF32, ExpandAbsF32>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(expansions))))
      return signalPassFailure();
  }
};

} // namespace
