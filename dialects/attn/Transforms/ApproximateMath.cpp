//===- ApproximateMath.cpp - vectorisable exp, log and tanh -------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATH
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

struct ApproximateMathPass : attnc::attn::impl::AttnApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
