//===- LowerWeights.cpp - attn.weights as a phase of its own ------------------===//
//
// The weights are a second pass over the keys, in a task loop that runs after the attention's
// (a kernel phase). A task takes `rows` query rows of one batch and head, the rows in vector
// lanes as in the update (LowerUpdate.cpp), and sweeps its keys twice:
//
//   packedQ = scale * Q[rows, :]^T                      once per task (attn.pack_query)
//   S[j, :] = modifiers(sum_c packedQ[c, :] * K[j, c])  keyUnroll keys at a time (ScoreTerms)
//             (additive: sum_c scale w_c tanh(Q[rows, c]^T + K[j, c]), Q^T packed unscaled)
//   m, L    = max and sum_j e^(S[j, :] - m) over kept keys and the sink   (first sweep)
//   W[:, j] = kept(j) ? e^(S[j, :] - m) / L : 0                          (second sweep)
//
// for the keys the mask's affine terms can keep (keptKeyRange, KeyRange.h, as tile_keys
// visits); the other keys' weights are 0 without a score. Not e^(S - lse) from the attention's
// lse: where |m| dwarfs log L (a score_mod's shift of -1e20, a -1e30 mask value), lse = m + log L
// rounds to m and the weights no longer sum to one (docs/spec.md, "Softmax"). W is stored lane
// by lane: its strides are known only at run time.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/LowerStateOps.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
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

constexpr double kInf = std::numeric_limits<double>::infinity();

// Folds the scores s of one key (-inf where masked) into the rows' (m, l): m' = max(m, s) and
// l' = l e^(m - m') + e^(s - m'), of whose factors one is 1 and the other e^-|m - s|, so one exp
// a score (the update's, whose results below 2^-125 do not matter against l' >= 1). A -inf score
// leaves l as it is (e^-|m - s| is NaN where m is -inf too); NaN reaches m (maximumf) and l, and
// +inf reaches m, which poisons the row (rowNormaliser).
std::pair<Value, Value> foldScore(ImplicitLocOpBuilder& b, Value m, Value l, Value s,
                                  int64_t lanes) {
  Value grew = b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, s, m);
  Value shrink = probabilityExp(
      b, b.create<arith::NegFOp>(b.create<math::AbsFOp>(b.create<arith::SubFOp>(m, s))));
  Value sum =
      b.create<arith::SelectOp>(grew, b.create<math::FmaOp>(l, shrink, f32Splat(b, lanes, 1)),
                                b.create<arith::AddFOp>(l, shrink));
  Value masked = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, f32Splat(b, lanes, -kInf));
  return {b.create<arith::MaximumFOp>(m, s), b.create<arith::SelectOp>(masked, l, sum)};
}

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
    Value liveLanes; // its lanes that are rows of the task: clamp(count - r * lanes, 0, lanes)
    Value max;       // the max its weights are taken against (rowNormaliser)
    Value inverse;   // 1 / L, 0 where L = 0
  };
  // The scores of a few keys, at [u * vectors + r] for key u and row vector r, and where the
  // masks keep them (null: everywhere).
  struct Scores {
    SmallVector<Value> score, keep;
  };

  Value batch() { return op.getOffsets()[0]; }
  Value head() { return op.getOffsets()[1]; }
  Value firstRow() { return op.getOffsets()[2]; }
  Value column(int64_t r) { return indexConstant(b, r * lanes); }
  RowVector rowVector(int64_t r, Value off);
  // Every row vector's (m, l) before any key: the sink's (m = sink, l = 1, or l = 0 where the
  // sink is -inf), or (-inf, 0) without sinks; m0, l0, m1, l1, ...
  SmallVector<Value> initialState();
  // The row vector's (m, l) as its weights e^(s - m) / l use them: m = +inf (a +inf score) is
  // made NaN, so the row's kept weights are NaN, as a NaN row's are; m = -inf (the row kept
  // only -inf scores, l = 0) is made 0, and 1 / l is 0, so they are e^-inf * 0 = 0.
  void rowNormaliser(RowVector& v, Value m, Value l);
  // The modified scores of `keys` for every row vector, and the masks' verdicts on them.
  Scores scoresAt(ImplicitLocOpBuilder& ib, ArrayRef<Value> keys);
  // Zero weights for keys [begin, end) of every row of the task.
  void emitZeros(Value begin, Value end);
  // Folds keys [begin, end) into `state` (initialState's layout), `unroll` keys per step
  // (end - begin divisible by it).
  SmallVector<Value> emitSums(Value begin, Value end, int64_t unroll, ValueRange state);
  // The weights of keys [begin, end), `unroll` keys per step (end - begin divisible by it).
  void emitKeys(Value begin, Value end, int64_t unroll);
  // The keys from j, `unroll` of them.
  SmallVector<Value> keysFrom(ImplicitLocOpBuilder& ib, Value j, int64_t unroll);
  // Stores the lanes of `weights` that are rows of the task, at `key`.
  void storeLanes(ImplicitLocOpBuilder& ib, Value weights, const RowVector& v, Value key);

  ImplicitLocOpBuilder& b;
  WeightsOp op;
  const int64_t lanes, rows, vectors, keyUnroll;
  VectorType vector, vectorI32;
  Value packed;  // scale * Q^T (Q^T for additive): [d_k, rows] f32 on the task's stack
  Value keyHead; // h / (H / H_kv), or h for additive keys
  SmallVector<RowVector> rowVectors;
  std::optional<ScoreTerms> terms;
};

