//===- AdditiveKeys.cpp - the exponentials of Bahdanau's hidden key rows -------===//
#include "attn/Transforms/AdditiveKeys.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {

namespace {

// A constant of x's f32 vector type.
Value constantLike(ImplicitLocOpBuilder& b, Value x, double value) {
  return f32Splat(b, cast<VectorType>(x.getType()).getNumElements(), value);
}

// The phase's task: `lanes` keys from `first` of head h in batch entry bi, each hidden dim's
// exponentials as one vector, then the keys' largest magnitudes.
void emitKeysTask(ImplicitLocOpBuilder& b, Value keys, Value out, Value bi, Value h, Value first,
                  int64_t lanes) {
  const int64_t dims = cast<MemRefType>(keys.getType()).getDimSize(3);
  Value lastKey = b.create<arith::SubIOp>(b.create<memref::DimOp>(keys, 2), indexConstant(b, 1));
  SmallVector<Value> largest = foldRange(
      b, indexConstant(b, 0), indexConstant(b, dims), ValueRange{f32Splat(b, lanes, 0)},
      [&](ImplicitLocOpBuilder& cb, Value c, ValueRange running) -> SmallVector<Value> {
        // Keys past Tk read the last key (their lanes are never attended).
        Value x = f32Splat(cb, lanes, 0);
        for (int64_t lane = 0; lane < lanes; ++lane) {
          Value j = cb.create<arith::MinUIOp>(
              cb.create<arith::AddIOp>(first, indexConstant(cb, lane)), lastKey);
          x = cb.create<vector::InsertOp>(loadF32(cb, keys, {bi, h, j, c}), x, lane);
        }
        cb.create<vector::StoreOp>(boundedExponential(cb, x), out, ValueRange{bi, h, c, first});
        return {cb.create<arith::MaximumFOp>(running[0], cb.create<math::AbsFOp>(x))};
      });
  b.create<vector::StoreOp>(largest[0], out, ValueRange{bi, h, indexConstant(b, dims), first});
}

} // namespace

Value boundedExponential(ImplicitLocOpBuilder& b, Value x) {
  Value bounded = b.create<arith::MinimumFOp>(
      b.create<arith::MaximumFOp>(x, constantLike(b, x, -kHiddenBound)),
      constantLike(b, x, kHiddenBound));
  return b.create<math::ExpOp>(b.create<arith::MulFOp>(bounded, constantLike(b, x, 2.0)));
}

Value layOutAdditiveKeys(RewriterBase& rewriter, OnlineUpdateOp op, int64_t lanes) {
  Block& body = op->getParentOfType<func::FuncOp>().getBody().front();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  TypedValue<MemRefType> keys = op.getKey();
  const int64_t heads = keys.getType().getDimSize(1), dims = keys.getType().getDimSize(3);
  const int64_t dynamic = ShapedType::kDynamic;
  // Tk rounded up to whole chunks of `lanes` keys.
  Value out =
      workspaceBuffer(b, body, MemRefType::get({dynamic, heads, dims + 1, dynamic}, b.getF32Type()),
                      [&](ImplicitLocOpBuilder& at) {
                        Value chunks = at.create<arith::CeilDivUIOp>(
                            at.create<memref::DimOp>(keys, 2), indexConstant(at, lanes));
                        return SmallVector<Value>{
                            at.create<memref::DimOp>(keys, 0),
                            at.create<arith::MulIOp>(chunks, indexConstant(at, lanes)).getResult()};
                      });
  rowChunkPhase(b, body.findAncestorOpInBlock(*op), keys, lanes,
                [&](ImplicitLocOpBuilder& tb, Value bi, Value h, Value first) {
                  emitKeysTask(tb, keys, out, bi, h, first, lanes);
                });
  return out;
}

} // namespace attnc::attn
