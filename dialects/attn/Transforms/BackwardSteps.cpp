//===- BackwardSteps.cpp - the loops attn.backward's tasks are made of -----------===//
#include "attn/Transforms/BackwardSteps.h"

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;

namespace attnc::attn {
namespace {

// The register tiles of vectors of `lanes` f32 that the vector registers hold whole, chosen
// once per ISA: `accumulators`, so that with the operands a step loads (a row's column vectors
// and the broadcast weights) they stay in registers: 16 of AVX-512's 32 zmm, 12 of AVX2's 16
// ymm (16 there spilled to the stack, and the f32 backward ran at 40% of an AMD Zen 3's FMA
// peak); and the most `columns` vectors a step of accumulateKeyRows loads: on AVX2 4 keys x 3
// columns take 12 accumulators, 3 vectors and a broadcast, all 16 ymm (1 x 8, memory operands,
// loaded 9 times per 8 FMAs; 3 x 4 needed 17 and spilled); AVX-512's 32 zmm hold 2 keys x 8
// columns at d 128.
struct RegisterBudget {
  int64_t accumulators, columns;
};
RegisterBudget registerBudget(int64_t lanes) {
  return lanes >= 16 ? RegisterBudget{16, 8} : RegisterBudget{12, 3};
}

// The widest vector of at most `lanes` f32 (a power of two) whose width divides d.
int64_t columnWidth(int64_t d, int64_t lanes) {
  int64_t width = lanes;
  while (width > 1 && d % width != 0)
    width /= 2;
  return width;
}

// vdpbf16ps's lanes: 16 f32 sums, each of a pair of bf16 products.
constexpr int64_t kPairLanes = 16;

// The pairs of keys {2 s, 2 s + 1} that meet the keys [begin, end): s in [begin / 2,
// ceil(end / 2)).
std::pair<Value, Value> keyPairRange(ImplicitLocOpBuilder& b, Value begin, Value end) {
  Value two = indexConstant(b, 2);
  return {b.create<arith::DivUIOp>(begin, two), b.create<arith::CeilDivUIOp>(end, two)};
}

// A step j of a column tile's sum: its row vectors and its elements of columns [c0, c0 + n).
using ColumnStep = std::function<std::pair<SmallVector<Value>, SmallVector<Value>>(
    ImplicitLocOpBuilder&, Value j, int64_t c0, int64_t n)>;

// acc[prefix..., c, first + r] += the terms of steps [begin, end) for every c of `depth` and
// the `vectors` vectors of `lanes` rows r, in register tiles of columns x row vectors: f32 FMAs
// of the steps' elements, or with `pairs` vdpbf16ps of their bf16 pairs.
void accumulateColumnTiles(ImplicitLocOpBuilder& b, Value acc, ArrayRef<Value> prefix, Value first,
                           int64_t vectors, int64_t lanes, int64_t depth, Value begin, Value end,
                           bool pairs, const ColumnStep& step) {
  const int64_t columns = std::clamp<int64_t>(registerBudget(lanes).accumulators / vectors, 1, 16);
  auto vector = VectorType::get({lanes}, b.getF32Type());
  for (int64_t c0 = 0; c0 < depth; c0 += columns) {
    const int64_t n = std::min(columns, depth - c0);
    auto at = [&](ImplicitLocOpBuilder& ib, int64_t c, int64_t r) {
      SmallVector<Value> indices(prefix.begin(), prefix.end());
      indices.append({indexConstant(ib, c0 + c),
                      ib.create<arith::AddIOp>(first, indexConstant(ib, r * lanes))});
      return indices;
    };
    SmallVector<Value> sums;
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < vectors; ++r)
        sums.push_back(b.create<vector::LoadOp>(vector, acc, at(b, c, r)));
    sums =
        foldRange(b, begin, end, sums, [&](ImplicitLocOpBuilder& jb, Value j, ValueRange carried) {
          auto [rowVectors, elements] = step(jb, j, c0, n);
          return pairs ? pairDotUpdate(jb, rowVectors, elements, carried)
                       : rankOneUpdate(jb, rowVectors, elements, carried);
        });
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < vectors; ++r)
        b.create<vector::StoreOp>(sums[c * vectors + r], acc, at(b, c, r));
  }
}

} // namespace

