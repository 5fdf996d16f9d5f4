//===- BackwardTile.cpp - one query tile's probabilities and score gradients -----===//
#include "attn/Transforms/BackwardTile.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/BackwardSteps.h"
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/LowerStateOps.h"
#include "attn/Transforms/ScorePatch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>
#include <numeric>
#include <optional>

using namespace mlir;

namespace attnc::attn {

BackwardTile::BackwardTile(ImplicitLocOpBuilder& b, BackwardOp op, Value batch, Value head,
                           Value firstRow, Value count, Value delta, const TileBuffers& buffers,
                           const BlockColumns& block, int64_t rows, const VectorOptions& options)
    : batch(batch), head(head), firstRow(firstRow), count(count), delta(delta), buffers(buffers),
      block(block), rows(rows), lanes(options.vectorWidth), vectorCount(rows / options.vectorWidth),
      dot(options.dot) {
  // A marker of the tile's domain, erased with the tile.
  Value one = indexConstant(b, 1);
  taskOp = op.cloneOverDomain(b, {batch, head, firstRow, op.getOffsets()[3]},
                              {one, one, count, op.getSizes()[3]});
  kvHead = ScoreTerms::kvHeadOf(b, taskOp, head);
  terms.emplace(b, taskOp, batch, head);
  positionOffset = ScoreTerms::positionOffset(b, taskOp);
}

BackwardTile::~BackwardTile() {
  terms.reset();
  taskOp->erase();
}

std::pair<Value, Value> BackwardTile::keptKeys(ImplicitLocOpBuilder& b, Value begin, Value end) {
  taskOp.getOffsetsMutable().slice(3, 1).assign(begin);
  taskOp.getSizesMutable().slice(3, 1).assign(b.create<arith::SubIOp>(end, begin));
  return keptKeyRange(b, taskOp);
}

void BackwardTile::readScoreShapedAux(ImplicitLocOpBuilder& b) {
  for (auto [aux, buffer] : llvm::enumerate(buffers.scoreShaped))
    if (buffer)
      readPatch(
          b, {taskOp.getAux()[aux], batch, head, firstRow, count, block.firstKey, block.keyCount},
          buffer);
}

void BackwardTile::load(ImplicitLocOpBuilder& b) {
  if (dot) {
    for (auto [rowsOf, paired] : {std::pair(taskOp.getQuery(), buffers.packedQuery),
                                  std::pair(taskOp.getGradOutput(), buffers.packedGrad)})
      copyRowsInPairs(b, rowsOf, batch, head, firstRow, count, paired, PairsAlong::Columns);
  } else {
    copyRowsTransposed(b, taskOp.getQuery(), batch, head, firstRow, count, buffers.packedQuery,
                       taskOp.getScale().convertToDouble());
    copyRowsTransposed(b, taskOp.getGradOutput(), batch, head, firstRow, count, buffers.packedGrad,
                       1.0);
  }
  readScoreShapedAux(b);
  // lse and D of the tile's rows; rows past the count get -inf and 0 (never kept).
  forRange(b, indexConstant(b, 0), indexConstant(b, rows), [&](ImplicitLocOpBuilder& rb, Value r) {
    Value row = rb.create<arith::AddIOp>(firstRow, r);
    Value inside = rb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, r, count);
    auto copy = rb.create<scf::IfOp>(
        inside,
        [&](OpBuilder& nested, Location loc) {
          ImplicitLocOpBuilder ib(loc, nested);
          Value at[] = {batch, head, row};
          ib.create<scf::YieldOp>(ValueRange{ib.create<memref::LoadOp>(taskOp.getLse(), at),
                                             ib.create<memref::LoadOp>(delta, at)});
        },
        [&](OpBuilder& nested, Location loc) {
          ImplicitLocOpBuilder ib(loc, nested);
          ib.create<scf::YieldOp>(ValueRange{
              f32Constant(ib, -std::numeric_limits<double>::infinity()), f32Constant(ib, 0)});
        });
    rb.create<memref::StoreOp>(copy.getResult(0), buffers.lse, r);
    rb.create<memref::StoreOp>(copy.getResult(1), buffers.delta, r);
  });
}

