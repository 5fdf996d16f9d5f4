//===- LowerMatmul.cpp - attn.matmul as register-tiled tasks -------------------===//
//
// A variant's operand product (mha's projections and W_O, bilinear's q W, Linformer's E K and
// F V, linear attention's chunk products) lowers to a phase of its own, in place of the op:
// one task per `rows` rows and up to kColumnTile columns of `out` for a batch and head. As the
// attention does with its query tile, a task packs its rows of lhs transposed, rows in vector
// lanes, kReductionBlock steps of the contraction at a time, and accumulates out^T in register
// tiles of `columns` columns of rows / vectorWidth vectors, each rhs element broadcast to a
// vector: the attention's PV tile, so rhs and out may have any strides and nothing is packed
// but lhs's rows.
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/MatmulOperands.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// Contraction steps packed at once: 256 steps of 48 rows of f32 are 48 KiB, which each column
// tile of the block streams from L2.
constexpr int64_t kReductionBlock = 256;
// Out columns per task at most: a task's out^T tile (256 x 48 f32) stays in L2, and lhs's
// rows are packed once per 256 columns.
constexpr int64_t kColumnTile = 256;

// What one task computes: out[batch, head, [firstRow, rowEnd), [firstColumn, columnEnd)] over
// the contraction's first `extent` steps, from lhs's and rhs's batch and head.
struct MatmulTask {
  Value batch, head, lhsBatch, lhsHead, rhsBatch, rhsHead;
  Value firstRow, rowEnd, firstColumn, columnEnd, extent;
};

class MatmulLowering {
public:
  MatmulLowering(MatmulOp op, const MatmulTiles& tiles)
      : op(op), tiles(tiles), operands(op), lhs(operands.lhs), rhs(operands.rhs), out(operands.out),
        columns(operands.columns) {
    const int64_t perTile = std::min(columns, kColumnTile);
    columnTile = (perTile + tiles.columns - 1) / tiles.columns * tiles.columns;
  }

  scf::ForallOp emit(ImplicitLocOpBuilder& b);

private:
  using Builder = ImplicitLocOpBuilder;
  MatmulTask taskAt(Builder& b, Value task, Value rowTiles, Value columnTiles);
  void pack(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
            Value table);
  void multiply(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
                Value tile, Value factor);
  void multiplyByRows(Builder& b, const MatmulTask& task, Value first, Value steps,
                      Value packed, Value tile);
  void zero(Builder& b, Value tile);
  void accumulateOnto(Builder& b, const MatmulTask& task, Value tile);
  void write(Builder& b, const MatmulTask& task, Value tile);

  MatmulOp op;
  MatmulTiles tiles;
  MatmulOperands operands;
  TypedValue<MemRefType> lhs, rhs, out;
  int64_t columns, columnTile;
};

MatmulTask MatmulLowering::taskAt(Builder& b, Value task, Value rowTiles, Value columnTiles) {
  MatmulTask t;
  Value heads = indexConstant(b, out.getType().getDimSize(1));
  Value columnTileIndex = b.create<arith::RemUIOp>(task, columnTiles);
  Value rest = b.create<arith::DivUIOp>(task, columnTiles);
  Value rowTile = b.create<arith::RemUIOp>(rest, rowTiles);
  rest = b.create<arith::DivUIOp>(rest, rowTiles);
  t.head = b.create<arith::RemUIOp>(rest, heads);
  t.batch = b.create<arith::DivUIOp>(rest, heads);
  t.lhsBatch = operands.factorIndex(b, lhs, 0, t.batch);
  t.lhsHead = operands.factorIndex(b, lhs, 1, t.head);
  t.rhsBatch = operands.factorIndex(b, rhs, 0, t.batch);
  t.rhsHead = operands.factorIndex(b, rhs, 1, t.head);
  Value rows = b.create<memref::DimOp>(out, 2);
  t.firstRow = b.create<arith::MulIOp>(rowTile, indexConstant(b, tiles.rows));
  t.rowEnd = b.create<arith::MinUIOp>(
      b.create<arith::AddIOp>(t.firstRow, indexConstant(b, tiles.rows)), rows);
  t.firstColumn = b.create<arith::MulIOp>(columnTileIndex, indexConstant(b, columnTile));
  t.columnEnd =
      b.create<arith::MinUIOp>(b.create<arith::AddIOp>(t.firstColumn, indexConstant(b, columnTile)),
                               indexConstant(b, columns));
  t.extent = operands.extent(b, t.batch, t.rowEnd);
  return t;
}

