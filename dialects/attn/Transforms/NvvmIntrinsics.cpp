//===- NvvmIntrinsics.cpp - what MLIR 19 cannot yet lower to NVVM -------------===//
//
// Two gaps of the upstream NVVM lowering, filled by calling the LLVM intrinsics directly:
//   - nvgpu.mma.sync with bf16 operands (convert-nvgpu-to-nvvm only deduces f16, tf32, ints):
//     llvm.nvvm.mma.m16n8k16.row.col.bf16 takes each pair of bf16 as one i32.
//   - math.exp2 on f32 (NVPTX has no libcall for fexp2): ex2.approx.ftz.f32, the MUFU
//     instruction flash attention's softmax is built on (max error 2 ulp).
//   - math.sqrt on f32 (a score_mod's sqrt; its libdevice call cannot be linked here):
//     sqrt.rn.f32, correctly rounded as on the CPU.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNLOWERTONVVMINTRINSICS
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

// The rows of a vector<Nx2xbf16> fragment, each pair as one i32.
void appendPairsAsI32(PatternRewriter& rewriter, Location loc, Value fragment,
                      SmallVector<Value>& out) {
  auto type = cast<VectorType>(fragment.getType());
  auto i32x1 = VectorType::get({1}, rewriter.getI32Type());
  for (int64_t row = 0; row < type.getDimSize(0); ++row) {
    Value pair = rewriter.create<vector::ExtractOp>(loc, fragment, row);
    Value word = rewriter.create<vector::BitCastOp>(loc, i32x1, pair);
    out.push_back(rewriter.create<vector::ExtractOp>(loc, word, 0));
  }
}

struct Bf16MmaToIntrinsic : OpRewritePattern<nvgpu::MmaSyncOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(nvgpu::MmaSyncOp op, PatternRewriter& rewriter) const override {
    auto a = cast<VectorType>(op.getMatrixA().getType());
    auto c = cast<VectorType>(op.getMatrixC().getType());
    if (!a.getElementType().isBF16() ||
        op.getMmaShapeAsArray() != std::array<int64_t, 3>{16, 8, 16} ||
        a.getShape() != ArrayRef<int64_t>{4, 2} || !c.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "not an m16n8k16 bf16 x bf16 + f32 mma");
    Location loc = op.getLoc();
    SmallVector<Value> args;
    appendPairsAsI32(rewriter, loc, op.getMatrixA(), args);
    appendPairsAsI32(rewriter, loc, op.getMatrixB(), args);
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t col = 0; col < 2; ++col)
        args.push_back(
            rewriter.create<vector::ExtractOp>(loc, op.getMatrixC(), ArrayRef<int64_t>{row, col}));
    Type f32 = rewriter.getF32Type();
    auto resultType = LLVM::LLVMStructType::getLiteral(getContext(), {f32, f32, f32, f32});
    Value d = rewriter
                  .create<LLVM::CallIntrinsicOp>(loc, resultType,
                                                 "llvm.nvvm.mma.m16n8k16.row.col.bf16", args)
                  .getResult(0);
    Value result = rewriter.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(c, rewriter.getF32FloatAttr(0)));
    for (int64_t i = 0; i < 4; ++i) {
      Value x = rewriter.create<LLVM::ExtractValueOp>(loc, d, i);
      result = rewriter.create<vector::InsertOp>(loc, x, result, ArrayRef<int64_t>{i / 2, i % 2});
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

// A unary f32 math op as the NVVM intrinsic `Name`, element by element.
template <class MathOp, const char* Name> struct UnaryToIntrinsic : OpRewritePattern<MathOp> {
  using OpRewritePattern<MathOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MathOp op, PatternRewriter& rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return rewriter.notifyMatchFailure(op, "the intrinsic takes f32");
    Location loc = op.getLoc();
    auto intrinsic = [&](Value x) -> Value {
      return rewriter.create<LLVM::CallIntrinsicOp>(loc, rewriter.getF32Type(), Name, ValueRange{x})
          .getResult(0);
    };
    auto vector = dyn_cast<VectorType>(type);
    if (!vector) {
      rewriter.replaceOp(op, intrinsic(op.getOperand()));
      return success();
    }
    // Element by element, in the vector's shape.
    auto flat = VectorType::get({vector.getNumElements()}, vector.getElementType());
    Value in = rewriter.create<vector::ShapeCastOp>(loc, flat, op.getOperand());
    Value out = in;
    for (int64_t i = 0; i < flat.getNumElements(); ++i)
      out = rewriter.create<vector::InsertOp>(
          loc, intrinsic(rewriter.create<vector::ExtractOp>(loc, in, i)), out, i);
    rewriter.replaceOpWithNewOp<vector::ShapeCastOp>(op, vector, out);
    return success();
  }
};

constexpr char kExp2[] = "llvm.nvvm.ex2.approx.ftz.f";
constexpr char kSqrt[] = "llvm.nvvm.sqrt.rn.f";

struct LowerToNvvmIntrinsicsPass
    : attnc::attn::impl::AttnLowerToNvvmIntrinsicsBase<LowerToNvvmIntrinsicsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Bf16MmaToIntrinsic, UnaryToIntrinsic<math::Exp2Op, kExp2>,
                 UnaryToIntrinsic<math::SqrtOp, kSqrt>>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
