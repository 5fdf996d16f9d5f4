//===- UpdatePairs.cpp - the update's bf16 pair products (dot, AMX) -----------===//
//
// The paired products of LowerUpdate.cpp (its file comment has the math): Q^T's and P^T's
// pairs of rows, AVX512-BF16 dot products in the register tiles, and AMX tiles of the whole
// block.
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/Products.h"
#include "attn/Transforms/UpdateLowering.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace attnc::attn::prefill {

// Over the head dim a pair a step (c: pair c), Q^T's pair rows against each key's pair.
SmallVector<Value> UpdateLowering::pairScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                                 ArrayRef<Value> keys, Value queryPairs) {
  auto pairsType = VectorType::get({2 * lanes}, cb.getBF16Type());
  SmallVector<Value> q, k;
  for (int64_t r = 0; r < vectors; ++r)
    q.push_back(cb.create<vector::LoadOp>(pairsType, queryPairs,
                                          ValueRange{c, indexConstant(cb, r * 2 * lanes)}));
  Value element = cb.create<arith::MulIOp>(c, indexConstant(cb, 2));
  for (Value key : keys)
    k.push_back(loadBf16Pair(cb, paired->keys, {op.getOffsets()[0], kvHead, key, element}));
  return pairDotUpdate(cb, q, k, acc);
}

// Step 3 for paired products: P = exp(S - m') as pairs of rows of bf16 into `pairs` (P^T, the
// B operand of PV), its row sums, dropout's factor then; a key outside the keys attended in an
// attended pair gets P = 0, and for AMX tiles, which multiply the whole block, the pair rows
// outside them are zero.
void UpdateLowering::emitExpAndPairs(ArrayRef<Value> offsets, SmallVector<Value>& sum, Value pairs,
                                     bool wholeBlock) {
  const int64_t maxKeys = static_cast<int64_t>(*op.getMaxKeys());
  Value two = indexConstant(b, 2), zero = indexConstant(b, 0);
  Value pairBegin = b.create<arith::DivUIOp>(keyBegin, two);
  Value pairEnd = b.create<arith::CeilDivUIOp>(keyCount, two);
  auto zeroRows = [&](Value from, Value to) {
    forRange(b, from, to, [&](ImplicitLocOpBuilder& zb, Value p) {
      Value none = zb.create<arith::ConstantOp>(DenseElementsAttr::get(
          VectorType::get({2 * lanes}, zb.getBF16Type()), zb.getFloatAttr(zb.getBF16Type(), 0)));
      for (int64_t r = 0; r < vectors; ++r)
        zb.create<vector::StoreOp>(none, pairs, ValueRange{p, indexConstant(zb, r * 2 * lanes)});
    });
  };
  if (wholeBlock) {
    zeroRows(zero, pairBegin);
    zeroRows(pairEnd, indexConstant(b, maxKeys / 2));
  }
  SmallVector<Value> zeros(vectors, f32Splat(b, lanes, 0));
  auto loop = b.create<scf::ForOp>(
      pairBegin, pairEnd, indexConstant(b, 1), zeros,
      [&](OpBuilder& nested, Location loc, Value p, ValueRange running) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> next(running.begin(), running.end());
        SmallVector<SmallVector<Value>> probabilities(2);
        for (int64_t e = 0; e < 2; ++e) {
          Value j =
              ib.create<arith::AddIOp>(ib.create<arith::MulIOp>(p, two), indexConstant(ib, e));
          Value outside = ib.create<arith::OrIOp>(
              ib.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, keyBegin),
              ib.create<arith::CmpIOp>(arith::CmpIPredicate::uge, j, keyCount));
          Value keys = ib.create<vector::BroadcastOp>(
              vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), keyAt(ib, j)));
          for (int64_t r = 0; r < vectors; ++r) {
            Value s = ib.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)});
            Value dropped = ib.create<arith::OrIOp>(
                ib.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, f32Splat(ib, lanes, -kInf)),
                ib.create<vector::BroadcastOp>(VectorType::get({lanes}, ib.getI1Type()), outside));
            Value x = softmax.probability(ib, s, offsets[r]);
            x = ib.create<arith::SelectOp>(dropped, f32Splat(ib, lanes, 0), x);
            next[r] = ib.create<arith::AddFOp>(next[r], x);
            probabilities[e].push_back(terms->dropout(ib, x, rowPositions(ib, r), keys));
          }
        }
        for (int64_t r = 0; r < vectors; ++r)
          ib.create<vector::StoreOp>(roundToBf16Pairs(ib, probabilities[0][r], probabilities[1][r]),
                                     pairs, ValueRange{p, indexConstant(ib, r * 2 * lanes)});
        ib.create<scf::YieldOp>(next);
      });
  sum.assign(loop.getResults().begin(), loop.getResults().end());
}