void forKeyGroups(ImplicitLocOpBuilder& b, Value lo, Value hi, int64_t unroll,
                  const std::function<void(ImplicitLocOpBuilder&, ArrayRef<Value>)>& body) {
  Value whole = b.create<arith::SubIOp>(
      hi, b.create<arith::RemUIOp>(b.create<arith::SubIOp>(hi, lo), indexConstant(b, unroll)));
  auto loop = [&](Value begin, Value end, int64_t step) {
    b.create<scf::ForOp>(begin, end, indexConstant(b, step), std::nullopt,
                         [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
                           ImplicitLocOpBuilder ib(loc, nested);
                           SmallVector<Value> keys;
                           for (int64_t u = 0; u < step; ++u)
                             keys.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, u)));
                           body(ib, keys);
                           ib.create<scf::YieldOp>();
                         });
  };
  loop(lo, whole, unroll);
  loop(whole, hi, 1);
}

void zeroBuffer(ImplicitLocOpBuilder& b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Value origin = indexConstant(b, 0);
  forEachIndex(b, {origin, origin},
               {indexConstant(b, type.getDimSize(0)), indexConstant(b, type.getDimSize(1))},
               [&](ImplicitLocOpBuilder& eb, ArrayRef<Value> at) {
                 eb.create<memref::StoreOp>(f32Constant(eb, 0), buffer, at);
               });
}

// A step r of the sum: rowsOf's row r (f32), or its pair of rows 2 r and 2 r + 1 (bf16, twice
// the elements per vector) against each key's weight r, or its weights 2 r and 2 r + 1 rounded
// to a bf16 pair.
void accumulateKeyRows(ImplicitLocOpBuilder& b, Value acc, Value weights, Value rowsOf, Value begin,
                       Value end, Value count, int64_t lanes) {
  const bool pairs = cast<MemRefType>(rowsOf.getType()).getElementType().isBF16();
  const int64_t d = cast<MemRefType>(acc.getType()).getDimSize(1);
  const int64_t width = pairs ? kPairLanes : columnWidth(d, lanes);
  const int64_t perRow = pairs ? 2 : 1;                     // rowsOf's elements per acc element
  // Register tiles of `unroll` keys x `columns` vectors (registerBudget). A step loads the
  // columns' vectors once and broadcasts each key's weight.
  const RegisterBudget budget = registerBudget(lanes);
  const int64_t columns = std::min<int64_t>(d / width, budget.columns);
  const int64_t unroll = std::clamp<int64_t>(budget.accumulators / columns, 1, 8);
  auto vector = VectorType::get({width}, b.getF32Type());
  auto rowVector = VectorType::get({width * perRow}, pairs ? b.getBF16Type() : b.getF32Type());
  Value steps = pairs ? b.create<arith::CeilDivUIOp>(count, indexConstant(b, 2)) : count;
  auto weight = [&](ImplicitLocOpBuilder& rb, Value key, Value r) -> Value {
    if (!pairs)
      return rb.create<memref::LoadOp>(weights, ValueRange{key, r});
    Value two = rb.create<vector::LoadOp>(
        VectorType::get({2}, rb.getF32Type()), weights,
        ValueRange{key, rb.create<arith::MulIOp>(r, indexConstant(rb, 2))});
    Value rounded = rb.create<arith::TruncFOp>(VectorType::get({2}, rb.getBF16Type()), two);
    return rb.create<vector::ExtractOp>(
        rb.create<vector::BitCastOp>(VectorType::get({1}, rb.getI32Type()), rounded), 0);
  };
  forKeyGroups(b, begin, end, unroll, [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
    for (int64_t c0 = 0; c0 < d / width; c0 += columns) {
      const int64_t n = std::min(columns, d / width - c0);
      auto column = [&](ImplicitLocOpBuilder& cb, int64_t c, int64_t scale) {
        return indexConstant(cb, (c0 + c) * width * scale);
      };
      SmallVector<Value> regs;
      for (Value key : keys)
        for (int64_t c = 0; c < n; ++c)
          regs.push_back(kb.create<vector::LoadOp>(vector, acc, ValueRange{key, column(kb, c, 1)}));
      regs = foldRange(kb, indexConstant(kb, 0), steps, regs,
                       [&](ImplicitLocOpBuilder& rb, Value r, ValueRange carried) {
                         SmallVector<Value> rowVectors, scalars;
                         for (int64_t c = 0; c < n; ++c)
                           rowVectors.push_back(rb.create<vector::LoadOp>(
                               rowVector, rowsOf, ValueRange{r, column(rb, c, perRow)}));
                         for (Value key : keys)
                           scalars.push_back(weight(rb, key, r));
                         return pairs ? pairDotUpdate(rb, rowVectors, scalars, carried)
                                      : rankOneUpdate(rb, rowVectors, scalars, carried);
                       });
      for (auto [u, key] : llvm::enumerate(keys))
        for (int64_t c = 0; c < n; ++c)
          kb.create<vector::StoreOp>(regs[u * n + c], acc, ValueRange{key, column(kb, c, 1)});
    }
  });
}