// packed[r, t] = lhs[.., firstRow + t, first + r] (+ PE) for r < steps, 0 for rows past the
// end (read clamped, then replaced, so no row past the buffer is touched) and, when causal,
// for steps past the row.
void MatmulLowering::pack(Builder& b, const MatmulTask& task, Value first, Value steps,
                          Value packed, Value table) {
  Value lastRow = b.create<arith::SubIOp>(b.create<memref::DimOp>(out, 2), indexConstant(b, 1));
  forRange(b, indexConstant(b, 0), steps, [&](ImplicitLocOpBuilder& rb, Value r) {
    Value step = rb.create<arith::AddIOp>(first, r);
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, tiles.rows),
             [&](ImplicitLocOpBuilder& tb, Value t) {
               Value row = tb.create<arith::AddIOp>(task.firstRow, t);
               Value x = operands.lhsElement(tb, table, task.lhsBatch, task.lhsHead,
                                             tb.create<arith::MinUIOp>(row, lastRow), step);
               Value inside = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, row, task.rowEnd);
               if (op.getCausal())
                 inside = tb.create<arith::AndIOp>(
                     inside, tb.create<arith::CmpIOp>(arith::CmpIPredicate::ule, step, row));
               x = tb.create<arith::SelectOp>(inside, x, f32Constant(tb, 0));
               tb.create<memref::StoreOp>(x, packed, ValueRange{r, t});
             });
  });
}

// tile[c, t] += sum_{r < steps} packed[r, t] rhs[.., first + r, firstColumn + c], `columns`
// columns of rows / vectorWidth vectors at a time; a register tile's columns past C read the
// last column and are never written out.
void MatmulLowering::multiply(Builder& b, const MatmulTask& task, Value first, Value steps,
                              Value packed, Value tile, Value factor) {
  const int64_t vectors = tiles.rows / tiles.vectorWidth;
  auto vectorType = VectorType::get({tiles.vectorWidth}, b.getF32Type());
  Value lastColumn = indexConstant(b, columns - 1);
  for (int64_t block = 0; block < columnTile; block += tiles.columns) {
    Value firstColumn = b.create<arith::AddIOp>(task.firstColumn, indexConstant(b, block));
    Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, firstColumn, task.columnEnd);
    auto guard = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
    ImplicitLocOpBuilder gb = ImplicitLocOpBuilder::atBlockBegin(b.getLoc(), guard.thenBlock());
    auto tileAt = [&](ImplicitLocOpBuilder& x, int64_t c, int64_t v) {
      return SmallVector<Value>{indexConstant(x, block + c),
                                indexConstant(x, v * tiles.vectorWidth)};
    };
    SmallVector<Value> acc;
    for (int64_t c = 0; c < tiles.columns; ++c)
      for (int64_t v = 0; v < vectors; ++v)
        acc.push_back(gb.create<vector::LoadOp>(vectorType, tile, tileAt(gb, c, v)));
    SmallVector<Value> columnIndex;
    for (int64_t c = 0; c < tiles.columns; ++c)
      columnIndex.push_back(gb.create<arith::MinUIOp>(
          gb.create<arith::AddIOp>(firstColumn, indexConstant(gb, c)), lastColumn));
    acc = foldRange(
        gb, indexConstant(gb, 0), steps, acc,
        [&](ImplicitLocOpBuilder& rb, Value r, ValueRange carried) {
          SmallVector<Value> rowVectors, scalars;
          for (int64_t v = 0; v < vectors; ++v)
            rowVectors.push_back(rb.create<vector::LoadOp>(
                vectorType, packed, ValueRange{r, indexConstant(rb, v * tiles.vectorWidth)}));
          Value step = rb.create<arith::AddIOp>(first, r);
          for (Value c : columnIndex)
            scalars.push_back(loadF32(rb, factor, {task.rhsBatch, task.rhsHead, step, c}));
          return rankOneUpdate(rb, rowVectors, scalars, carried);
        });
    for (int64_t c = 0; c < tiles.columns; ++c)
      for (int64_t v = 0; v < vectors; ++v)
        gb.create<vector::StoreOp>(acc[c * vectors + v], tile, tileAt(gb, c, v));
  }
}

// multiply, with rhs seen with a static unit column stride where its columns are contiguous
// (row-major weights and K, V: the usual case), so a step's elements lie at constant offsets of
// one address; with a dynamic stride each needed its own address (H 8, d_model 512, T 2048: the
// projections ran at 55% of the FMA peak).
void MatmulLowering::multiplyByRows(Builder& b, const MatmulTask& task, Value first,
                                    Value steps, Value packed, Value tile) {
  auto metadata = b.create<memref::ExtractStridedMetadataOp>(rhs);
  Value unit = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, metadata.getStrides()[3],
                                       indexConstant(b, 1));
  auto branch = b.create<scf::IfOp>(unit, /*withElseRegion=*/true);
  SmallVector<int64_t> strides(3, ShapedType::kDynamic);
  strides.push_back(1);
  auto rowsType = MemRefType::get(
      rhs.getType().getShape(), rhs.getType().getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides));
  Builder tb = Builder::atBlockBegin(b.getLoc(), branch.thenBlock());
  SmallVector<OpFoldResult> sizes = getAsOpFoldResult(metadata.getSizes());
  SmallVector<OpFoldResult> rowStrides = getAsOpFoldResult(metadata.getStrides());
  rowStrides.back() = tb.getIndexAttr(1);
  Value byRows = tb.create<memref::ReinterpretCastOp>(rowsType, rhs, metadata.getOffset(), sizes,
                                                      rowStrides);
  multiply(tb, task, first, steps, packed, tile, byRows);
  Builder eb = Builder::atBlockBegin(b.getLoc(), branch.elseBlock());
  multiply(eb, task, first, steps, packed, tile, rhs);
}