// Keys 2j and 2j + 1 (`alone`: 2j only, its partner's V taken as 0, so that a value outside the
// keys attended, which may be anything past a padded length, never meets its P = 0). The block
// starts at a multiple of max_keys (a multiple of 32), so both lie in one chunk of V^T, side by
// side.
SmallVector<Value> UpdateLowering::pairValueStep(ImplicitLocOpBuilder& jb, Value j, ValueRange acc,
                                                 ArrayRef<Value> cols, Value probabilityPairs,
                                                 bool alone) {
  auto pairsType = VectorType::get({2 * lanes}, jb.getBF16Type());
  Value key = keyAt(jb, jb.create<arith::MulIOp>(j, indexConstant(jb, 2)));
  Value chunkKeys = indexConstant(jb, kValueChunkKeys);
  Value chunk = jb.create<arith::DivUIOp>(key, chunkKeys);
  Value inChunk = jb.create<arith::RemUIOp>(key, chunkKeys);
  SmallVector<Value> p, v;
  for (int64_t r = 0; r < vectors; ++r)
    p.push_back(jb.create<vector::LoadOp>(pairsType, probabilityPairs,
                                          ValueRange{j, indexConstant(jb, r * 2 * lanes)}));
  for (Value col : cols) {
    const SmallVector<Value> at{op.getOffsets()[0], kvHead, chunk, col, inChunk};
    v.push_back(alone ? loadBf16Alone(jb, paired->values, at)
                      : loadBf16Pair(jb, paired->values, at));
  }
  return pairDotUpdate(jb, p, v, acc);
}

Value UpdateLowering::emitZeroTiles() {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(taskStackBlock(op));
  const int64_t tileRows = kStepTiles * kStepTiles * kTileRows;
  Value zeros = b.create<memref::AllocaOp>(MemRefType::get({tileRows, kTileRows}, b.getF32Type()));
  b.setInsertionPointAfter(zeros.getDefiningOp());
  forRange(b, indexConstant(b, 0), indexConstant(b, tileRows),
           [&](ImplicitLocOpBuilder& rb, Value r) {
             rb.create<vector::StoreOp>(f32Splat(rb, kTileRows, 0), zeros,
                                        ValueRange{r, indexConstant(rb, 0)});
           });
  return zeros;
}

Value UpdateLowering::emitQueryPairs() {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(taskStackBlock(op));
  Value pairs = b.create<memref::AllocaOp>(MemRefType::get({dk / 2, rows * 2}, b.getBF16Type()));
  b.setInsertionPoint(beforeKeyLoop());
  forRange(
      b, indexConstant(b, 0), indexConstant(b, dk / 2), [&](ImplicitLocOpBuilder& pb, Value p) {
        Value even = pb.create<arith::MulIOp>(p, indexConstant(pb, 2));
        Value odd = pb.create<arith::AddIOp>(even, indexConstant(pb, 1));
        Value unscale = f32Splat(pb, lanes, 1.0 / scale);
        for (int64_t r = 0; r < vectors; ++r) {
          Value a = pb.create<arith::MulFOp>(
              pb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{even, column(r)}),
              unscale);
          Value c = pb.create<arith::MulFOp>(
              pb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{odd, column(r)}),
              unscale);
          pb.create<vector::StoreOp>(roundToBf16Pairs(pb, a, c), pairs,
                                     ValueRange{p, indexConstant(pb, r * 2 * lanes)});
        }
      });
  return pairs;
}

