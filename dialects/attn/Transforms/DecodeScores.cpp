//===- DecodeScores.cpp - QK^T and the softmax of the decode kernel -------===//
#include "attn/Transforms/DecodeLowering.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/ScoreTerms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace attnc::attn::decode {

namespace {

// The vector whose lane u is the sum of the lanes of vectors[u] (W vectors of W lanes): pairs
// of vectors halve their partial sums at each level, 3 (W - 1) shuffles and adds in all.
Value transposeReduce(ImplicitLocOpBuilder& b, SmallVector<Value> vectors) {
  const int64_t lanes = cast<VectorType>(vectors.front().getType()).getNumElements();
  // Each vector holds `sources` sources of `partials` partial sums each, in order.
  for (int64_t partials = lanes; partials > 1; partials /= 2) {
    const int64_t sources = lanes / partials, half = partials / 2;
    SmallVector<int64_t> low, high;
    for (int64_t from : {int64_t{0}, lanes})
      for (int64_t s = 0; s < sources; ++s)
        for (int64_t p = 0; p < half; ++p) {
          low.push_back(from + s * partials + p);
          high.push_back(from + s * partials + half + p);
        }
    SmallVector<Value> next;
    for (size_t v = 0; v + 1 < vectors.size(); v += 2) {
      Value lo = b.create<vector::ShuffleOp>(vectors[v], vectors[v + 1], low);
      Value hi = b.create<vector::ShuffleOp>(vectors[v], vectors[v + 1], high);
      next.push_back(b.create<arith::AddFOp>(lo, hi));
    }
    vectors = next;
  }
  return vectors.front();
}

// QK^T's register tile, a chunk of the head dim: next[rr * n + u] = product(running[rr * n + u],
// q[rr], k_u) for the rows' chunks q and the n keys' chunks k_u = loadKey(u), each key's chunk
// read once for every row.
SmallVector<Value> keyTile(ArrayRef<Value> q, size_t n, ValueRange running,
                           function_ref<Value(size_t)> loadKey,
                           function_ref<Value(Value, Value, Value)> product) {
  SmallVector<Value> next(running.begin(), running.end());
  for (size_t u = 0; u < n; ++u) {
    Value k = loadKey(u);
    for (size_t rr = 0; rr < q.size(); ++rr)
      next[rr * n + u] = product(running[rr * n + u], q[rr], k);
  }
  return next;
}

} // namespace

void DecodeLowering::emitScores(ImplicitLocOpBuilder& b, Value j0, Value count,
                                bool contiguous, int64_t scoreRows) {
  ScoreTile tile;
  tile.kv = contiguous ? keyView : op.getKey();
  tile.contiguous = contiguous;
  tile.lastKey = b.create<arith::SubIOp>(seqK, indexConstant(b, 1));
  // A register tile: scoreRows rows x tile.keys keys, W accumulators in all, so each K chunk
  // loaded (and widened) serves scoreRows rows. The key groups loop inside the row blocks: the
  // other way round, a K group's chunks (invariant in the row loop) were hoisted out of it by
  // LLVM and spilled, a store and a load more per chunk.
  tile.rows = scoreRows;
  tile.keys = lanes / scoreRows;
  tile.passes = llvm::divideCeil(group, scoreRows);
  tile.keyByKey = scoreRows == 1 && partials; // allocateTaskStack allocates partials for it
  Value groups = b.create<arith::CeilDivUIOp>(count, indexConstant(b, tile.keys));
  b.create<scf::ForOp>(
      indexConstant(b, 0), rowCount, indexConstant(b, scoreRows), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value r0, ValueRange) {
        ImplicitLocOpBuilder rb(loc, nested);
        tile.pass = rb.create<arith::DivUIOp>(r0, indexConstant(rb, scoreRows));
        tile.rowIndices.clear();
        for (int64_t rr = 0; rr < scoreRows; ++rr)
          tile.rowIndices.push_back(rb.create<arith::AddIOp>(r0, indexConstant(rb, rr)));
        forRange(rb, indexConstant(rb, 0), groups, [&](ImplicitLocOpBuilder& gb, Value keyGroup) {
          emitScoreGroup(gb, tile, j0, keyGroup);
        });
        rb.create<scf::YieldOp>();
      });
}

