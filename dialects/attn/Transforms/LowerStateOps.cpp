//===- LowerStateOps.cpp - online_init, pack_query, online_finalize to loops --===//
//
// These ops touch each state element once per query tile, against d_k x keys work in the
// update, so they lower to plain scalar loops that work for any domain; pack_query, which the
// backward runs once per (key block, query tile), transposes squares in registers where it can.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/LowerStateOps.h"

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Stores `value` into every element of `buffer`.
void fill(ImplicitLocOpBuilder& b, Value buffer, Value value) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<Value> indices;
  std::function<void(ImplicitLocOpBuilder&, int64_t)> nest = [&](ImplicitLocOpBuilder& ib,
                                                                 int64_t dim) {
    if (dim == type.getRank()) {
      ib.create<memref::StoreOp>(value, buffer, indices);
      return;
    }
    Value extent = ib.create<memref::DimOp>(buffer, dim);
    forRange(ib, indexConstant(ib, 0), extent, [&](ImplicitLocOpBuilder& inner, Value i) {
      indices.push_back(i);
      nest(inner, dim + 1);
      indices.pop_back();
    });
  };
  nest(b, 0);
}

} // namespace

void lowerInit(ImplicitLocOpBuilder& b, OnlineInitOp op) {
  fill(b, op.getAcc(), f32Constant(b, 0));
  fill(b, op.getMax(), f32Constant(b, -kInf));
  fill(b, op.getSum(), f32Constant(b, 0));
}

namespace {

// The side of the squares packSquares transposes in registers: 8 ymm on AVX2.
constexpr int64_t kSquare = 8;

// The query's columns, d_k: packed's rows [0, d_k) are written, any past them left as they are.
Value queryColumns(ImplicitLocOpBuilder& b, PackQueryOp op) {
  return b.create<memref::DimOp>(op.getQuery(), 3);
}

// packed[c, r] = scale * q[b, h, i + r, c] element by element.
void packElements(ImplicitLocOpBuilder& b, PackQueryOp op) {
  Value zero = indexConstant(b, 0);
  Value dk = queryColumns(b, op);
  Value width = b.create<memref::DimOp>(op.getPacked(), 1);
  Value scale = f32Constant(b, op.getScale().convertToDouble());
  forRange(b, zero, op.getRows(), [&](ImplicitLocOpBuilder& ib, Value r) {
    Value row = ib.create<arith::AddIOp>(op.getRow(), r);
    forRange(ib, zero, dk, [&](ImplicitLocOpBuilder& ic, Value c) {
      Value q = loadF32(ic, op.getQuery(), {op.getBatch(), op.getHead(), row, c});
      ic.create<memref::StoreOp>(ic.create<arith::MulFOp>(q, scale), op.getPacked(),
                                 ValueRange{c, r});
    });
  });
  forRange(b, op.getRows(), width, [&](ImplicitLocOpBuilder& ib, Value r) {
    forRange(ib, zero, dk, [&](ImplicitLocOpBuilder& ic, Value c) {
      ic.create<memref::StoreOp>(f32Constant(ic, 0), op.getPacked(), ValueRange{c, r});
    });
  });
}

// The same in squares of kSquare rows x kSquare columns, each kSquare masked row loads of
// `rows` (q with a static unit column stride) transposed in registers (transposeLanes). A
// dynamic d_k (a bias's columns of a key block) masks the columns past it too.
void packSquares(ImplicitLocOpBuilder& b, PackQueryOp op, Value rows) {
  auto packed = cast<MemRefType>(op.getPacked().getType());
  auto sourceRow = VectorType::get({kSquare}, op.getQuery().getType().getElementType());
  auto rowMask = VectorType::get({kSquare}, b.getI1Type());
  Value none = b.create<arith::ConstantOp>(sourceRow, b.getZeroAttr(sourceRow));
  const int64_t staticColumns = op.getQuery().getType().getDimSize(3);
  const bool allColumns = !ShapedType::isDynamic(staticColumns) && staticColumns % kSquare == 0;
  Value dk = queryColumns(b, op), side = indexConstant(b, kSquare);
  const double scale = op.getScale().convertToDouble();
  Value factor = f32Splat(b, kSquare, scale);
  forEachIndex(
      b, {indexConstant(b, 0), indexConstant(b, 0)},
      {indexConstant(b, packed.getDimSize(1) / kSquare), b.create<arith::CeilDivUIOp>(dk, side)},
      [&](ImplicitLocOpBuilder& sb, ArrayRef<Value> square) {
        Value r0 = sb.create<arith::MulIOp>(square[0], side);
        Value c0 = sb.create<arith::MulIOp>(square[1], side);
        Value columns = allColumns ? Value()
                                   : sb.create<vector::CreateMaskOp>(
                                         rowMask, ValueRange{sb.create<arith::SubIOp>(dk, c0)});
        SmallVector<Value> lines;
        for (int64_t i = 0; i < kSquare; ++i) {
          Value r = sb.create<arith::AddIOp>(r0, indexConstant(sb, i));
          // Rows past the end read nothing (a masked load's lanes off touch no memory): 0.
          Value inside = sb.create<vector::BroadcastOp>(
              rowMask, sb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, r, op.getRows()));
          if (columns)
            inside = sb.create<arith::AndIOp>(inside, columns);
          Value at = sb.create<arith::AddIOp>(op.getRow(), r);
          lines.push_back(toF32(
              sb, sb.create<vector::MaskedLoadOp>(sourceRow, rows,
                                                  ValueRange{op.getBatch(), op.getHead(), at, c0},
                                                  inside, none)));
        }
        SmallVector<Value> transposed = transposeLanes(sb, lines);
        for (int64_t j = 0; j < kSquare; ++j)
          sb.create<vector::StoreOp>(
              scale == 1.0 ? transposed[j]
                           : sb.create<arith::MulFOp>(transposed[j], factor).getResult(),
              op.getPacked(), ValueRange{sb.create<arith::AddIOp>(c0, indexConstant(sb, j)), r0});
      });
}

} // namespace