// Each step c of the contraction: the packed rows' vectors (f32 lanes, or with dot bf16 pairs
// of d's elements c and c + 1: twice as many) against each key's element c (or pair).
SmallVector<Value> BackwardTile::products(ImplicitLocOpBuilder& b, Value packed, Value rowsOf,
                                          Value transposed, ArrayRef<Value> keys,
                                          ArrayRef<Value> local) {
  const int64_t steps = cast<MemRefType>(packed.getType()).getDimSize(0);
  const int64_t width = dot ? 2 * lanes : lanes;
  auto vector = VectorType::get({width}, dot ? b.getBF16Type() : b.getF32Type());
  SmallVector<Value> zeros(keys.size() * vectorCount, f32Splat(b, lanes, 0));
  return foldRange(b, indexConstant(b, 0), indexConstant(b, steps), zeros,
                   [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc) {
                     SmallVector<Value> columns, elements;
                     for (int64_t r = 0; r < vectorCount; ++r)
                       columns.push_back(cb.create<vector::LoadOp>(
                           vector, packed, ValueRange{c, indexConstant(cb, r * width)}));
                     for (auto [key, j] : llvm::zip(keys, local))
                       elements.push_back(
                           dot ? keyPair(cb, rowsOf, key, c)
                               : cb.create<memref::LoadOp>(transposed, ValueRange{c, j})
                                     .getResult());
                     return dot ? pairDotUpdate(cb, columns, elements, acc)
                                : rankOneUpdate(cb, columns, elements, acc);
                   });
}

// The aux_grad region's reads at raw scores x: indices as they are, partials times the
// gradient by the modified score, 0 where not kept (a partial may be infinite there).
SmallVector<Value> BackwardTile::auxTerms(ImplicitLocOpBuilder& b, Value x, Value queryPos,
                                          Value keyPos, Value keep, Value byModified) {
  SmallVector<Value> reads = terms->auxGradients(b, x, queryPos, keyPos);
  ArrayRef<int64_t> targets = taskOp.getAuxGradTargets().value_or(ArrayRef<int64_t>{});
  size_t next = 0;
  for (int64_t target : targets) {
    next += cast<MemRefType>(taskOp.getAuxGrads()[target].getType()).getRank();
    reads[next] = b.create<arith::SelectOp>(keep, b.create<arith::MulFOp>(reads[next], byModified),
                                            f32Splat(b, lanes, 0));
    ++next;
  }
  return reads;
}

// Elements 2 p and 2 p + 1 of a key's row as an i32 pair (the rows may have any strides).
Value BackwardTile::keyPair(ImplicitLocOpBuilder& b, Value rowsOf, Value key, Value p) {
  Value c = b.create<arith::MulIOp>(p, indexConstant(b, 2));
  Value low = loadBf16Alone(b, rowsOf, {batch, kvHead, key, c});
  Value high = loadBf16Alone(b, rowsOf,
                             {batch, kvHead, key, b.create<arith::AddIOp>(c, indexConstant(b, 1))});
  return b.create<arith::OrIOp>(
      low, b.create<arith::ShLIOp>(high, b.create<arith::ConstantIntOp>(16, 32)));
}

// Row vector r's lanes: their positions i + off (i32) and whether each is a row of the tile.
std::pair<Value, Value> BackwardTile::rowLanes(ImplicitLocOpBuilder& b, int64_t r) {
  SmallVector<int32_t> iota(lanes);
  std::iota(iota.begin(), iota.end(), 0);
  auto vectorI32 = VectorType::get({lanes}, b.getI32Type());
  Value lanesIota = b.create<arith::ConstantOp>(DenseElementsAttr::get(vectorI32, ArrayRef(iota)));
  auto splatI32 = [&](Value index) {
    return b.create<vector::BroadcastOp>(vectorI32,
                                         b.create<arith::IndexCastOp>(b.getI32Type(), index));
  };
  Value first = b.create<arith::AddIOp>(firstRow, indexConstant(b, r * lanes));
  Value positions =
      b.create<arith::AddIOp>(splatI32(b.create<arith::AddIOp>(first, positionOffset)), lanesIota);
  Value left = b.create<arith::SubIOp>(count, indexConstant(b, r * lanes));
  return {positions, b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, lanesIota, splatI32(left))};
}

SmallVector<Value, 2> BackwardTile::KeyGroupScores::place(ImplicitLocOpBuilder& b, size_t at,
                                                          int64_t vectors, int64_t lanes) const {
  const int64_t i = static_cast<int64_t>(at);
  return {local[i / vectors], indexConstant(b, i % vectors * lanes)};
}