std::pair<Value, Value> DecodeLowering::groupKey(ImplicitLocOpBuilder& b, const ScoreTile& tile,
                                                 Value firstKey, Value u) {
  return keyAt(b, b.create<arith::MinUIOp>(b.create<arith::AddIOp>(firstKey, u), tile.lastKey));
}

void DecodeLowering::emitScoreGroup(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value j0,
                                    Value keyGroup) {
  Value firstColumn = gb.create<arith::MulIOp>(keyGroup, indexConstant(gb, tile.keys));
  Value firstKey = gb.create<arith::AddIOp>(j0, firstColumn);
  // The group's keys at once, but for one row read key by key (which has no scales: quantized
  // rows keep the unrolled group).
  SmallVector<std::pair<Value, Value>> keys;
  if (!tile.keyByKey)
    for (int64_t u = 0; u < tile.keys; ++u)
      keys.push_back(groupKey(gb, tile, firstKey, indexConstant(gb, u)));
  // The next block's rows: with one row the loop below prefetches each key's before reading it
  // (all the group's at once, 16 keys x 4 lines, the loads waited behind them: H 8, paged hnd
  // pages of 16, key by key 1.23x / 1.15x as fast, 1 / 2 threads).
  if (!tile.keyByKey)
    for (int64_t u = 0; u < tile.keys; ++u)
      prefetchNext(gb, Phase::Scores, gb.create<arith::AddIOp>(firstKey, indexConstant(gb, u)),
                   tile.pass, tile.passes);
  Value keyScales = keyScalesOf(gb, tile, keys);
  // With GQA the group's keys chunk by chunk, each K chunk widened once for the tile's rows. One
  // row of f16, bf16 or f32 keys reads them one by one in a loop, each key's partial sums
  // through `partials`: unrolled, the group's loads were scheduled chunk by chunk across its
  // keys (4 KiB apart at W = 16, d 128, f16), and the hardware's prefetchers fell behind (1
  // thread, H 8, Tk 16k: 1.3-1.5x as fast in a loop, d 64 to 256, f16 and bf16). With GQA the
  // loop was slower (q reloaded per key), and int8 rows 4% slower.
  SmallVector<Value> sums;
  if (!tile.keyByKey) {
    sums = blockProducts->keyDots(gb, tile, keys);
  } else {
    forRange(gb, indexConstant(gb, 0), indexConstant(gb, tile.keys),
             [&](ImplicitLocOpBuilder& ub, Value u) {
               prefetchNext(ub, Phase::Scores, ub.create<arith::AddIOp>(firstKey, u), tile.pass,
                            tile.passes);
               ub.create<vector::StoreOp>(
                   blockProducts->keyDots(ub, tile, groupKey(ub, tile, firstKey, u)).front(),
                   partials, ValueRange{u, indexConstant(ub, 0)});
             });
    for (int64_t u = 0; u < tile.keys; ++u)
      sums.push_back(gb.create<vector::LoadOp>(
          vector, partials, ValueRange{indexConstant(gb, u), indexConstant(gb, 0)}));
  }
  storeGroupScores(gb, tile, transposeReduce(gb, sums), keyScales, firstColumn);
}

Value DecodeLowering::keyScalesOf(ImplicitLocOpBuilder& gb, const ScoreTile& tile,
                                  KeyRows keys) {
  // A quantized cache's keys: s_u = k_scale[u] (q . k_q[u]), the scale (times the codes' factor,
  // loadRow's) applied to the sums.
  Value scale = op.getKeyScale();
  if (!scale)
    return Value();
  SmallVector<Value> perKey;
  for (auto [outer, row] : keys)
    perKey.push_back(gb.create<memref::LoadOp>(scale, ValueRange{outer, kvHead, row}));
  return scaleForUnscaled(
      gb, gb.create<vector::FromElementsOp>(VectorType::get({tile.keys}, gb.getF32Type()), perKey),
      tile.kv.getType());
}