void accumulateColumnsOfBlock(ImplicitLocOpBuilder& b, Value acc, ArrayRef<Value> prefix,
                              Value first, Value weights, int64_t vectors, Value keysT, Value begin,
                              Value end) {
  const int64_t lanes = cast<MemRefType>(weights.getType()).getDimSize(1) / vectors;
  auto vector = VectorType::get({lanes}, b.getF32Type());
  accumulateColumnTiles(
      b, acc, prefix, first, vectors, lanes, cast<MemRefType>(keysT.getType()).getDimSize(0), begin,
      end, /*pairs=*/false, [&](ImplicitLocOpBuilder& jb, Value j, int64_t c0, int64_t n) {
        SmallVector<Value> rowVectors, elements;
        for (int64_t r = 0; r < vectors; ++r)
          rowVectors.push_back(jb.create<vector::LoadOp>(
              vector, weights, ValueRange{j, indexConstant(jb, r * lanes)}));
        for (int64_t c = 0; c < n; ++c)
          elements.push_back(
              jb.create<memref::LoadOp>(keysT, ValueRange{indexConstant(jb, c0 + c), j}));
        return std::pair(rowVectors, elements);
      });
}

void accumulateColumnsOfBlockInPairs(ImplicitLocOpBuilder& b, Value acc, ArrayRef<Value> prefix,
                                     Value first, Value weightPairs, Value keyPairs, Value begin,
                                     Value end) {
  const int64_t vectors = cast<MemRefType>(weightPairs.getType()).getDimSize(1) / (2 * kPairLanes);
  auto pairVector = VectorType::get({2 * kPairLanes}, b.getBF16Type());
  // The pairs of keys that meet [begin, end): packWeightPairs zeroed the keys outside.
  auto [firstPair, endPair] = keyPairRange(b, begin, end);
  accumulateColumnTiles(
      b, acc, prefix, first, vectors, kPairLanes,
      cast<MemRefType>(keyPairs.getType()).getDimSize(1) / 2, firstPair, endPair, /*pairs=*/true,
      [&](ImplicitLocOpBuilder& sb, Value s, int64_t c0, int64_t n) {
        SmallVector<Value> rowVectors, elements;
        for (int64_t r = 0; r < vectors; ++r)
          rowVectors.push_back(sb.create<vector::LoadOp>(
              pairVector, weightPairs, ValueRange{s, indexConstant(sb, 2 * r * kPairLanes)}));
        for (int64_t c = 0; c < n; ++c)
          elements.push_back(loadBf16Pair(sb, keyPairs, {s, indexConstant(sb, 2 * (c0 + c))}));
        return std::pair(rowVectors, elements);
      });
}