// Step 1 on tiles: S^T for the keys [keyBegin, keyCount) widened to whole steps of 32 (inside
// max_keys, a multiple of 32; K is zero past Tk). Each accumulator starts from a zero tile of
// its own in `zeros`: one tilezero for them all would be copied through memory (CSE merges
// them, and a tile both accumulates and stays zero).
void UpdateLowering::emitAmxScores(Value queryPairs, Value zeros) {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  auto tileF32 = VectorType::get({kTileRows, kTileRows}, b.getF32Type());
  auto tileBf16 = VectorType::get({kTilePairs, kTileBf16}, b.getBF16Type());
  Value batch = op.getOffsets()[0], step = indexConstant(b, kStepTiles * kTileRows);
  Value begin = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(keyBegin, step), step);
  Value end = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(keyCount, step), step);
  b.create<scf::ForOp>(
      begin, end, step, std::nullopt, [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> first, keys;
        for (int64_t k = 0; k < kStepTiles; ++k) {
          first.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, k * kTileRows)));
          keys.push_back(keyAt(ib, first.back()));
        }
        for (int64_t row = 0; row < vectors; row += kStepTiles) {
          const int64_t count = std::min(kStepTiles, vectors - row);
          // acc[k * count + t]: keys of tile k by the query rows of tile row + t.
          SmallVector<Value> acc;
          for (int64_t a = 0; a < kStepTiles * count; ++a)
            acc.push_back(ib.create<amx::TileLoadOp>(
                tileF32, zeros, ValueRange{indexConstant(ib, a * kTileRows), column(0)}));
          acc = amxTileProducts(
              ib, acc, kStepTiles, count, dk / kTileBf16,
              [&](ImplicitLocOpBuilder& lb, int64_t c, int64_t k) -> Value {
                return lb.create<amx::TileLoadOp>(
                    tileBf16, paired->keys,
                    ValueRange{batch, kvHead, keys[k], indexConstant(lb, c * kTileBf16)});
              },
              [&](ImplicitLocOpBuilder& lb, int64_t c, int64_t t) -> Value {
                return lb.create<amx::TileLoadOp>(
                    tileBf16, queryPairs,
                    ValueRange{indexConstant(lb, c * kTilePairs),
                               indexConstant(lb, (row + t) * 2 * lanes)});
              });
          for (int64_t k = 0; k < kStepTiles; ++k)
            for (int64_t t = 0; t < count; ++t)
              ib.create<amx::TileStoreOp>(scores, ValueRange{first[k], column(row + t)},
                                          acc[k * count + t]);
        }
        ib.create<scf::YieldOp>();
      });
}

