//===- LowerWeights.cpp - attn.weights as a phase of its own ------------------===//
//
// The weights need each row's finished lse, so they are a second pass over the keys, in a task
// loop that runs after the attention's (a kernel phase). A task takes `rows` query rows of one
// batch and head, the rows in vector lanes as in the update (LowerUpdate.cpp):
//
//   packedQ = scale * Q[rows, :]^T                      once per task (attn.pack_query)
//   S[j, :] = modifiers(sum_c packedQ[c, :] * K[j, c])  keyUnroll keys at a time (ScoreTerms)
//   W[:, j] = kept(j) ? exp(S[j, :] - lse[:]) : 0       (0 in a row whose lse is -inf)
//
// for the keys the mask's affine terms can keep (keptKeyRange, KeyRange.h, as tile_keys
// visits); the other keys' weights are 0 without a score. W is stored lane by lane: its strides
// are known only at run time.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/LoweringUtils.h"
#include "attn/Transforms/ScoreTerms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>
#include <numeric>

using namespace mlir;

namespace attnc::attn {
namespace {

// One task's weights: `op` narrowed to one batch, head and tile of at most `rows` rows.
class WeightsLowering {
public:
  WeightsLowering(ImplicitLocOpBuilder& b, WeightsOp op, int64_t rows,
                  const VectorOptions& options)
      : b(b), op(op), lanes(options.vectorWidth), rows(rows), vectors(rows / lanes),
        keyUnroll(options.keyUnroll), vector(VectorType::get({lanes}, b.getF32Type())),
        vectorI32(VectorType::get({lanes}, b.getI32Type())) {}

  void emit();

private:
  // What a vector of query rows uses at every key, formed once per task.
  struct RowVector {
    Value firstRow;  // i0 + r * lanes
    Value positions; // its rows' key positions i + off (i32)
    Value lse;       // its rows' lse, -inf made +inf: exp(s - lse) is then 0 in a row that
                     // kept nothing (every kept s is -inf there), NaN in a NaN row
    Value liveLanes; // its lanes that are rows of the task: clamp(count - r * lanes, 0, lanes)
  };

  Value batch() { return op.getOffsets()[0]; }
  Value head() { return op.getOffsets()[1]; }
  Value firstRow() { return op.getOffsets()[2]; }
  Value column(int64_t r) { return indexConstant(b, r * lanes); }
  RowVector rowVector(int64_t r, Value off);
  // Zero weights for keys [begin, end) of every row of the task.
  void emitZeros(Value begin, Value end);
  // The weights of keys [begin, end), `unroll` keys per step (end - begin divisible by it).
  void emitKeys(Value begin, Value end, int64_t unroll);
  // Stores the lanes of `weights` that are rows of the task, at `key`.
  void storeLanes(ImplicitLocOpBuilder& ib, Value weights, const RowVector& v, Value key);

  ImplicitLocOpBuilder& b;
  WeightsOp op;
  const int64_t lanes, rows, vectors, keyUnroll;
  VectorType vector, vectorI32;
  Value packed; // scale * Q^T: [d_k, rows] f32 on the task's stack
  Value kvHead; // h / (H / H_kv)
  SmallVector<RowVector> rowVectors;
  std::optional<ScoreTerms> terms;
};

WeightsLowering::RowVector WeightsLowering::rowVector(int64_t r, Value off) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  RowVector v;
  v.firstRow = b.create<arith::AddIOp>(firstRow(), column(r));
  SmallVector<int32_t> iota(lanes);
  std::iota(iota.begin(), iota.end(), 0);
  v.positions = b.create<arith::AddIOp>(
      b.create<vector::BroadcastOp>(
          vectorI32, b.create<arith::IndexCastOp>(b.getI32Type(),
                                                  b.create<arith::AddIOp>(v.firstRow, off))),
      b.create<arith::ConstantOp>(DenseElementsAttr::get(vectorI32, ArrayRef<int32_t>(iota))));
  Value lse = gatherRows(b, v.firstRow, op.getSeqQ(), lanes, b.getF32Type(),
                         [&](ImplicitLocOpBuilder& lb, Value i) -> Value {
                           return lb.create<memref::LoadOp>(op.getLse(),
                                                            ValueRange{batch(), head(), i});
                         });
  Value empty =
      b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, lse, f32Splat(b, lanes, -kInf));
  v.lse = b.create<arith::SelectOp>(empty, f32Splat(b, lanes, kInf), lse);
  Value live = b.create<arith::SubIOp>(op.getSizes()[2], column(r));
  v.liveLanes = b.create<arith::MaxSIOp>(b.create<arith::MinSIOp>(live, indexConstant(b, lanes)),
                                     indexConstant(b, 0));
  return v;
}

void WeightsLowering::emitZeros(Value begin, Value end) {
  Value zero = f32Constant(b, 0);
  forRange(b, indexConstant(b, 0), op.getSizes()[2], [&](ImplicitLocOpBuilder& rb, Value r) {
    Value row = rb.create<arith::AddIOp>(firstRow(), r);
    forRange(rb, begin, end, [&](ImplicitLocOpBuilder& kb, Value key) {
      kb.create<memref::StoreOp>(zero, op.getWeights(), ValueRange{batch(), head(), row, key});
    });
  });
}

