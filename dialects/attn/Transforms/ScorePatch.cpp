//===- ScorePatch.cpp - a score-shaped tensor's patch of a query tile and key block ----===//
#include "attn/Transforms/ScorePatch.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/LowerStateOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The side of the squares transposed in registers: 8 ymm on AVX2.
constexpr int64_t kSquare = 8;

// writeGradientPatch's arguments.
struct GradientWrite {
  ScorePatch grad;
  Value terms;        // [keyBlock, rows] f32: terms[j, i]
  Value begin, end;   // the keys the tile kept
  Value firstToReach; // i1: store (else add)
};

// Element (i, j) of the patch in its tensor.
SmallVector<Value, 4> elementAt(ImplicitLocOpBuilder& b, const ScorePatch& patch, Value i,
                                Value j) {
  return {patch.batch, patch.head, b.create<arith::AddIOp>(patch.row, i),
          b.create<arith::AddIOp>(patch.firstKey, j)};
}

// Whether squares tile a [keyBlock, rows] buffer: both multiples of the side.
bool squaresFit(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return type.getDimSize(0) % kSquare == 0 && type.getDimSize(1) % kSquare == 0;
}

// body(i0, j0) for the squares of the patch's rows (of the buffer's `rows`) and keys.
void forEachSquare(ImplicitLocOpBuilder& b, const ScorePatch& patch, int64_t rows,
                   const std::function<void(ImplicitLocOpBuilder&, Value, Value)>& body) {
  Value zero = indexConstant(b, 0), side = indexConstant(b, kSquare);
  forEachIndex(
      b, {zero, zero},
      {indexConstant(b, rows / kSquare), b.create<arith::CeilDivUIOp>(patch.keyCount, side)},
      [&](ImplicitLocOpBuilder& sb, ArrayRef<Value> square) {
        body(sb, sb.create<arith::MulIOp>(square[0], side),
             sb.create<arith::MulIOp>(square[1], side));
      });
}

// Lanes l of a square at key j0 with begin <= j0 + l < end (create_mask clamps below at 0).
Value lanesWithin(ImplicitLocOpBuilder& b, Value j0, Value begin, Value end) {
  auto mask = VectorType::get({kSquare}, b.getI1Type());
  Value belowEnd =
      b.create<vector::CreateMaskOp>(mask, ValueRange{b.create<arith::SubIOp>(end, j0)});
  Value belowBegin =
      b.create<vector::CreateMaskOp>(mask, ValueRange{b.create<arith::SubIOp>(begin, j0)});
  Value allLanes = b.create<arith::ConstantOp>(DenseElementsAttr::get(mask, true));
  return b.create<arith::AndIOp>(belowEnd, b.create<arith::XOrIOp>(belowBegin, allLanes));
}

// All lanes where row i0 + v of a square is a row of the patch, else none.
Value rowLanes(ImplicitLocOpBuilder& b, const ScorePatch& patch, Value i) {
  return b.create<vector::BroadcastOp>(
      VectorType::get({kSquare}, b.getI1Type()),
      b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, i, patch.count));
}

// The store (first) or the add (later) of each element, on the branches of firstToReach.
void onEitherBranch(ImplicitLocOpBuilder& b, const GradientWrite& write,
                    const std::function<void(ImplicitLocOpBuilder&, bool first)>& body) {
  auto branch = b.create<scf::IfOp>(write.firstToReach, /*withElseRegion=*/true);
  ImplicitLocOpBuilder sb(b.getLoc(), branch.getThenBodyBuilder());
  body(sb, true);
  ImplicitLocOpBuilder ab(b.getLoc(), branch.getElseBodyBuilder());
  body(ab, false);
}