WeightsLowering::RowVector WeightsLowering::rowVector(int64_t r, Value off) {
  RowVector v;
  v.firstRow = b.create<arith::AddIOp>(firstRow(), column(r));
  SmallVector<int32_t> iota(lanes);
  std::iota(iota.begin(), iota.end(), 0);
  v.positions = b.create<arith::AddIOp>(
      b.create<vector::BroadcastOp>(
          vectorI32, b.create<arith::IndexCastOp>(b.getI32Type(),
                                                  b.create<arith::AddIOp>(v.firstRow, off))),
      b.create<arith::ConstantOp>(DenseElementsAttr::get(vectorI32, ArrayRef<int32_t>(iota))));
  Value live = b.create<arith::SubIOp>(op.getSizes()[2], column(r));
  v.liveLanes = b.create<arith::MaxSIOp>(b.create<arith::MinSIOp>(live, indexConstant(b, lanes)),
                                     indexConstant(b, 0));
  return v;
}

SmallVector<Value> WeightsLowering::initialState() {
  Value m = f32Splat(b, lanes, -kInf), l = f32Splat(b, lanes, 0);
  if (Value sinks = op.getSinks()) {
    m = b.create<vector::BroadcastOp>(vector, b.create<memref::LoadOp>(sinks, head()));
    Value none = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, m, f32Splat(b, lanes, -kInf));
    l = b.create<arith::SelectOp>(none, l, f32Splat(b, lanes, 1));
  }
  SmallVector<Value> state;
  for (int64_t r = 0; r < vectors; ++r)
    state.append({m, l});
  return state;
}

void WeightsLowering::rowNormaliser(RowVector& v, Value m, Value l) {
  const OnlineState state;
  Value infinite = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, m, f32Splat(b, lanes, kInf));
  v.max = b.create<arith::SelectOp>(infinite,
                                    f32Splat(b, lanes, std::numeric_limits<double>::quiet_NaN()),
                                    state.finiteMax(b, m));
  v.inverse = state.inverseSum(b, l);
}

SmallVector<Value> WeightsLowering::keysFrom(ImplicitLocOpBuilder& ib, Value j, int64_t unroll) {
  SmallVector<Value> keys;
  for (int64_t u = 0; u < unroll; ++u)
    keys.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, u)));
  return keys;
}