SmallVector<Value> DecodeLowering::widenedDotChunk(ImplicitLocOpBuilder& cb,
                                                   const ScoreTile& tile, Value c,
                                                   ValueRange running, bool whole, KeyRows over) {
  Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, lanes));
  SmallVector<Value> q;
  for (Value row : tile.rowIndices)
    q.push_back(cb.create<vector::LoadOp>(vector, query, ValueRange{row, column}));
  return keyTile(
      q, over.size(), running,
      [&](size_t u) {
        return loadRow(cb, tile.kv, {over[u].first, kvHead, over[u].second, column}, lanes,
                       tile.contiguous, whole, dk);
      },
      [&](Value acc, Value qRow, Value k) { return cb.create<vector::FMAOp>(qRow, k, acc); });
}

SmallVector<Value> DecodeLowering::pairDotChunk(ImplicitLocOpBuilder& cb, const ScoreTile& tile,
                                                Value c, ValueRange running, KeyRows over) {
  auto chunkType = VectorType::get({2 * lanes}, cb.getBF16Type());
  Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, 2 * lanes));
  SmallVector<Value> q;
  for (Value row : tile.rowIndices)
    q.push_back(cb.create<vector::LoadOp>(chunkType, queryPairs, ValueRange{row, column}));
  return keyTile(
      q, over.size(), running,
      [&](size_t u) -> Value {
        return cb.create<vector::LoadOp>(chunkType, tile.kv,
                                         ValueRange{over[u].first, kvHead, over[u].second, column});
      },
      [&](Value acc, Value qRow, Value k) { return dotBf16Pairs(cb, acc, qRow, k); });
}

// Lanes [rr * keys, (rr + 1) * keys) of the reduced sums hold row rr's scores.
void DecodeLowering::storeGroupScores(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value s,
                                      Value keyScales, Value firstColumn) {
  for (int64_t rr = 0; rr < tile.rows; ++rr) {
    Value part = tile.rows == 1 ? s
                                : gb.create<vector::ExtractStridedSliceOp>(
                                      s, ArrayRef<int64_t>{rr * tile.keys},
                                      ArrayRef<int64_t>{tile.keys}, ArrayRef<int64_t>{1});
    if (keyScales)
      part = gb.create<arith::MulFOp>(part, keyScales);
    part = blockProducts->scaled(gb, part, tile.keys);
    gb.create<vector::StoreOp>(part, scores, ValueRange{tile.rowIndices[rr], firstColumn});
  }
}

