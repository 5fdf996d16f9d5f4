//===- DecodeValues.cpp - PV of the decode kernel -------------------------===//
#include "attn/Transforms/DecodeLowering.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Products.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace attnc::attn::decode {

void DecodeLowering::emitValues(ImplicitLocOpBuilder& b, Value j0, Value count,
                                bool contiguous, int64_t pvRows) {
  // Register tiles of pvRows rows x `width` vectors of columns: the whole vectors of d_v in
  // groups of up to kPvAccumulators / pvRows (at most kPvVectors), then the vector d_v ends in.
  // Each tile is a pass over the block's keys: `pass` of `passes`, for prefetchNext.
  // Dot products take the vectors of d_v in pairs (a 32-column chunk of two keys' rows).
  ValueTiles tiles;
  tiles.kv = contiguous ? valueView : op.getValue();
  tiles.contiguous = contiguous;
  tiles.j0 = j0;
  tiles.count = count;
  tiles.rows = pvRows;
  const int64_t most = std::min(kPvVectors, kPvAccumulators / pvRows);
  const int64_t wholeVectors = dv / lanes;
  tiles.width = blockProducts->valueWidth(wholeVectors, most);
  tiles.columnTiles = wholeVectors / tiles.width + (dv % lanes != 0 ? 1 : 0);
  tiles.passes = llvm::divideCeil(group, pvRows) * tiles.columnTiles;
  // Whole register tiles of rows: a tile's rows past the task's compute on whatever their
  // scores hold and are never stored.
  b.create<scf::ForOp>(
      indexConstant(b, 0), rowCount, indexConstant(b, pvRows), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value r0, ValueRange) {
        ImplicitLocOpBuilder rb(loc, nested);
        if (wholeVectors > 0)
          overChunks(rb, wholeVectors / tiles.width, {},
                     [&](ImplicitLocOpBuilder& gb, Value columnTile, ValueRange) {
                       Value firstVector =
                           gb.create<arith::MulIOp>(columnTile, indexConstant(gb, tiles.width));
                       const ValueTile at = tileAt(gb, tiles, r0, columnTile, firstVector,
                                                   tiles.width);
                       blockProducts->valueTile(gb, tiles, at);
                       return SmallVector<Value>{};
                     });
        if (dv % lanes != 0)
          emitValueTile(rb, tiles,
                        tileAt(rb, tiles, r0, indexConstant(rb, wholeVectors / tiles.width),
                               indexConstant(rb, wholeVectors), 1),
                        /*whole=*/false);
        rb.create<scf::YieldOp>();
      });
}

DecodeLowering::ValueTile DecodeLowering::tileAt(ImplicitLocOpBuilder& tb,
                                                 const ValueTiles& tiles, Value r0,
                                                 Value columnTile, Value firstVector,
                                                 int64_t width) {
  ValueTile at;
  at.pass = tb.create<arith::AddIOp>(
      tb.create<arith::MulIOp>(tb.create<arith::DivUIOp>(r0, indexConstant(tb, tiles.rows)),
                               indexConstant(tb, tiles.columnTiles)),
      columnTile);
  for (int64_t rr = 0; rr < tiles.rows; ++rr)
    at.rows.push_back(tb.create<arith::AddIOp>(r0, indexConstant(tb, rr)));
  for (int64_t c = 0; c < width; ++c)
    at.columns.push_back(tb.create<arith::MulIOp>(
        tb.create<arith::AddIOp>(firstVector, indexConstant(tb, c)), indexConstant(tb, lanes)));
  return at;
}