// Step 4 on tiles: acc *= alpha where a row's max moved, then O^T += V^T P^T (P^T's pairs from
// step 3) over the block's max_keys keys, a step of up to 2 x 2 tiles of acc at a time. A
// chunk of 32 keys not all attended reads V^T's zero chunk instead (a value outside the keys
// attended, which may be anything past a padded length, must not meet its P = 0: 0 x inf is
// NaN), and its attended keys are added after the tiles as dot products.
void UpdateLowering::emitAmxValues(ArrayRef<Value> alpha, Value pairs, Value rescale) {
  const int64_t dv = op.getValue().getType().getDimSize(3);
  const int64_t maxKeys = static_cast<int64_t>(*op.getMaxKeys());
  auto tileF32 = VectorType::get({kTileRows, kTileRows}, b.getF32Type());
  auto tileBf16 = VectorType::get({kTilePairs, kTileBf16}, b.getBF16Type());
  Value zero = indexConstant(b, 0), batch = op.getOffsets()[0];
  auto rescaling = b.create<scf::IfOp>(rescale, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(rescaling.thenBlock()->getTerminator());
    forRange(b, zero, indexConstant(b, dv), [&](ImplicitLocOpBuilder& cb, Value c) {
      for (int64_t r = 0; r < vectors; ++r) {
        const SmallVector<Value> at{zero, zero, c, column(r)};
        Value a = cb.create<vector::LoadOp>(vector, op.getAcc(), at);
        cb.create<vector::StoreOp>(cb.create<arith::MulFOp>(a, alpha[r]), op.getAcc(), at);
      }
    });
  }
  Value chunkKeys = indexConstant(b, kValueChunkKeys);
  Value wholeBegin = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(keyBegin, chunkKeys),
                                             chunkKeys);
  Value zeroChunk = b.create<arith::SubIOp>(b.create<memref::DimOp>(paired->values, 2),
                                            indexConstant(b, 1));
  SmallVector<Value> chunks;
  for (int64_t k = 0; k < maxKeys; k += kValueChunkKeys) {
    Value whole = b.create<arith::AndIOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, wholeBegin, indexConstant(b, k)),
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, indexConstant(b, k + kValueChunkKeys),
                                keyCount));
    // The block starts at a multiple of max_keys, so its keys' chunks are whole.
    chunks.push_back(b.create<arith::SelectOp>(
        whole, b.create<arith::DivUIOp>(keyAt(b, indexConstant(b, k)), chunkKeys), zeroChunk));
  }
  for (int64_t c = 0; c < dv; c += kStepTiles * kTileRows) {
    const int64_t columnTiles = std::min(kStepTiles, (dv - c) / kTileRows);
    SmallVector<Value> columns;
    for (int64_t u = 0; u < columnTiles; ++u)
      columns.push_back(indexConstant(b, c + u * kTileRows));
    for (int64_t row = 0; row < vectors; row += kStepTiles) {
      const int64_t count = std::min(kStepTiles, vectors - row);
      // acc[u * count + t]: output columns of tile u by the query rows of tile row + t.
      SmallVector<Value> acc;
      for (int64_t u = 0; u < columnTiles; ++u)
        for (int64_t t = 0; t < count; ++t)
          acc.push_back(b.create<amx::TileLoadOp>(
              tileF32, op.getAcc(), ValueRange{zero, zero, columns[u], column(row + t)}));
      acc = amxTileProducts(
          b, acc, columnTiles, count, maxKeys / kValueChunkKeys,
          [&](ImplicitLocOpBuilder& lb, int64_t k, int64_t u) -> Value {
            return lb.create<amx::TileLoadOp>(
                tileBf16, paired->values, ValueRange{batch, kvHead, chunks[k], columns[u], zero});
          },
          [&](ImplicitLocOpBuilder& lb, int64_t k, int64_t t) -> Value {
            return lb.create<amx::TileLoadOp>(tileBf16, pairs,
                                              ValueRange{indexConstant(lb, k * kTilePairs),
                                                         indexConstant(lb, (row + t) * 2 * lanes)});
          });
      for (int64_t u = 0; u < columnTiles; ++u)
        for (int64_t t = 0; t < count; ++t)
          b.create<amx::TileStoreOp>(
              op.getAcc(), ValueRange{zero, zero, columns[u], column(row + t)}, acc[u * count + t]);
    }
  }
  // The attended keys of the chunks left out: before the first whole chunk, and from the last
  // whole chunk's end (or the first one's start) to keyCount.
  Value headEnd = b.create<arith::MinUIOp>(wholeBegin, keyCount);
  Value tailBegin = b.create<arith::MaxUIOp>(
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(keyCount, chunkKeys), chunkKeys),
      wholeBegin);
  for (auto [first, last] : {std::pair{keyBegin, headEnd}, std::pair{tailBegin, keyCount}}) {
    auto edge = b.create<scf::IfOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, first, last), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(edge.thenBlock()->getTerminator());
    emitValues(b, {}, first, last, /*inPairs=*/true,
               [&](ImplicitLocOpBuilder& jb, Value j, ValueRange acc, ArrayRef<Value> cols,
                   bool alone) { return pairValueStep(jb, j, acc, cols, pairs, alone); });
  }
}

} // namespace attnc::attn::prefill
