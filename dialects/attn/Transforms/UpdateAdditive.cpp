//===- UpdateAdditive.cpp - the update's additive score ------------------------===//
//
// Bahdanau's score of a tile's rows, S[j, :] = sum_c w_c tanh(Q^T[c, :] + K[j, c]) with
// w_c = scale v_a[c] and Q^T the packed hidden rows (unscaled), through exponentials
// (AdditiveKeys.h):
//
//   S[j, :] = sum_c w_c + sum_c (-2 w_c) / (E(Q^T[c, :]) E(K[j, c]) + 1)
//
// a register tile of an FMA, a division and an FMA per element, E(Q^T) and -2 w_c formed once
// per task on its stack and E(K) once per kernel by AdditiveKeys' phase. A block whose rows or keys
// pass the bound, or whose weights are past kWeightBound, takes tanh(Q^T[c, :] + K[j, c]) itself.
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/AdditiveKeys.h"
#include "attn/Transforms/UpdateLowering.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace attnc::attn::prefill {

UpdateLowering::HiddenRows UpdateLowering::emitHiddenRows() {
  const int64_t dims = op.getKey().getType().getDimSize(3);
  HiddenRows hidden;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(taskStackBlock(op));
  hidden.exponentials = b.create<memref::AllocaOp>(MemRefType::get({dims, rows}, b.getF32Type()));
  hidden.stepWeights = b.create<memref::AllocaOp>(MemRefType::get({dims}, b.getF32Type()));
  b.setInsertionPoint(beforeKeyLoop());
  // Carried: each row vector's largest magnitude, then sum_c w_c and max_c |w_c|.
  SmallVector<Value> init(vectors, f32Splat(b, lanes, 0));
  init.append({f32Constant(b, 0), f32Constant(b, 0)});
  SmallVector<Value> folded = foldRange(
      b, indexConstant(b, 0), indexConstant(b, dims), init,
      [&](ImplicitLocOpBuilder& cb, Value c, ValueRange running) {
        SmallVector<Value> next;
        for (int64_t r = 0; r < vectors; ++r) {
          Value q = cb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{c, column(r)});
          cb.create<vector::StoreOp>(boundedExponential(cb, q), hidden.exponentials,
                                     ValueRange{c, column(r)});
          next.push_back(cb.create<arith::MaximumFOp>(running[r], cb.create<math::AbsFOp>(q)));
        }
        Value w = ScoreTerms::additiveWeight(cb, op, op.getOffsets()[1], c);
        cb.create<memref::StoreOp>(cb.create<arith::MulFOp>(w, f32Constant(cb, -2.0)),
                                   hidden.stepWeights, c);
        next.push_back(cb.create<arith::AddFOp>(running[vectors], w));
        next.push_back(
            cb.create<arith::MaximumFOp>(running[vectors + 1], cb.create<math::AbsFOp>(w)));
        return next;
      });
  Value largest = folded[0];
  for (int64_t r = 1; r < vectors; ++r)
    largest = b.create<arith::MaximumFOp>(largest, folded[r]);
  // Weights past kWeightBound (inf, NaN) take tanh too: sum_c w_c - 2 w_c r would be inf - inf.
  hidden.inBound = b.create<arith::AndIOp>(
      b.create<arith::CmpFOp>(
          arith::CmpFPredicate::OLE,
          b.create<vector::ReductionOp>(vector::CombiningKind::MAXIMUMF, largest),
          f32Constant(b, kHiddenBound)),
      b.create<arith::CmpFOp>(arith::CmpFPredicate::OLE, folded[vectors + 1],
                              f32Constant(b, kWeightBound)));
  hidden.weightSum = folded[vectors];
  return hidden;
}

void UpdateLowering::emitAdditiveScores(const HiddenRows& hidden) {
  const int64_t dims = op.getKey().getType().getDimSize(3);
  Value batch = op.getOffsets()[0], magnitudes = indexConstant(b, dims);
  // Row d of the key exponentials holds each key's largest magnitude (NaN fails the bound).
  SmallVector<Value> largest = foldRange(
      b, keyBegin, keyCount, ValueRange{f32Constant(b, 0)},
      [&](ImplicitLocOpBuilder& jb, Value j, ValueRange running) -> SmallVector<Value> {
        Value m = jb.create<memref::LoadOp>(additiveKeys,
                                            ValueRange{batch, keyHead, magnitudes, keyAt(jb, j)});
        return {jb.create<arith::MaximumFOp>(running[0], m)};
      });
  Value inBound = b.create<arith::AndIOp>(
      hidden.inBound, b.create<arith::CmpFOp>(arith::CmpFPredicate::OLE, largest[0],
                                              f32Constant(b, kHiddenBound)));
  auto branch = b.create<scf::IfOp>(inBound, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  emitScoresInGroups(
      dims,
      [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc, ArrayRef<Value> keys) {
        return exponentialScoreStep(cb, c, acc, keys, hidden);
      },
      hidden.weightSum);
  b.setInsertionPoint(branch.elseBlock()->getTerminator());
  emitScoresInGroups(dims, [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                               ArrayRef<Value> keys) { return tanhScoreStep(cb, c, acc, keys); });
}

SmallVector<Value> UpdateLowering::exponentialScoreStep(ImplicitLocOpBuilder& cb, Value c,
                                                        ValueRange acc, ArrayRef<Value> keys,
                                                        const HiddenRows& hidden) {
  SmallVector<Value> rowsE, keysE;
  for (int64_t r = 0; r < vectors; ++r)
    rowsE.push_back(
        cb.create<vector::LoadOp>(vector, hidden.exponentials, ValueRange{c, column(r)}));
  for (Value key : keys)
    keysE.push_back(
        cb.create<memref::LoadOp>(additiveKeys, ValueRange{op.getOffsets()[0], keyHead, c, key}));
  Value weight = cb.create<memref::LoadOp>(hidden.stepWeights, c);
  return reciprocalUpdate(cb, rowsE, keysE, weight, acc);
}

SmallVector<Value> UpdateLowering::tanhScoreStep(ImplicitLocOpBuilder& cb, Value c,
                                                 ValueRange acc, ArrayRef<Value> keys) {
  SmallVector<Value> q, k;
  for (int64_t r = 0; r < vectors; ++r)
    q.push_back(cb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{c, column(r)}));
  for (Value key : keys)
    k.push_back(loadF32(cb, op.getKey(), {op.getOffsets()[0], keyHead, key, c}));
  return tanhUpdate(cb, q, k, ScoreTerms::additiveWeight(cb, op, op.getOffsets()[1], c), acc);
}

} // namespace attnc::attn::prefill