WeightsLowering::Scores WeightsLowering::scoresAt(ImplicitLocOpBuilder& ib, ArrayRef<Value> keys) {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  const int64_t unroll = keys.size();
  SmallVector<Value> zeros(unroll * vectors, f32Splat(ib, lanes, 0));
  auto dot = ib.create<scf::ForOp>(
      indexConstant(ib, 0), indexConstant(ib, dk), indexConstant(ib, 1), zeros,
      [&](OpBuilder& nested, Location loc, Value c, ValueRange acc) {
        ImplicitLocOpBuilder cb(loc, nested);
        SmallVector<Value> q, k;
        for (int64_t r = 0; r < vectors; ++r)
          q.push_back(cb.create<vector::LoadOp>(vector, packed, ValueRange{c, column(r)}));
        for (Value key : keys)
          k.push_back(loadF32(cb, op.getKey(), {batch(), keyHead, key, c}));
        if (!op.getScoreWeights()) {
          cb.create<scf::YieldOp>(rankOneUpdate(cb, q, k, acc));
          return;
        }
        Value weight = ScoreTerms::additiveWeight(cb, op, head(), c);
        cb.create<scf::YieldOp>(tanhUpdate(cb, q, k, weight, acc));
      });
  Scores scores;
  for (int64_t u = 0; u < unroll; ++u) {
    Value keyPositions = ib.create<vector::BroadcastOp>(
        vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), keys[u]));
    for (int64_t r = 0; r < vectors; ++r) {
      const RowVector& v = rowVectors[r];
      Value s = terms->modified(ib, dot.getResult(u * vectors + r), v.positions, keyPositions);
      scores.score.push_back(s);
      scores.keep.push_back(
          terms->kept(ib, s, v.positions, keyPositions, ScoreTerms::MaskMod::Evaluate));
    }
  }
  return scores;
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

SmallVector<Value> WeightsLowering::emitSums(Value begin, Value end, int64_t unroll,
                                             ValueRange state) {
  auto loop = b.create<scf::ForOp>(
      begin, end, indexConstant(b, unroll), state,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange carried) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> next = llvm::to_vector(carried);
        Scores scores = scoresAt(ib, keysFrom(ib, j, unroll));
        for (int64_t u = 0; u < unroll; ++u)
          for (int64_t r = 0; r < vectors; ++r) {
            Value s = scores.score[u * vectors + r];
            if (Value keep = scores.keep[u * vectors + r])
              s = ib.create<arith::SelectOp>(keep, s, f32Splat(ib, lanes, -kInf));
            std::tie(next[2 * r], next[2 * r + 1]) =
                foldScore(ib, next[2 * r], next[2 * r + 1], s, lanes);
          }
        ib.create<scf::YieldOp>(next);
      });
  return llvm::to_vector_of<Value>(loop.getResults());
}

void WeightsLowering::emitKeys(Value begin, Value end, int64_t unroll) {
  b.create<scf::ForOp>(
      begin, end, indexConstant(b, unroll), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> keys = keysFrom(ib, j, unroll);
        Scores scores = scoresAt(ib, keys);
        for (int64_t u = 0; u < unroll; ++u)
          for (int64_t r = 0; r < vectors; ++r) {
            const RowVector& v = rowVectors[r];
            // p = e^(s - m) / L at kept keys: NaN in a NaN row even where s = -inf.
            Value p = ib.create<arith::MulFOp>(
                ib.create<math::ExpOp>(
                    ib.create<arith::SubFOp>(scores.score[u * vectors + r], v.max)),
                v.inverse);
            if (Value keep = scores.keep[u * vectors + r])
              p = ib.create<arith::SelectOp>(keep, p, f32Splat(ib, lanes, 0));
            storeLanes(ib, p, v, keys[u]);
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
  copyRowsTransposed(b, op.getQuery(), batch(), head(), firstRow(), op.getSizes()[2], packed,
                     packingScale(op).getValueAsDouble());
  keyHead = ScoreTerms::keyHeadOf(b, op, head());

  Value off = ScoreTerms::positionOffset(b, op);
  for (int64_t r = 0; r < vectors; ++r)
    rowVectors.push_back(rowVector(r, off));
  terms.emplace(b, op, batch(), head());

  // Scores for the keys the masks can keep, whole groups of keyUnroll keys then one at a time:
  // first the rows' max and sum, then the weights, with zeros on either side.
  Value keyBegin = op.getOffsets()[3];
  Value keyEnd = b.create<arith::AddIOp>(keyBegin, op.getSizes()[3]);
  auto [lo, hi] = keptKeyRange(b, op);
  Value unroll = indexConstant(b, keyUnroll);
  Value whole = b.create<arith::SubIOp>(
      hi, b.create<arith::RemUIOp>(b.create<arith::SubIOp>(hi, lo), unroll));
  SmallVector<Value> state = emitSums(lo, whole, keyUnroll, initialState());
  state = emitSums(whole, hi, 1, state);
  for (int64_t r = 0; r < vectors; ++r)
    rowNormaliser(rowVectors[r], state[2 * r], state[2 * r + 1]);
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
