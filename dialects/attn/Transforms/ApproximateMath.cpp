//===- ApproximateMath.cpp - vectorisable exp, log and tanh -------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATH
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

// |x| = bits(x) & 0x7fffffff for f32 (scalars and vectors).
struct ExpandAbsF32 : OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsFOp op, PatternRewriter& rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return failure();
    Type intType = rewriter.getI32Type();
    if (auto vector = dyn_cast<VectorType>(type))
      intType = vector.clone(intType);
    Location loc = op.getLoc();
    Value bits = rewriter.create<arith::BitcastOp>(loc, intType, op.getOperand());
    TypedAttr maskBits = rewriter.getI32IntegerAttr(0x7fffffff);
    if (auto vector = dyn_cast<VectorType>(intType))
      maskBits = DenseElementsAttr::get(vector, maskBits);
    Value mask = rewriter.create<arith::ConstantOp>(loc, maskBits);
    Value cleared = rewriter.create<arith::AndIOp>(loc, bits, mask);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, type, cleared);
    return success();
  }
};

struct ApproximateMathPass : attnc::attn::impl::AttnApproximateMathBase<ApproximateMathPass> {
  using AttnApproximateMathBase::AttnApproximateMathBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (!noLibdevice)
      return;
    RewritePatternSet expansions(&getContext());
    populateExpandFloorFPattern(expansions);
    expansions.add<ExpandAbsF32>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(expansions))))
      return signalPassFailure();
  }
};

} // namespace
