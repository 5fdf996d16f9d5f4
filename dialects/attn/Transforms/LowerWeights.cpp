//===- LowerWeights.cpp - attn.weights as a phase of its own ------------------===//
//
// The weights need each row's finished lse, so they are a second pass over the keys, in a task
// loop that runs after the attention's (a kernel phase). A task takes `rows` query rows of one
// batch and head, the rows in vector lanes as in the update (LowerUpdate.cpp):
//
//   packedQ = scale * Q[rows, :]^T                      once per task (attn.pack_query)
//   S[j, :] = modifiers(sum_c packedQ[c, :] * K[j, c])  keyUnroll keys at a time (ScoreTerms)
//   W[:, j] = kept(j) ? exp(S[j, :] - lse[:]) : 0       (0 too where lse = -inf)
//
// for the keys causal, window and padding can keep (keptKeyRange, as tile_keys visits); the
// other keys' weights are 0 without a score. W is stored lane by lane: its strides are known
// only at run time.
//
//===---------------------------------------------------------------------------===//
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
  Value batch() { return op.getOffsets()[0]; }
  Value head() { return op.getOffsets()[1]; }
  Value firstRow() { return op.getOffsets()[2]; }
  Value column(int64_t r) { return indexConstant(b, r * lanes); }
  // Zero weights for keys [begin, end) of every row of the task.
  void emitZeros(Value begin, Value end);
  // The weights of keys [begin, end), `unroll` keys per step (end - begin divisible by it).
  void emitKeys(Value begin, Value end, int64_t unroll);
  // Stores the lanes of vector r (rows firstRow + r * lanes + lane) that are rows of the task.
  void storeLanes(ImplicitLocOpBuilder& ib, Value weights, int64_t r, Value key);

  ImplicitLocOpBuilder& b;
  WeightsOp op;
  const int64_t lanes, rows, vectors, keyUnroll;
  VectorType vector, vectorI32;
  Value packed;             // scale * Q^T: [d_k, rows] f32 on the task's stack
  Value kvHead;             // h / (H / H_kv)
  Value positions0;         // i0 + off + lane, the key positions of the first vector's rows
  SmallVector<Value> lse;   // per vector of rows
  std::optional<ScoreTerms> terms;
};

void WeightsLowering::emitZeros(Value begin, Value end) {
  Value zero = f32Constant(b, 0);
  forRange(b, indexConstant(b, 0), op.getSizes()[2], [&](ImplicitLocOpBuilder& rb, Value r) {
    Value row = rb.create<arith::AddIOp>(firstRow(), r);
    forRange(rb, begin, end, [&](ImplicitLocOpBuilder& kb, Value key) {
      kb.create<memref::StoreOp>(zero, op.getWeights(), ValueRange{batch(), head(), row, key});
    });
  });
}

void WeightsLowering::storeLanes(ImplicitLocOpBuilder& ib, Value weights, int64_t r, Value key) {
  // lanes of vector r that are rows of the task: clamp(count - r * lanes, 0, lanes)
  Value live = ib.create<arith::SubIOp>(op.getSizes()[2], column(r));
  live = ib.create<arith::MaxSIOp>(ib.create<arith::MinSIOp>(live, indexConstant(ib, lanes)),
                                   indexConstant(ib, 0));
  Value first = ib.create<arith::AddIOp>(firstRow(), column(r));
  forRange(ib, indexConstant(ib, 0), live, [&](ImplicitLocOpBuilder& lb, Value lane) {
    Value w = lb.create<vector::ExtractElementOp>(weights, lane);
    lb.create<memref::StoreOp>(w, op.getWeights(),
                               ValueRange{batch(), head(), lb.create<arith::AddIOp>(first, lane),
                                          key});
  });
}