BackwardTile::KeyGroupScores BackwardTile::storeProbabilities(ImplicitLocOpBuilder& b,
                                                              ArrayRef<Value> keys, Value probs) {
  KeyGroupScores scores;
  auto vectorI32 = VectorType::get({lanes}, b.getI32Type());
  for (Value key : keys) {
    scores.keyPositions.push_back(b.create<vector::BroadcastOp>(
        vectorI32, b.create<arith::IndexCastOp>(b.getI32Type(), key)));
    scores.local.push_back(b.create<arith::SubIOp>(key, block.firstKey));
  }
  scores.raw = products(b, buffers.packedQuery, taskOp.getKey(), block.keys, keys, scores.local);
  if (dot) // the pairs hold Q unscaled
    for (Value& x : scores.raw)
      x = b.create<arith::MulFOp>(x, f32Splat(b, lanes, taskOp.getScale().convertToDouble()));
  Value negInf = f32Splat(b, lanes, -std::numeric_limits<double>::infinity());
  const bool readsPatches = llvm::any_of(buffers.scoreShaped, [](Value patch) { return patch; });
  for (auto [at, x] : llvm::enumerate(scores.raw)) {
    const int64_t u = static_cast<int64_t>(at) / vectorCount, r = at % vectorCount;
    auto [positions, live] = rowLanes(b, r);
    Value lse = b.create<vector::LoadOp>(VectorType::get({lanes}, b.getF32Type()), buffers.lse,
                                         indexConstant(b, r * lanes));
    std::optional<ScoreTerms::ScoreShapedReads> reads;
    if (readsPatches)
      reads.emplace(buffers.scoreShaped, scores.place(b, at, vectorCount, lanes));
    Value s = terms->modified(b, x, positions, scores.keyPositions[u], reads ? &*reads : nullptr);
    // Kept: a row of the tile, the masks keep it, and not a -inf score (p = 0 even where
    // lse is -inf too); UNE keeps a NaN score, whose p is NaN.
    Value keep = b.create<arith::AndIOp>(
        live, b.create<arith::CmpFOp>(arith::CmpFPredicate::UNE, s, negInf));
    if (Value masks =
            terms->kept(b, s, positions, scores.keyPositions[u], ScoreTerms::MaskMod::Evaluate))
      keep = b.create<arith::AndIOp>(keep, masks);
    // P = e^(s - lse) by the forward's own exponential (the kit's probabilityExp, a NaN passed
    // on), not math.exp's general expansion: s - lse <= 0, so no overflow to guard; below
    // -125 ln 2 it gives 2^-125 for 0, as in the forward.
    Value p = b.create<arith::SelectOp>(keep, probabilityExp(b, b.create<arith::SubFOp>(s, lse)),
                                        f32Splat(b, lanes, 0));
    Value dropped = terms->dropout(b, p, positions, scores.keyPositions[u]);
    b.create<vector::StoreOp>(dropped, probs, scores.place(b, at, vectorCount, lanes));
    scores.positions.push_back(positions);
    scores.keeps.push_back(keep);
    scores.unDropped.push_back(dropped == p ? Value() : p);
  }
  return scores;
}

SmallVector<BackwardTile::AuxTerms> BackwardTile::storeScoreGradients(ImplicitLocOpBuilder& b,
                                                                      ArrayRef<Value> keys,
                                                                      const KeyGroupScores& scores,
                                                                      Value probs, Value grads) {
  SmallVector<Value> dp =
      products(b, buffers.packedGrad, taskOp.getValue(), block.values, keys, scores.local);
  auto vector = VectorType::get({lanes}, b.getF32Type());
  Value scale = f32Splat(b, lanes, taskOp.getScale().convertToDouble());
  Value zero = f32Splat(b, lanes, 0);
  SmallVector<AuxTerms> auxTermsAt;
  for (auto [at, x] : llvm::enumerate(scores.raw)) {
    const int64_t u = static_cast<int64_t>(at) / vectorCount, r = at % vectorCount;
    const SmallVector<Value, 2> place = scores.place(b, at, vectorCount, lanes);
    Value delta = b.create<vector::LoadOp>(vector, buffers.delta, indexConstant(b, r * lanes));
    Value dropped = b.create<vector::LoadOp>(vector, probs, place);
    // With dropout's factor z: z p weights v, and dx = p (z dp - D) = z p dp - p D.
    Value p = scores.unDropped[at];
    Value difference =
        !p ? Value(b.create<arith::MulFOp>(dropped, b.create<arith::SubFOp>(dp[at], delta)))
           : Value(b.create<arith::SubFOp>(b.create<arith::MulFOp>(dropped, dp[at]),
                                           b.create<arith::MulFOp>(p, delta)));
    Value g = b.create<arith::MulFOp>(difference, scale);
    Value positions = scores.positions[at], keyPositions = scores.keyPositions[u];
    if (Value slope = terms->scoreGradient(b, x, positions, keyPositions))
      g = b.create<arith::SelectOp>(scores.keeps[at], b.create<arith::MulFOp>(g, slope), zero);
    b.create<vector::StoreOp>(g, grads, place);
    auxTermsAt.push_back(
        {auxTerms(b, x, positions, keyPositions, scores.keeps[at], difference), place});
  }
  return auxTermsAt;
}

SmallVector<BackwardTile::AuxTerms> BackwardTile::at(ImplicitLocOpBuilder& b, ArrayRef<Value> keys,
                                                     Value probs, Value grads) {
  const KeyGroupScores scores = storeProbabilities(b, keys, probs);
  return storeScoreGradients(b, keys, scores, probs, grads);
}

} // namespace attnc::attn