void DecodeLowering::emitSoftmax(ImplicitLocOpBuilder& b, Value j0, Value count) {
  Value groups = b.create<arith::CeilDivUIOp>(count, indexConstant(b, lanes));
  Value off = ScoreTerms::positionOffset(b, taskOp);
  Value negInf = f32Splat(b, lanes, -kInf), zeros = f32Splat(b, lanes, 0);
  forRange(b, indexConstant(b, 0), rowCount, [&](ImplicitLocOpBuilder& rb, Value r) {
    auto [head, i] = rowAt(rb, r);
    ScoreTerms terms(rb, taskOp, batch, head);
    Value position = rb.create<vector::BroadcastOp>(
        vectorI32, i32(rb, rb.create<arith::AddIOp>(i, off)));
    Value lanesIota = iota(rb);
    // Key group g of the block: its first column in S, and the lanes' keys within the block
    // and in the sequence (i32).
    struct KeyLanes {
      Value first, inBlock, key;
    };
    auto keysOf = [&](ImplicitLocOpBuilder& kb, Value keyGroup) {
      Value first = kb.create<arith::MulIOp>(keyGroup, indexConstant(kb, lanes));
      Value inBlock = kb.create<arith::AddIOp>(
          kb.create<vector::BroadcastOp>(vectorI32, i32(kb, first)), lanesIota);
      Value key = kb.create<arith::AddIOp>(
          kb.create<vector::BroadcastOp>(vectorI32, i32(kb, j0)), inBlock);
      return KeyLanes{first, inBlock, key};
    };
    Value countI32 = rb.create<vector::BroadcastOp>(vectorI32, i32(rb, count));
    // body(kb, keys, s, running) over the block's key groups, s the group's scores of row r;
    // the value it returns is carried to the next group, and out of the last.
    auto overKeyGroups = [&](Value init, auto body) {
      auto loop = rb.create<scf::ForOp>(
          indexConstant(rb, 0), groups, indexConstant(rb, 1), ValueRange{init},
          [&](OpBuilder& nested, Location loc, Value keyGroup, ValueRange running) {
            ImplicitLocOpBuilder kb(loc, nested);
            const KeyLanes keys = keysOf(kb, keyGroup);
            Value s = kb.create<vector::LoadOp>(vector, scores, ValueRange{r, keys.first});
            kb.create<scf::YieldOp>(ValueRange{body(kb, keys, s, running[0])});
          });
      return loop.getResult(0);
    };
    // The terms, -inf past the block's keys, and the block's row max.
    Value maxima = overKeyGroups(negInf, [&](ImplicitLocOpBuilder& kb, const KeyLanes& keys,
                                             Value s, Value running) -> Value {
      s = terms.apply(kb, s, position, keys.key, ScoreTerms::MaskMod::Evaluate);
      Value inside = kb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, keys.inBlock, countI32);
      s = kb.create<arith::SelectOp>(inside, s, negInf);
      kb.create<vector::StoreOp>(s, scores, ValueRange{r, keys.first});
      return kb.create<arith::MaximumFOp>(running, s);
    });
    Value blockMax = rb.create<vector::ReductionOp>(vector::CombiningKind::MAXIMUMF, maxima);
    Value oldMax = rb.create<memref::LoadOp>(rowMax, ValueRange{r});
    Value newMax = rb.create<arith::MaximumFOp>(oldMax, blockMax);
    Value safeMax = softmax.finiteMax(rb, newMax);
    Value rescale = softmax.rescaleFactor(rb, oldMax, safeMax);
    Value offset = rb.create<vector::BroadcastOp>(vector, softmax.probabilityOffset(rb, safeMax));
    // P = exp(S - m' - c), 0 where masked; dropout's factor weights P for PV only.
    Value sums = overKeyGroups(zeros, [&](ImplicitLocOpBuilder& kb, const KeyLanes& keys,
                                          Value s, Value running) -> Value {
      Value isMasked = kb.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, negInf);
      Value p = softmax.probability(kb, s, offset);
      p = kb.create<arith::SelectOp>(isMasked, zeros, p);
      Value sum = kb.create<arith::AddFOp>(running, p);
      p = terms.dropout(kb, p, position, keys.key);
      kb.create<vector::StoreOp>(p, scores, ValueRange{r, keys.first});
      blockProducts->storeProbabilities(kb, p, r, keys.first);
      return sum;
    });
    Value blockSum = rb.create<vector::ReductionOp>(vector::CombiningKind::ADD, sums);
    Value oldSum = rb.create<memref::LoadOp>(rowSum, ValueRange{r});
    rb.create<memref::StoreOp>(newMax, rowMax, ValueRange{r});
    rb.create<memref::StoreOp>(softmax.carriedSum(rb, rescale, oldSum, blockSum), rowSum,
                               ValueRange{r});
    rb.create<memref::StoreOp>(rescale, alpha, ValueRange{r});
  });
}

} // namespace attnc::attn::decode