void WeightsLowering::emitKeys(Value begin, Value end, int64_t unroll) {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  constexpr double kInf = std::numeric_limits<double>::infinity();
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
            Value rowPositions = ib.create<arith::AddIOp>(
                positions0, splatConstant(ib, vectorI32, static_cast<double>(r * lanes)));
            auto gather = [&](ImplicitLocOpBuilder& gb, Value buffer) {
              return gatherQueryRows(gb, buffer, batch(), head(),
                                     gb.create<arith::AddIOp>(firstRow(), column(r)),
                                     op.getSeqQ(), key, lanes);
            };
            Value s = terms->modified(ib, dot.getResult(u * vectors + r), rowPositions,
                                      keyPositions, gather);
            Value keep = terms->kept(ib, s, rowPositions, keyPositions, gather,
                                     ScoreTerms::MaskMod::Evaluate);
            // p = exp(s - lse) at kept keys, as the reference: NaN in a NaN row (lse NaN) even
            // where s = -inf, 0 in a row that kept nothing finite (lse = -inf).
            Value zeros = f32Splat(ib, lanes, 0);
            Value p = ib.create<math::ExpOp>(ib.create<arith::SubFOp>(s, lse[r]));
            Value empty = ib.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, lse[r],
                                                   f32Splat(ib, lanes, -kInf));
            p = ib.create<arith::SelectOp>(empty, zeros, p);
            if (keep)
              p = ib.create<arith::SelectOp>(keep, p, zeros);
            storeLanes(ib, p, r, key);
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
  const int64_t group = op.getNumHeads() / op.getKey().getType().getDimSize(1);
  kvHead = b.create<arith::DivUIOp>(head(), indexConstant(b, group));

  // lse of each lane's row, rows past Tq reading the last (never stored).
  Value lastRow = b.create<arith::SubIOp>(op.getSeqQ(), indexConstant(b, 1));
  for (int64_t r = 0; r < vectors; ++r) {
    Value row = f32Splat(b, lanes, 0);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      Value i = b.create<arith::MinSIOp>(
          b.create<arith::AddIOp>(firstRow(), indexConstant(b, r * lanes + lane)), lastRow);
      row = b.create<vector::InsertOp>(
          b.create<memref::LoadOp>(op.getLse(), ValueRange{batch(), head(), i}), row, lane);
    }
    lse.push_back(row);
  }

  Value off = ScoreTerms::positionOffset(b, op);
  Value first =
      b.create<arith::IndexCastOp>(b.getI32Type(), b.create<arith::AddIOp>(firstRow(), off));
  SmallVector<int32_t> iota(lanes);
  std::iota(iota.begin(), iota.end(), 0);
  positions0 = b.create<arith::AddIOp>(
      b.create<vector::BroadcastOp>(vectorI32, first),
      b.create<arith::ConstantOp>(DenseElementsAttr::get(vectorI32, ArrayRef<int32_t>(iota))));
  terms.emplace(b, op, batch(), head());

  // Scores for the keys the masks can keep, whole groups of keyUnroll keys then one at a time;
  // zeros on either side.
  Value keyBegin = op.getOffsets()[3];
  Value keyEnd = b.create<arith::AddIOp>(keyBegin, op.getSizes()[3]);
  auto [lo, hi] = keptKeyRange(b, op);
  lo = b.create<arith::MinSIOp>(lo, keyEnd);
  hi = b.create<arith::MaxSIOp>(hi, lo);
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
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();

  // One task per (batch, head, tile of `rows` query rows): task = (b * nh + h) * tiles + tile.
  Value tileRows = indexConstant(b, rows);
  Value tiles = b.create<arith::CeilDivUIOp>(sizes[2], tileRows);
  Value tasks = b.create<arith::MulIOp>(b.create<arith::MulIOp>(sizes[0], sizes[1]), tiles);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  Value task = forall.getInductionVar(0);
  Value tile = b.create<arith::RemUIOp>(task, tiles);
  Value batchHead = b.create<arith::DivUIOp>(task, tiles);
  Value head = b.create<arith::AddIOp>(offsets[1], b.create<arith::RemUIOp>(batchHead, sizes[1]));
  Value batch = b.create<arith::AddIOp>(offsets[0], b.create<arith::DivUIOp>(batchHead, sizes[1]));
  Value row = b.create<arith::AddIOp>(offsets[2], b.create<arith::MulIOp>(tile, tileRows));
  Value end = b.create<arith::AddIOp>(offsets[2], sizes[2]);
  Value count = b.create<arith::MinSIOp>(tileRows, b.create<arith::SubIOp>(end, row));

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