void DecodeLowering::emitValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles,
                                   const ValueTile& at, bool whole) {
  const int64_t pvRows = tiles.rows, width = static_cast<int64_t>(at.columns.size());
  SmallVector<Value> start;
  for (int64_t c = 0; c < width; ++c)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value a = tb.create<vector::LoadOp>(vector, acc, ValueRange{at.rows[rr], at.columns[c]});
      Value scale = tb.create<vector::BroadcastOp>(
          vector, tb.create<memref::LoadOp>(alpha, ValueRange{at.rows[rr]}));
      start.push_back(tb.create<arith::MulFOp>(a, scale));
    }
  auto loop = tb.create<scf::ForOp>(
      indexConstant(tb, 0), tiles.count, indexConstant(tb, 1), start,
      [&](OpBuilder& n2, Location l2, Value j, ValueRange running) {
        ImplicitLocOpBuilder jb(l2, n2);
        Value key = jb.create<arith::AddIOp>(tiles.j0, j);
        prefetchNext(jb, Phase::Values, key, at.pass, tiles.passes);
        auto [outer, row] = keyAt(jb, key);
        // A quantized cache's values: p v_j = (p v_scale[j]) v_q[j], the scale times the
        // codes' factor (loadRow's).
        Value valueScale;
        if (Value scale = op.getValueScale())
          valueScale = CacheRows::rowScale(jb, scale, tiles.kv, outer, kvHead, row);
        SmallVector<Value> p;
        for (int64_t rr = 0; rr < pvRows; ++rr) {
          Value weight = jb.create<memref::LoadOp>(scores, ValueRange{at.rows[rr], j});
          if (valueScale)
            weight = jb.create<arith::MulFOp>(weight, valueScale);
          p.push_back(jb.create<vector::BroadcastOp>(vector, weight));
        }
        SmallVector<Value> next(running.begin(), running.end());
        for (int64_t c = 0; c < width; ++c) {
          Value v = loadRow(jb, tiles.kv, {outer, kvHead, row, at.columns[c]}, lanes,
                            tiles.contiguous, whole, dv);
          for (int64_t rr = 0; rr < pvRows; ++rr)
            next[c * pvRows + rr] = jb.create<vector::FMAOp>(p[rr], v, running[c * pvRows + rr]);
        }
        jb.create<scf::YieldOp>(next);
      });
  for (int64_t c = 0; c < width; ++c)
    for (int64_t rr = 0; rr < pvRows; ++rr)
      tb.create<vector::StoreOp>(loop.getResult(c * pvRows + rr), acc,
                                 ValueRange{at.rows[rr], at.columns[c]});
}

// A 32-column chunk's pairs (lo, hi) as vpunpck{l,h}wd leave them, and the way back: each
// 128-bit lane of 8 bf16 columns gives its first 4 to lo's lane, its last 4 to hi's.
DecodeLowering::PairOrder DecodeLowering::pairOrder() const {
  constexpr int64_t kLaneColumns = 8, kLanePairs = 4;
  PairOrder order;
  for (int64_t lane = 0; lane < 2 * lanes / kLaneColumns; ++lane)
    for (int64_t i = 0; i < kLanePairs; ++i) {
      const int64_t low = kLaneColumns * lane + i, high = low + kLanePairs;
      order.toLow.push_back(low);
      order.toHigh.push_back(high);
      order.interleaveLow.append({low, 2 * lanes + low});
      order.interleaveHigh.append({high, 2 * lanes + high});
    }
  for (int64_t c = 0; c < 2 * lanes; ++c) {
    const int64_t lane = c / kLaneColumns, i = c % kLaneColumns;
    order.back[c / lanes].push_back(i < kLanePairs ? kLanePairs * lane + i
                                                   : lanes + kLanePairs * lane + i - kLanePairs);
  }
  return order;
}