void packWeightPairs(ImplicitLocOpBuilder& b, Value weights, Value begin, Value end, Value dst) {
  auto weightsType = cast<MemRefType>(weights.getType());
  const int64_t vectors = weightsType.getDimSize(1) / kPairLanes;
  auto vector = VectorType::get({kPairLanes}, b.getF32Type());
  Value lastKey = indexConstant(b, weightsType.getDimSize(0) - 1);
  Value zero = f32Splat(b, kPairLanes, 0);
  auto [firstPair, endPair] = keyPairRange(b, begin, end);
  forRange(b, firstPair, endPair,
           [&](ImplicitLocOpBuilder& sb, Value s) {
             Value low = sb.create<arith::MulIOp>(s, indexConstant(sb, 2));
             Value high = sb.create<arith::AddIOp>(low, indexConstant(sb, 1));
             auto keyWeights = [&](Value key, int64_t r) {
               Value inside = sb.create<arith::AndIOp>(
                   sb.create<arith::CmpIOp>(arith::CmpIPredicate::uge, key, begin),
                   sb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, key, end));
               Value row =
                   sb.create<vector::LoadOp>(vector, weights,
                                             ValueRange{sb.create<arith::MinUIOp>(key, lastKey),
                                                        indexConstant(sb, r * kPairLanes)});
               return sb.create<arith::SelectOp>(inside, row, zero).getResult();
             };
             // Lanes (w[2 s, i], w[2 s + 1, i]).
             for (int64_t r = 0; r < vectors; ++r)
               sb.create<vector::StoreOp>(
                   roundToBf16Pairs(sb, keyWeights(low, r), keyWeights(high, r)), dst,
                   ValueRange{s, indexConstant(sb, 2 * r * kPairLanes)});
           });
}

void copyRows(ImplicitLocOpBuilder& b, Value src, Value batch, Value head, Value row, Value count,
              Value dst) {
  const int64_t d = cast<MemRefType>(dst.getType()).getDimSize(1);
  forRange(b, indexConstant(b, 0), count, [&](ImplicitLocOpBuilder& rb, Value r) {
    Value at = rb.create<arith::AddIOp>(row, r);
    forRange(
        rb, indexConstant(rb, 0), indexConstant(rb, d), [&](ImplicitLocOpBuilder& cb, Value c) {
          cb.create<memref::StoreOp>(loadF32(cb, src, {batch, head, at, c}), dst, ValueRange{r, c});
        });
  });
}

void copyRowsInPairs(ImplicitLocOpBuilder& b, Value src, Value batch, Value head, Value row,
                     Value count, Value dst, PairsAlong along) {
  const bool alongRows = along == PairsAlong::Rows;
  const int64_t d = cast<MemRefType>(src.getType()).getDimSize(3);
  auto paired = cast<MemRefType>(dst.getType());
  const int64_t capacity = alongRows ? 2 * paired.getDimSize(0) : paired.getDimSize(1) / 2;
  Value zero = b.create<arith::ConstantOp>(b.getZeroAttr(b.getBF16Type()));
  Value last = b.create<arith::SubIOp>(b.create<arith::AddIOp>(row, count), indexConstant(b, 1));
  forRange(
      b, indexConstant(b, 0), indexConstant(b, capacity), [&](ImplicitLocOpBuilder& rb, Value r) {
        Value inside = rb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, r, count);
        Value at = rb.create<arith::MinUIOp>(rb.create<arith::AddIOp>(row, r), last);
        forRange(rb, indexConstant(rb, 0), indexConstant(rb, d),
                 [&](ImplicitLocOpBuilder& cb, Value c) {
                   Value x = cb.create<memref::LoadOp>(src, ValueRange{batch, head, at, c});
                   // [p / 2, 2 q + p mod 2], p the index paired.
                   auto [p, q] = alongRows ? std::pair(r, c) : std::pair(c, r);
                   Value two = indexConstant(cb, 2);
                   Value place = cb.create<arith::AddIOp>(cb.create<arith::MulIOp>(q, two),
                                                          cb.create<arith::RemUIOp>(p, two));
                   cb.create<memref::StoreOp>(cb.create<arith::SelectOp>(inside, x, zero), dst,
                                              ValueRange{cb.create<arith::DivUIOp>(p, two), place});
                 });
      });
}

void storeRows(ImplicitLocOpBuilder& b, Value grad, Value batch, Value head, Value first,
               Value count,
               const std::function<Value(ImplicitLocOpBuilder&, Value, Value)>& element) {
  const int64_t d = cast<MemRefType>(grad.getType()).getDimSize(3);
  forRange(b, indexConstant(b, 0), count, [&](ImplicitLocOpBuilder& rb, Value i) {
    Value position = rb.create<arith::AddIOp>(first, i);
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, d),
             [&](ImplicitLocOpBuilder& cb, Value c) {
               storeF32(cb, element(cb, i, c), grad, {batch, head, position, c});
             });
  });
}

// The side of dQ's squares transposed in registers: 8 ymm on AVX2.
constexpr int64_t kSquare = 8;