void writeElements(ImplicitLocOpBuilder& b, const GradientWrite& write) {
  const ScorePatch& grad = write.grad;
  onEitherBranch(b, write, [&](ImplicitLocOpBuilder& wb, bool first) {
    forRange(wb, indexConstant(wb, 0), grad.count, [&](ImplicitLocOpBuilder& rb, Value i) {
      // The first writes every key of the block, a later one only those kept.
      Value from = first ? indexConstant(rb, 0) : write.begin;
      Value to = first ? grad.keyCount : write.end;
      forRange(rb, from, to, [&](ImplicitLocOpBuilder& jb, Value j) {
        const SmallVector<Value, 4> element = elementAt(jb, grad, i, j);
        Value term = jb.create<memref::LoadOp>(write.terms, ValueRange{j, i});
        Value value;
        if (first) {
          Value kept = jb.create<arith::AndIOp>(
              jb.create<arith::CmpIOp>(arith::CmpIPredicate::uge, j, write.begin),
              jb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, write.end));
          value = jb.create<arith::SelectOp>(kept, term, f32Constant(jb, 0));
        } else {
          value = jb.create<arith::AddFOp>(loadF32(jb, grad.tensor, element), term);
        }
        storeF32(jb, value, grad.tensor, element);
      });
    });
  });
}

// The square of keys [j0, j0 + 8) and rows [i0, i0 + 8) of a gradient's patch: the terms' 8
// keys' rows transposed into its 8 rows' keys, each row's place in the gradient, its lanes.
struct Square {
  SmallVector<Value> values;             // row i0 + v's terms at keys j0 ..
  SmallVector<SmallVector<Value, 4>> at; // the gradient's indices of row i0 + v's key j0
  SmallVector<Value> inTile;             // per row: all lanes if a row of the tile, else none
  Value kept, inBlock;                   // lanes of keys the tile kept, of keys of the block
  Value whole;                           // i1: all 8 rows in the tile and 8 keys in the block
};

Square loadSquare(ImplicitLocOpBuilder& b, const GradientWrite& write, Value i0, Value j0) {
  const ScorePatch& grad = write.grad;
  auto vector = VectorType::get({kSquare}, b.getF32Type());
  Square square;
  SmallVector<Value> keys;
  for (int64_t u = 0; u < kSquare; ++u)
    keys.push_back(b.create<vector::LoadOp>(
        vector, write.terms, ValueRange{b.create<arith::AddIOp>(j0, indexConstant(b, u)), i0}));
  square.values = transposeLanes(b, keys);
  square.kept = lanesWithin(b, j0, write.begin, write.end);
  square.inBlock = lanesWithin(b, j0, indexConstant(b, 0), grad.keyCount);
  for (int64_t v = 0; v < kSquare; ++v) {
    Value i = b.create<arith::AddIOp>(i0, indexConstant(b, v));
    square.at.push_back(elementAt(b, grad, i, j0));
    square.inTile.push_back(rowLanes(b, grad, i));
  }
  auto fits = [&](Value first, Value extent) {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ule,
                                   b.create<arith::AddIOp>(first, indexConstant(b, kSquare)),
                                   extent);
  };
  square.whole = b.create<arith::AndIOp>(fits(i0, grad.count), fits(j0, grad.keyCount));
  return square;
}

// The first to reach the square: its terms at the keys kept, 0 at the block's others; stores
// unmasked where it is whole (a masked store is slow, and needed at the edges only).
void storeSquare(ImplicitLocOpBuilder& b, Value grad, const Square& square) {
  SmallVector<Value> values;
  for (Value value : square.values)
    values.push_back(b.create<arith::SelectOp>(square.kept, value, f32Splat(b, kSquare, 0)));
  storeLinesWhereWhole(b, grad, values, square.at, square.whole,
                       [&](ImplicitLocOpBuilder& eb, int64_t v) {
                         return eb.create<arith::AndIOp>(square.inTile[v], square.inBlock);
                       });
}

