//===- BackwardRowPhases.cpp - the backward's phases over query rows -------------===//
#include "attn/Transforms/BackwardRowPhases.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/BackwardSteps.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
namespace {

// D_i = sum_c dO_ic O_ic of one row.
Value rowDelta(ImplicitLocOpBuilder& rb, BackwardOp op, Value batch, Value head, Value row) {
  Value dv = indexConstant(rb, op.getValue().getType().getDimSize(3));
  return foldRange(rb, indexConstant(rb, 0), dv, {f32Constant(rb, 0)},
                   [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc) {
                     const SmallVector<Value, 4> indices{batch, head, row, c};
                     Value product =
                         cb.create<arith::MulFOp>(loadF32(cb, op.getGradOutput(), indices),
                                                  loadF32(cb, op.getOutput(), indices));
                     return SmallVector<Value>{cb.create<arith::AddFOp>(acc[0], product)};
                   })
      .front();
}

// A sink's probability in a row of log-sum-exp `lse`.
Value sinkProbability(ImplicitLocOpBuilder& rb, Value sink, Value lse) {
  // exp(sink - lse), 0 for a -inf sink (even in a row whose lse is -inf too); NaN stays.
  Value none = rb.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, sink,
                                        f32Constant(rb, -std::numeric_limits<double>::infinity()));
  return rb.create<arith::SelectOp>(none, f32Constant(rb, 0),
                                    rb.create<math::ExpOp>(rb.create<arith::SubFOp>(sink, lse)));
}

} // namespace

void emitDeltaPhase(ImplicitLocOpBuilder& b, BackwardOp op, int64_t rows, Value delta,
                    Value sinkParts) {
  const QueryTiles task = forEachQueryTile(b, op, rows);
  Value batch = task.batch, head = task.head, row = task.row;
  Value sink = op.getSinks() ? b.create<memref::LoadOp>(op.getSinks(), head).getResult() : Value();
  // With sinks, the tile's part of d sink = -sum_i exp(sink - lse_i) D_i, in row order.
  SmallVector<Value> part = {f32Constant(b, 0)};
  part =
      foldRange(b, indexConstant(b, 0), task.count, part,
                [&](ImplicitLocOpBuilder& rb, Value r, ValueRange carried) {
                  Value at = rb.create<arith::AddIOp>(row, r);
                  Value d = rowDelta(rb, op, batch, head, at);
                  rb.create<memref::StoreOp>(d, delta, ValueRange{batch, head, at});
                  if (!sink)
                    return llvm::to_vector(carried);
                  Value lse = rb.create<memref::LoadOp>(op.getLse(), ValueRange{batch, head, at});
                  Value weight = sinkProbability(rb, sink, lse);
                  return SmallVector<Value>{
                      rb.create<arith::AddFOp>(carried[0], rb.create<arith::MulFOp>(weight, d))};
                });
  if (sink) {
    Value tile = b.create<arith::DivUIOp>(row, indexConstant(b, rows));
    b.create<memref::StoreOp>(part[0], sinkParts, ValueRange{batch, head, tile});
  }
  b.setInsertionPointAfter(task.loop);
}

void emitQueryGradPhase(ImplicitLocOpBuilder& b, BackwardOp op, int64_t rows, Value queryGrad,
                        Value chunks) {
  const QueryTiles task = forEachQueryTile(b, op, rows);
  storeSummedTransposed(b, op.getGradQuery(), queryGrad, task.batch, task.head, task.row,
                        task.count, chunks, b.create<memref::DimOp>(op.getQuery(), 0), rows);
  b.setInsertionPointAfter(task.loop);
}

void emitSinkGradientPhase(ImplicitLocOpBuilder& b, BackwardOp op, Value sinkParts) {
  // A task per head: grad_sinks[h] = -sum_b sum_t part[b, h, t], in order.
  Value batches = b.create<memref::DimOp>(op.getQuery(), 0);
  Value parts = b.create<memref::DimOp>(sinkParts, 2);
  Value heads = unfoldedTaskCount(b, indexConstant(b, op.getNumHeads()), batches);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{heads}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  Value head = forall.getInductionVar(0);
  Value sum =
      foldRange(
          b, indexConstant(b, 0), batches, {f32Constant(b, 0)},
          [&](ImplicitLocOpBuilder& bb, Value batch, ValueRange outer) {
            return foldRange(
                bb, indexConstant(bb, 0), parts, outer,
                [&](ImplicitLocOpBuilder& tb, Value t, ValueRange acc) {
                  Value part = tb.create<memref::LoadOp>(sinkParts, ValueRange{batch, head, t});
                  return SmallVector<Value>{tb.create<arith::AddFOp>(acc[0], part)};
                });
          })
          .front();
  b.create<memref::StoreOp>(b.create<arith::NegFOp>(sum), op.getGradSinks(), head);
  b.setInsertionPointAfter(forall);
}

} // namespace attnc::attn
