//===- DirectGradient.cpp - a score-shaped gradient written from a key block's terms ---===//
#include "attn/Transforms/DirectGradient.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The side of the squares transposed in registers: 8 ymm on AVX2.
constexpr int64_t kSquare = 8;

// The store (first) or the add (later) of each element, on the branches of firstToReach.
void onEitherBranch(ImplicitLocOpBuilder& b, const DirectPatch& patch,
                    const std::function<void(ImplicitLocOpBuilder&, bool first)>& write) {
  auto branch = b.create<scf::IfOp>(patch.firstToReach, /*withElseRegion=*/true);
  ImplicitLocOpBuilder sb(b.getLoc(), branch.getThenBodyBuilder());
  write(sb, true);
  ImplicitLocOpBuilder ab(b.getLoc(), branch.getElseBodyBuilder());
  write(ab, false);
}

void writeElements(ImplicitLocOpBuilder& b, const DirectPatch& patch) {
  onEitherBranch(b, patch, [&](ImplicitLocOpBuilder& wb, bool first) {
    forRange(wb, indexConstant(wb, 0), patch.count, [&](ImplicitLocOpBuilder& rb, Value i) {
      Value at = rb.create<arith::AddIOp>(patch.row, i);
      // The first writes every key of the block, a later one only those kept.
      Value from = first ? indexConstant(rb, 0) : patch.begin;
      Value to = first ? patch.keyCount : patch.end;
      forRange(rb, from, to, [&](ImplicitLocOpBuilder& jb, Value j) {
        const SmallVector<Value, 4> element{patch.gradBatch, patch.gradHead, at,
                                            jb.create<arith::AddIOp>(patch.firstKey, j)};
        Value term = jb.create<memref::LoadOp>(patch.terms, ValueRange{j, i});
        Value value;
        if (first) {
          Value kept = jb.create<arith::AndIOp>(
              jb.create<arith::CmpIOp>(arith::CmpIPredicate::uge, j, patch.begin),
              jb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, patch.end));
          value = jb.create<arith::SelectOp>(kept, term, f32Constant(jb, 0));
        } else {
          value = jb.create<arith::AddFOp>(loadF32(jb, patch.grad, element), term);
        }
        storeF32(jb, value, patch.grad, element);
      });
    });
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

// The square of keys [j0, j0 + 8) and rows [i0, i0 + 8) of a patch: terms' 8 keys' rows
// transposed into its 8 rows' keys, each row's place in the gradient, and its lanes.
struct Square {
  SmallVector<Value> values;             // row i0 + v's terms at keys j0 ..
  SmallVector<SmallVector<Value, 4>> at; // grad's indices of row i0 + v's key j0
  SmallVector<Value> inTile;             // per row: all lanes if a row of the tile, else none
  Value kept, inBlock;                   // lanes of keys the tile kept, of keys of the block
  Value whole;                           // i1: all 8 rows in the tile and 8 keys in the block
};

Square loadSquare(ImplicitLocOpBuilder& b, const DirectPatch& patch, Value i0, Value j0) {
  auto vector = VectorType::get({kSquare}, b.getF32Type());
  Square square;
  SmallVector<Value> keys;
  for (int64_t u = 0; u < kSquare; ++u)
    keys.push_back(b.create<vector::LoadOp>(
        vector, patch.terms, ValueRange{b.create<arith::AddIOp>(j0, indexConstant(b, u)), i0}));
  square.values = transposeLanes(b, keys);
  square.kept = lanesWithin(b, j0, patch.begin, patch.end);
  square.inBlock = lanesWithin(b, j0, indexConstant(b, 0), patch.keyCount);
  Value key = b.create<arith::AddIOp>(patch.firstKey, j0);
  for (int64_t v = 0; v < kSquare; ++v) {
    Value i = b.create<arith::AddIOp>(i0, indexConstant(b, v));
    square.at.push_back(
        {patch.gradBatch, patch.gradHead, b.create<arith::AddIOp>(patch.row, i), key});
    square.inTile.push_back(b.create<vector::BroadcastOp>(
        square.kept.getType(), b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, i, patch.count)));
  }
  auto fits = [&](Value first, Value extent) {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ule,
                                   b.create<arith::AddIOp>(first, indexConstant(b, kSquare)),
                                   extent);
  };
  square.whole = b.create<arith::AndIOp>(fits(i0, patch.count), fits(j0, patch.keyCount));
  return square;
}

// The first to reach the square: its terms at the keys kept, 0 at the block's others; stores
// unmasked where it is whole (a masked store is slow, and needed at the edges only).
void storeSquare(ImplicitLocOpBuilder& b, Value grad, const Square& square) {
  SmallVector<Value> values;
  for (Value value : square.values)
    values.push_back(b.create<arith::SelectOp>(square.kept, value, f32Splat(b, kSquare, 0)));
  auto whole = b.create<scf::IfOp>(square.whole, /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb(b.getLoc(), whole.getThenBodyBuilder());
  for (int64_t v = 0; v < kSquare; ++v)
    tb.create<vector::StoreOp>(values[v], grad, square.at[v]);
  ImplicitLocOpBuilder eb(b.getLoc(), whole.getElseBodyBuilder());
  for (int64_t v = 0; v < kSquare; ++v)
    eb.create<vector::MaskedStoreOp>(
        grad, square.at[v], eb.create<arith::AndIOp>(square.inTile[v], square.inBlock), values[v]);
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

// `grad` a view with a static unit key stride: the patch in squares.
void writeSquares(ImplicitLocOpBuilder& b, const DirectPatch& patch, Value grad) {
  const int64_t rows = cast<MemRefType>(patch.terms.getType()).getDimSize(1);
  Value zero = indexConstant(b, 0), side = indexConstant(b, kSquare);
  onEitherBranch(b, patch, [&](ImplicitLocOpBuilder& wb, bool first) {
    forEachIndex(
        wb, {zero, zero},
        {indexConstant(wb, rows / kSquare), wb.create<arith::CeilDivUIOp>(patch.keyCount, side)},
        [&](ImplicitLocOpBuilder& sb, ArrayRef<Value> at) {
          const Square square = loadSquare(sb, patch, sb.create<arith::MulIOp>(at[0], side),
                                           sb.create<arith::MulIOp>(at[1], side));
          first ? storeSquare(sb, grad, square) : addSquare(sb, grad, square);
        });
  });
}

} // namespace

void writeDirectPatch(ImplicitLocOpBuilder& b, const DirectPatch& patch) {
  const int64_t rows = cast<MemRefType>(patch.terms.getType()).getDimSize(1);
  const int64_t block = cast<MemRefType>(patch.terms.getType()).getDimSize(0);
  if (!cast<MemRefType>(patch.grad.getType()).getElementType().isF32() || rows % kSquare != 0 ||
      block % kSquare != 0)
    return writeElements(b, patch);
  auto [view, unit] = unitInnerStrideView(b, patch.grad);
  auto contiguous = b.create<scf::IfOp>(unit, /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb(b.getLoc(), contiguous.getThenBodyBuilder());
  writeSquares(tb, patch, view);
  ImplicitLocOpBuilder eb(b.getLoc(), contiguous.getElseBodyBuilder());
  writeElements(eb, patch);
}

} // namespace attnc::attn