// A later (batch, head): its terms added at the keys kept, the others untouched.
void addSquare(ImplicitLocOpBuilder& b, Value grad, const Square& square) {
  auto vector = VectorType::get({kSquare}, b.getF32Type());
  for (int64_t v = 0; v < kSquare; ++v) {
    Value lanes = b.create<arith::AndIOp>(square.inTile[v], square.kept);
    Value old =
        b.create<vector::MaskedLoadOp>(vector, grad, square.at[v], lanes, f32Splat(b, kSquare, 0));
    b.create<vector::MaskedStoreOp>(grad, square.at[v], lanes,
                                    b.create<arith::AddFOp>(old, square.values[v]));
  }
}

} // namespace

void readPatch(ImplicitLocOpBuilder& b, const ScorePatch& patch, Value buffer) {
  Value tensor = patch.tensor;
  auto extent = [&](int64_t dim) { return b.create<memref::DimOp>(tensor, dim).getResult(); };
  auto clamped = [&](Value index, int64_t dim) {
    return clampIndex(b, index, b.create<arith::SubIOp>(extent(dim), indexConstant(b, 1)));
  };
  // The key block's columns as a query of keyCount columns.
  const SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0),
                                          patch.firstKey};
  const SmallVector<OpFoldResult> sizes{extent(0), extent(1), extent(2), patch.keyCount};
  const SmallVector<OpFoldResult> unit(4, b.getIndexAttr(1));
  Value columns = b.create<memref::SubViewOp>(tensor, offsets, sizes, unit);
  copyRowsTransposed(b, columns, clamped(patch.batch, 0), clamped(patch.head, 1), patch.row,
                     patch.count, buffer, 1.0);
}

void prefetchPatch(ImplicitLocOpBuilder& b, const ScorePatch& patch) {
  const int64_t perLine = elementsPerCacheLine(patch.tensor);
  auto last = [&](int64_t dim) {
    return b.create<arith::SubIOp>(b.create<memref::DimOp>(patch.tensor, dim), indexConstant(b, 1));
  };
  Value batch = clampIndex(b, patch.batch, last(0)), head = clampIndex(b, patch.head, last(1));
  Value lastRow = last(2), lastKey = last(3);
  Value lines = b.create<arith::CeilDivUIOp>(patch.keyCount, indexConstant(b, perLine));
  forEachIndex(
      b, {indexConstant(b, 0), indexConstant(b, 0)}, {patch.count, lines},
      [&](ImplicitLocOpBuilder& lb, ArrayRef<Value> at) {
        Value row = lb.create<arith::MinUIOp>(lb.create<arith::AddIOp>(patch.row, at[0]), lastRow);
        Value key = lb.create<arith::MinUIOp>(
            lb.create<arith::AddIOp>(patch.firstKey,
                                     lb.create<arith::MulIOp>(at[1], indexConstant(lb, perLine))),
            lastKey);
        lb.create<memref::PrefetchOp>(patch.tensor, ValueRange{batch, head, row, key},
                                      /*isWrite=*/false, /*localityHint=*/3,
                                      /*isDataCache=*/true);
      });
}

void writeGradientPatch(ImplicitLocOpBuilder& b, const ScorePatch& grad, Value terms, Value begin,
                        Value end, Value firstToReach) {
  const GradientWrite write{grad, terms, begin, end, firstToReach};
  if (!cast<MemRefType>(grad.tensor.getType()).getElementType().isF32() || !squaresFit(terms))
    return writeElements(b, write);
  const int64_t rows = cast<MemRefType>(terms.getType()).getDimSize(1);
  ifUnitInnerStride(
      b, grad.tensor,
      [&](ImplicitLocOpBuilder& sb, Value view) {
        onEitherBranch(sb, write, [&](ImplicitLocOpBuilder& wb, bool first) {
          forEachSquare(wb, grad, rows, [&](ImplicitLocOpBuilder& qb, Value i0, Value j0) {
            const Square square = loadSquare(qb, write, i0, j0);
            first ? storeSquare(qb, view, square) : addSquare(qb, view, square);
          });
        });
      },
      [&](ImplicitLocOpBuilder& eb) { writeElements(eb, write); });
}

} // namespace attnc::attn