void WeightsLowering::storeLanes(ImplicitLocOpBuilder& ib, Value weights, const RowVector& v,
                                 Value key) {
  forRange(ib, indexConstant(ib, 0), v.liveLanes, [&](ImplicitLocOpBuilder& lb, Value lane) {
    Value w = lb.create<vector::ExtractElementOp>(weights, lane);
    Value row = lb.create<arith::AddIOp>(v.firstRow, lane);
    lb.create<memref::StoreOp>(w, op.getWeights(), ValueRange{batch(), head(), row, key});
  });
}

void WeightsLowering::emitKeys(Value begin, Value end, int64_t unroll) {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  b.create<scf::ForOp>(
      begin, end, indexConstant(b, unroll), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> keys;
        for (int64_t u = 0; u < unroll; ++u)
          keys.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, u)));
        SmallVector<Value> zeros(unroll * vectors, f32Splat(ib, lanes, 0));
        auto dot = ib.create<scf::ForOp>(
            indexConstant(ib, 0), indexConstant(ib, dk), indexConstant(ib, 1), zeros,
            [&](OpBuilder& n2, Location l2, Value c, ValueRange acc) {
              ImplicitLocOpBuilder cb(l2, n2);
              SmallVector<Value> q, k;
              for (int64_t r = 0; r < vectors; ++r)
                q.push_back(cb.create<vector::LoadOp>(vector, packed, ValueRange{c, column(r)}));
              for (Value key : keys)
                k.push_back(loadF32(cb, op.getKey(), {batch(), kvHead, key, c}));
              cb.create<scf::YieldOp>(rankOneUpdate(cb, q, k, acc));
            });
        for (int64_t u = 0; u < unroll; ++u) {
          Value key = keys[u];
          Value keyPositions = ib.create<vector::BroadcastOp>(
              vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), key));
          for (int64_t r = 0; r < vectors; ++r) {
            const RowVector& v = rowVectors[r];
            Value s =
                terms->modified(ib, dot.getResult(u * vectors + r), v.positions, keyPositions);
            Value keep =
                terms->kept(ib, s, v.positions, keyPositions, ScoreTerms::MaskMod::Evaluate);
            // p = exp(s - lse) at kept keys, as the reference: NaN in a NaN row even where
            // s = -inf, 0 in a row that kept nothing (RowVector::lse).
            Value p = ib.create<math::ExpOp>(ib.create<arith::SubFOp>(s, v.lse));
            if (keep)
              p = ib.create<arith::SelectOp>(keep, p, f32Splat(ib, lanes, 0));
            storeLanes(ib, p, v, key);
          }
        }
        ib.create<scf::YieldOp>();
      });
}

void WeightsLowering::emit() {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(taskStackBlock(op));
    packed = b.create<memref::AllocaOp>(MemRefType::get({dk, rows}, b.getF32Type()));
  }
  auto pack = b.create<PackQueryOp>(op.getQuery(), batch(), head(), firstRow(), op.getSizes()[2],
                                    packed, op.getScaleAttr());
  lowerPack(b, pack);
  pack.erase();
  kvHead = ScoreTerms::kvHeadOf(b, op, head());

  Value off = ScoreTerms::positionOffset(b, op);
  for (int64_t r = 0; r < vectors; ++r)
    rowVectors.push_back(rowVector(r, off));
  terms.emplace(b, op, batch(), head());

  // Scores for the keys the masks can keep, whole groups of keyUnroll keys then one at a time;
  // zeros on either side.
  Value keyBegin = op.getOffsets()[3];
  Value keyEnd = b.create<arith::AddIOp>(keyBegin, op.getSizes()[3]);
  auto [lo, hi] = keptKeyRange(b, op);
  Value unroll = indexConstant(b, keyUnroll);
  Value whole = b.create<arith::SubIOp>(
      hi, b.create<arith::RemUIOp>(b.create<arith::SubIOp>(hi, lo), unroll));
  emitZeros(keyBegin, lo);
  emitKeys(lo, whole, keyUnroll);
  emitKeys(whole, hi, 1);
  emitZeros(hi, keyEnd);
}

} // namespace

FailureOr<scf::ForallOp> lowerWeights(RewriterBase& rewriter, WeightsOp op, int64_t rows,
                                      const VectorOptions& options) {
  if (options.vectorWidth <= 0 || rows <= 0 || rows % options.vectorWidth != 0)
    return op.emitOpError() << "lower_weights: the tile's " << rows
                            << " rows must be a positive multiple of the vector width "
                            << options.vectorWidth;
  if (options.keyUnroll <= 0)
    return op.emitOpError() << "lower_weights: key_unroll must be positive";
  if (op.getBlockTable() || op.getKeyScale())
    return op.emitOpError() << "lower_weights: a paged or quantized cache needs "
                               "transform.attn.gather_cache first";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();

  auto [forall, batch, head, row, count] = forEachQueryTile(b, op, rows);

  // The task's op: the same weights over its batch, head and rows, lowered in place.
  auto taskOp = cast<WeightsOp>(rewriter.clone(*op));
  rewriter.moveOpBefore(taskOp, b.getInsertionBlock(), b.getInsertionPoint());
  Value one = indexConstant(b, 1);
  taskOp.getOffsetsMutable().assign({batch, head, row, offsets[3]});
  taskOp.getSizesMutable().assign({one, one, count, sizes[3]});
  b.setInsertionPoint(taskOp);
  WeightsLowering(b, taskOp, rows, options).emit();
  rewriter.eraseOp(taskOp);
  rewriter.eraseOp(op);
  return forall;
}

} // namespace attnc::attn