void MatmulLowering::zero(Builder& b, Value tile) {
  Value zeros = f32Splat(b, tiles.vectorWidth, 0);
  forRange(b, indexConstant(b, 0), indexConstant(b, columnTile),
           [&](ImplicitLocOpBuilder& cb, Value c) {
             for (int64_t t = 0; t < tiles.rows; t += tiles.vectorWidth)
               cb.create<vector::StoreOp>(zeros, tile, ValueRange{c, indexConstant(cb, t)});
           });
}

// tile[c - firstColumn, t - firstRow] = out[.., t, c] over the task's rows and columns: the
// sum starts from out's elements (accumulate).
void MatmulLowering::accumulateOnto(Builder& b, const MatmulTask& task, Value tile) {
  forRange(b, task.firstRow, task.rowEnd, [&](ImplicitLocOpBuilder& rb, Value t) {
    Value row = rb.create<arith::SubIOp>(t, task.firstRow);
    forRange(rb, task.firstColumn, task.columnEnd, [&](ImplicitLocOpBuilder& cb, Value c) {
      cb.create<memref::StoreOp>(loadF32(cb, out, {task.batch, task.head, t, c}), tile,
                                 ValueRange{cb.create<arith::SubIOp>(c, task.firstColumn), row});
    });
  });
}

// out[.., t, c] = tile[c - firstColumn, t - firstRow] over the task's rows and columns.
void MatmulLowering::write(Builder& b, const MatmulTask& task, Value tile) {
  forRange(b, task.firstRow, task.rowEnd, [&](ImplicitLocOpBuilder& rb, Value t) {
    Value row = rb.create<arith::SubIOp>(t, task.firstRow);
    forRange(rb, task.firstColumn, task.columnEnd, [&](ImplicitLocOpBuilder& cb, Value c) {
      Value x = cb.create<memref::LoadOp>(
          tile, ValueRange{cb.create<arith::SubIOp>(c, task.firstColumn), row});
      storeF32(cb, x, out, {task.batch, task.head, t, c});
    });
  });
}

scf::ForallOp MatmulLowering::emit(Builder& b) {
  Value rowTiles =
      b.create<arith::CeilDivUIOp>(b.create<memref::DimOp>(out, 2), indexConstant(b, tiles.rows));
  Value columnTiles = indexConstant(b, (columns + columnTile - 1) / columnTile);
  Value tasks = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(b.create<memref::DimOp>(out, 0),
                              indexConstant(b, out.getType().getDimSize(1))),
      b.create<arith::MulIOp>(rowTiles, columnTiles));
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  MatmulTask task = taskAt(b, forall.getInductionVar(0), rowTiles, columnTiles);
  Value tile =
      b.create<memref::AllocaOp>(MemRefType::get({columnTile, tiles.rows}, b.getF32Type()));
  Value packed =
      b.create<memref::AllocaOp>(MemRefType::get({kReductionBlock, tiles.rows}, b.getF32Type()));
  Value table = operands.sinusoidTable(b);
  zero(b, tile);
  if (op.getAccumulate())
    accumulateOnto(b, task, tile);
  Value block = indexConstant(b, kReductionBlock);
  b.create<scf::ForOp>(indexConstant(b, 0), task.extent, block, std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value first, ValueRange) {
                         ImplicitLocOpBuilder rb(loc, nested);
                         Value steps = rb.create<arith::MinUIOp>(
                             block, rb.create<arith::SubIOp>(task.extent, first));
                         pack(rb, task, first, steps, packed, table);
                         multiplyByRows(rb, task, first, steps, packed, tile);
                         rb.create<scf::YieldOp>();
                       });
  write(b, task, tile);
  return forall;
}

} // namespace

FailureOr<scf::ForallOp> lowerMatmul(RewriterBase& rewriter, MatmulOp op,
                                     const MatmulTiles& tiles) {
  if (tiles.rows <= 0 || tiles.vectorWidth <= 0 || tiles.columns <= 0 ||
      tiles.rows % tiles.vectorWidth != 0)
    return op.emitOpError() << "lower_matmuls: rows (" << tiles.rows
                            << ") must be a positive multiple of vector_width ("
                            << tiles.vectorWidth << "), columns (" << tiles.columns << ") positive";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  scf::ForallOp forall = MatmulLowering(op, tiles).emit(b);
  rewriter.eraseOp(op);
  return forall;
}

} // namespace attnc::attn