// The copies' sum at rows [i0, i0 + 8) and columns [c0, c0 + 8) stored transposed into grad's
// rows (a static unit column stride): a column's 8 rows a vector load per copy.
static void storeSummedSquare(ImplicitLocOpBuilder& b, Value grad, Value copies, Value batch,
                              Value head, Value row, Value count, Value chunks, Value batches,
                              Value i0, Value c0) {
  auto vector = VectorType::get({kSquare}, b.getF32Type());
  Value at = b.create<arith::AddIOp>(row, i0);
  const SmallVector<Value> zeros(kSquare, f32Splat(b, kSquare, 0));
  const SmallVector<Value> columns = foldRange(
      b, indexConstant(b, 0), chunks, zeros,
      [&](ImplicitLocOpBuilder& sb, Value s, ValueRange sums) {
        Value slot = sb.create<arith::AddIOp>(sb.create<arith::MulIOp>(s, batches), batch);
        SmallVector<Value> next;
        for (int64_t u = 0; u < kSquare; ++u) {
          Value c = sb.create<arith::AddIOp>(c0, indexConstant(sb, u));
          next.push_back(sb.create<arith::AddFOp>(
              sums[u], sb.create<vector::LoadOp>(vector, copies, ValueRange{slot, head, c, at})));
        }
        return next;
      });
  const SmallVector<Value> rows = transposeLanes(b, columns);
  SmallVector<SmallVector<Value, 4>> places;
  for (int64_t v = 0; v < kSquare; ++v)
    places.push_back({batch, head, b.create<arith::AddIOp>(at, indexConstant(b, v)), c0});
  // Unmasked stores but in the tile's last square of rows.
  Value whole = b.create<arith::CmpIOp>(
      arith::CmpIPredicate::ule, b.create<arith::AddIOp>(i0, indexConstant(b, kSquare)), count);
  storeLinesWhereWhole(b, grad, rows, places, whole, [&](ImplicitLocOpBuilder& eb, int64_t v) {
    Value i = eb.create<arith::AddIOp>(i0, indexConstant(eb, v));
    return eb.create<vector::BroadcastOp>(
        VectorType::get({kSquare}, eb.getI1Type()),
        eb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, i, count));
  });
}

void storeSummedTransposed(ImplicitLocOpBuilder& b, Value grad, Value copies, Value batch,
                           Value head, Value row, Value count, Value chunks, Value batches,
                           int64_t tileRows) {
  auto gradType = cast<MemRefType>(grad.getType());
  const int64_t d = gradType.getDimSize(3);
  auto elements = [&](ImplicitLocOpBuilder& eb) {
    storeRows(eb, grad, batch, head, row, count, [&](ImplicitLocOpBuilder& cb, Value i, Value c) {
      Value at = cb.create<arith::AddIOp>(row, i);
      return foldRange(
                 cb, indexConstant(cb, 0), chunks, {f32Constant(cb, 0)},
                 [&](ImplicitLocOpBuilder& sb, Value s, ValueRange sum) {
                   Value slot =
                       sb.create<arith::AddIOp>(sb.create<arith::MulIOp>(s, batches), batch);
                   Value term = sb.create<memref::LoadOp>(copies, ValueRange{slot, head, c, at});
                   return SmallVector<Value>{sb.create<arith::AddFOp>(sum[0], term)};
                 })
          .front();
    });
  };
  // A square's rows stay inside the copies' rows (padded to whole tiles) where a tile holds
  // whole squares.
  if (!gradType.getElementType().isF32() || ShapedType::isDynamic(d) || d % kSquare != 0 ||
      tileRows % kSquare != 0)
    return elements(b);
  ifUnitInnerStride(
      b, grad,
      [&](ImplicitLocOpBuilder& tb, Value view) {
        Value side = indexConstant(tb, kSquare);
        forEachIndex(tb, {indexConstant(tb, 0), indexConstant(tb, 0)},
                     {tb.create<arith::CeilDivUIOp>(count, side), indexConstant(tb, d / kSquare)},
                     [&](ImplicitLocOpBuilder& sb, ArrayRef<Value> square) {
                       storeSummedSquare(sb, view, copies, batch, head, row, count, chunks, batches,
                                         sb.create<arith::MulIOp>(square[0], side),
                                         sb.create<arith::MulIOp>(square[1], side));
                     });
      },
      elements);
}

} // namespace attnc::attn