// packed[c, r] = scale * q[b, h, i + r, c] for c < d_k and r < rows, 0 for the rows past the
// end: in squares where packed's extents are multiples of kSquare and q's rows are contiguous
// at run time, element by element otherwise.
void lowerPack(ImplicitLocOpBuilder& b, PackQueryOp op) {
  auto packed = cast<MemRefType>(op.getPacked().getType());
  if (!packed.hasStaticShape() || packed.getDimSize(0) % kSquare != 0 ||
      packed.getDimSize(1) % kSquare != 0)
    return packElements(b, op);
  ifUnitInnerStride(
      b, op.getQuery(), [&](ImplicitLocOpBuilder& tb, Value rows) { packSquares(tb, op, rows); },
      [&](ImplicitLocOpBuilder& eb) { packElements(eb, op); });
}

// o = acc / sum and lse = max + c + log(sum); a row with sum = 0 kept nothing: o = 0,
// lse = -inf. With sinks, the row's sink is folded into (max, sum, acc) first.
void lowerFinalize(ImplicitLocOpBuilder& b, OnlineFinalizeOp op) {
  const OnlineState state;
  Value zero = indexConstant(b, 0);
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
  Value dv = indexConstant(b, op.getAcc().getType().getDimSize(2));
  forRange(b, zero, sizes[0], [&](ImplicitLocOpBuilder& b0, Value nb) {
    forRange(b0, zero, sizes[1], [&](ImplicitLocOpBuilder& b1, Value nh) {
      forRange(b1, zero, sizes[2], [&](ImplicitLocOpBuilder& ib, Value r) {
        Value batch = ib.create<arith::AddIOp>(offsets[0], nb);
        Value head = ib.create<arith::AddIOp>(offsets[1], nh);
        Value row = ib.create<arith::AddIOp>(offsets[2], r);
        Value sum = ib.create<memref::LoadOp>(op.getSum(), ValueRange{nb, nh, r});
        Value max = ib.create<memref::LoadOp>(op.getMax(), ValueRange{nb, nh, r});
        Value sink;
        if (Value sinks = op.getSinks())
          sink = ib.create<memref::LoadOp>(sinks, ValueRange{head});
        FinishedRow finished = state.finish(ib, max, sum, sink);
        forRange(ib, zero, dv, [&](ImplicitLocOpBuilder& ic, Value c) {
          Value a = ic.create<memref::LoadOp>(op.getAcc(), ValueRange{nb, nh, c, r});
          storeF32(ic, ic.create<arith::MulFOp>(a, finished.inverse), op.getOutput(),
                   {batch, head, row, c});
        });
        if (Value lse = op.getLse())
          ib.create<memref::StoreOp>(state.finishedLse(ib, finished.max, finished.sum), lse,
                                     ValueRange{batch, head, row});
      });
    });
  });
}

void copyRowsTransposed(ImplicitLocOpBuilder& b, Value src, Value batch, Value head, Value row,
                        Value count, Value dst, double scale) {
  auto op = b.create<PackQueryOp>(src, batch, head, row, count, dst, b.getF64FloatAttr(scale));
  lowerPack(b, op);
  op.erase();
}

} // namespace attnc::attn