// The dot products' tile: keys two at a time, an odd last one alone (its partner's V taken as
// 0, so that a row past the block never meets its P = 0).
void DecodeLowering::emitPairValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles,
                                       const ValueTile& at) {
  const int64_t pvRows = tiles.rows, width = tiles.width;
  const PairOrder order = pairOrder();
  // start[c * pvRows + rr]: vector c of the tile in pair order (low, high of each chunk).
  SmallVector<Value> start(width * pvRows);
  for (int64_t c = 0; c < width; c += 2)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value scale = tb.create<vector::BroadcastOp>(
          vector, tb.create<memref::LoadOp>(alpha, ValueRange{at.rows[rr]}));
      Value natural[2];
      for (int64_t h = 0; h < 2; ++h)
        natural[h] = tb.create<arith::MulFOp>(
            tb.create<vector::LoadOp>(vector, acc, ValueRange{at.rows[rr], at.columns[c + h]}),
            scale);
      start[c * pvRows + rr] = tb.create<vector::ShuffleOp>(natural[0], natural[1], order.toLow);
      start[(c + 1) * pvRows + rr] =
          tb.create<vector::ShuffleOp>(natural[0], natural[1], order.toHigh);
    }
  Value two = indexConstant(tb, 2);
  auto loop = tb.create<scf::ForOp>(
      indexConstant(tb, 0), tb.create<arith::DivUIOp>(tiles.count, two), indexConstant(tb, 1),
      start, [&](OpBuilder& n2, Location l2, Value jp, ValueRange running) {
        ImplicitLocOpBuilder jb(l2, n2);
        jb.create<scf::YieldOp>(pairValueStep(jb, tiles, at, order,
                                              jb.create<arith::MulIOp>(jp, two), running, false));
      });
  ValueRange result = loop.getResults();
  Value odd = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ne,
                                       tb.create<arith::RemUIOp>(tiles.count, two),
                                       indexConstant(tb, 0));
  auto last = tb.create<scf::IfOp>(
      odd,
      [&](OpBuilder& n2, Location l2) {
        ImplicitLocOpBuilder jb(l2, n2);
        Value j = jb.create<arith::SubIOp>(tiles.count, indexConstant(jb, 1));
        jb.create<scf::YieldOp>(pairValueStep(jb, tiles, at, order, j, result, true));
      },
      [&](OpBuilder& n2, Location l2) { n2.create<scf::YieldOp>(l2, result); });
  for (int64_t c = 0; c < width; c += 2)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value low = last.getResult(c * pvRows + rr), high = last.getResult((c + 1) * pvRows + rr);
      for (int64_t h = 0; h < 2; ++h)
        tb.create<vector::StoreOp>(tb.create<vector::ShuffleOp>(low, high, order.back[h]), acc,
                                   ValueRange{at.rows[rr], at.columns[c + h]});
    }
}

SmallVector<Value> DecodeLowering::pairValueStep(ImplicitLocOpBuilder& jb,
                                                 const ValueTiles& tiles, const ValueTile& at,
                                                 const PairOrder& order, Value j,
                                                 ValueRange running, bool alone) {
  const int64_t pvRows = tiles.rows;
  auto chunkType = VectorType::get({2 * lanes}, jb.getBF16Type());
  Value key = jb.create<arith::AddIOp>(tiles.j0, j);
  auto [outer, row] = keyAt(jb, key);
  std::pair<Value, Value> next{};
  if (!alone)
    next = keyAt(jb, jb.create<arith::AddIOp>(key, indexConstant(jb, 1)));
  for (int64_t e = 0; e < (alone ? 1 : 2); ++e)
    prefetchNext(jb, Phase::Values, jb.create<arith::AddIOp>(key, indexConstant(jb, e)), at.pass,
                 tiles.passes);
  SmallVector<Value> p;
  for (int64_t rr = 0; rr < pvRows; ++rr)
    p.push_back(broadcastBf16Pair(
        jb, loadBf16Pair(jb, probabilityPairs, ValueRange{at.rows[rr], j}), lanes));
  Value zeros = jb.create<arith::ConstantOp>(
      DenseElementsAttr::get(chunkType, jb.getFloatAttr(jb.getBF16Type(), 0)));
  SmallVector<Value> out(running.begin(), running.end());
  for (int64_t c = 0; c < tiles.width; c += 2) {
    Value first = jb.create<vector::LoadOp>(chunkType, tiles.kv,
                                            ValueRange{outer, kvHead, row, at.columns[c]});
    Value second = alone ? zeros
                         : jb.create<vector::LoadOp>(
                               chunkType, tiles.kv,
                               ValueRange{next.first, kvHead, next.second, at.columns[c]});
    Value low = jb.create<vector::ShuffleOp>(first, second, order.interleaveLow);
    Value high = jb.create<vector::ShuffleOp>(first, second, order.interleaveHigh);
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      out[c * pvRows + rr] = dotBf16Pairs(jb, running[c * pvRows + rr], low, p[rr]);
      out[(c + 1) * pvRows + rr] = dotBf16Pairs(jb, running[(c + 1) * pvRows + rr], high, p[rr]);
    }
  }
  return out;
}

} // namespace attnc::attn::decode
