//===- LowerMatmul.cpp - attn.matmul as register-tiled tasks -------------------===//
//
// A variant's operand product (mha's projections and W_O, bilinear's q W, Linformer's E K and
// F V, linear attention's chunk products) lowers to a phase of its own, in place of the op:
// one task per `rows` rows and up to kColumnTile columns of `out` for a batch and head. As the
// attention does with its query tile, a task packs its rows of lhs transposed, rows in vector
// lanes, kReductionBlock steps of the contraction at a time, and accumulates out^T in register
// tiles of `columns` columns of rows / vectorWidth vectors, each rhs element broadcast to a
// vector: the attention's PV tile, so rhs and out may have any strides and nothing is packed
// but lhs's rows. Under batch_sum (the backward's weight gradients, out [1, H, T, C]) a task
// sums over every batch entry in order, so each element is one task's ordered sum.
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

#include <numeric>

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
  MatmulLowering(MatmulOp op, const MatmulTiles& tiles) : op(op), tiles(tiles), operands(op) {
    const int64_t perTile = std::min(operands.columns, kColumnTile);
    columnTile = (perTile + tiles.columns - 1) / tiles.columns * tiles.columns;
  }

  scf::ForallOp emit(ImplicitLocOpBuilder& b);

private:
  using Builder = ImplicitLocOpBuilder;
  MatmulTask taskAt(Builder& b, Value task, Value rowTiles, Value columnTiles);
  MatmulTask ofBatch(Builder& b, MatmulTask task, Value batch);
  void packByRows(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
                  Value table);
  void pack(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
            Value table);
  void packSquares(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
                   Value rows);
  void packSquare(Builder& b, const MatmulTask& task, Value step, Value stepMask, int64_t row,
                  Value packedStep, Value packed, Value rows);
  void packSteps(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
                 Value rows);
  Value keptRows(Builder& b, Value firstRow, Value step, const MatmulTask& task);
  void sumSteps(Builder& b, const MatmulTask& task, Value packed, Value tile, Value table);
  void multiply(Builder& b, const MatmulTask& task, Value first, Value steps, Value packed,
                Value tile, Value factor);
  void multiplyByRows(Builder& b, const MatmulTask& task, Value first, Value steps,
                      Value packed, Value tile);
  Value blocksOf(Builder& b, const MatmulTask& task);
  void zero(Builder& b, Value tile);
  // out's rows at run time.
  Value outRows(Builder& b) { return b.create<memref::DimOp>(operands.out, 2); }
  void accumulateOnto(Builder& b, const MatmulTask& task, Value tile);
  void write(Builder& b, const MatmulTask& task, Value tile);

  MatmulOp op;
  MatmulTiles tiles;
  MatmulOperands operands;
  int64_t columnTile;
};

MatmulTask MatmulLowering::taskAt(Builder& b, Value task, Value rowTiles, Value columnTiles) {
  MatmulTask t;
  Value heads = indexConstant(b, operands.out.getType().getDimSize(1));
  Value columnTileIndex = b.create<arith::RemUIOp>(task, columnTiles);
  Value rest = b.create<arith::DivUIOp>(task, columnTiles);
  Value rowTile = b.create<arith::RemUIOp>(rest, rowTiles);
  rest = b.create<arith::DivUIOp>(rest, rowTiles);
  t.head = b.create<arith::RemUIOp>(rest, heads);
  t.batch = b.create<arith::DivUIOp>(rest, heads);
  t.lhsHead = operands.factorIndex(b, operands.lhs, 1, t.head);
  t.rhsHead = operands.factorIndex(b, operands.rhs, 1, t.head);
  Value rows = outRows(b);
  t.firstRow = b.create<arith::MulIOp>(rowTile, indexConstant(b, tiles.rows));
  t.rowEnd = b.create<arith::MinUIOp>(
      b.create<arith::AddIOp>(t.firstRow, indexConstant(b, tiles.rows)), rows);
  t.firstColumn = b.create<arith::MulIOp>(columnTileIndex, indexConstant(b, columnTile));
  t.columnEnd =
      b.create<arith::MinUIOp>(b.create<arith::AddIOp>(t.firstColumn, indexConstant(b, columnTile)),
                               indexConstant(b, operands.columns));
  return op.getBatchSum() ? t : ofBatch(b, t, t.batch); // with batch_sum, per batch entry
}

// The task over the factors' batch entry `batch` (out's own, or each that batch_sum sums): the
// same rows and columns of out.
MatmulTask MatmulLowering::ofBatch(Builder& b, MatmulTask task, Value batch) {
  const MatmulOperands::BatchEntry entry = operands.batchEntry(b, batch, task.rowEnd);
  task.lhsBatch = entry.lhs;
  task.rhsBatch = entry.rhs;
  task.extent = entry.extent;
  return task;
}

// packed[r, t] = lhs[.., firstRow + t, first + r] (+ PE) for r < steps, 0 for rows past the
// end (read clamped, then replaced, so no row past the buffer is touched) and, when causal,
// for steps past the row.
void MatmulLowering::pack(Builder& b, const MatmulTask& task, Value first, Value steps,
                          Value packed, Value table) {
  Value lastRow = b.create<arith::SubIOp>(outRows(b), indexConstant(b, 1));
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

// pack, a square of vectorWidth rows and steps at a time where lhs's steps are contiguous and
// no sinusoid is added (the usual case): a row's steps one masked vector load, the square
// transposed in registers, a step's rows one vector store. Element by element the pack took
// about as many instructions as the products where out has few columns (Linformer's E K: 64
// columns, 4 FMAs a packed element). With lhs_transposed, where its rows are contiguous, a
// step's rows are one masked load as they lie (packSteps). The element-wise pack takes the
// rest (a sinusoid, strided steps, one lane: a GPU thread's row).
void MatmulLowering::packByRows(Builder& b, const MatmulTask& task, Value first, Value steps,
                                Value packed, Value table) {
  if (tiles.vectorWidth == 1 || op.getSinusoid())
    return pack(b, task, first, steps, packed, table);
  auto [rows, unit] = unitInnerStrideView(b, operands.lhs);
  auto branch = b.create<scf::IfOp>(unit, /*withElseRegion=*/true);
  Builder tb = Builder::atBlockBegin(b.getLoc(), branch.thenBlock());
  if (op.getLhsTransposed())
    packSteps(tb, task, first, steps, packed, rows);
  else
    packSquares(tb, task, first, steps, packed, rows);
  Builder eb = Builder::atBlockBegin(b.getLoc(), branch.elseBlock());
  pack(eb, task, first, steps, packed, table);
}

// The squares of steps [r0, r0 + W) of the task's rows, for r0 < steps: steps past `steps` read
// as 0 (the masked loads touch no element past them) and stored as such in rows of packed
// below kReductionBlock, which the products do not read.
void MatmulLowering::packSquares(Builder& b, const MatmulTask& task, Value first, Value steps,
                                 Value packed, Value rows) {
  const int64_t width = tiles.vectorWidth;
  auto stepsFrom = [&](Builder& rb, Value r0) {
    Value left =
        rb.create<arith::MinUIOp>(rb.create<arith::SubIOp>(steps, r0), indexConstant(rb, width));
    return rb.create<vector::CreateMaskOp>(VectorType::get({width}, rb.getI1Type()), left)
        .getResult();
  };
  b.create<scf::ForOp>(indexConstant(b, 0), steps, indexConstant(b, width), std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value r0, ValueRange) {
                         Builder rb(loc, nested);
                         Value mask = stepsFrom(rb, r0);
                         Value step = rb.create<arith::AddIOp>(first, r0);
                         for (int64_t row = 0; row < tiles.rows; row += width)
                           packSquare(rb, task, step, mask, row, r0, packed, rows);
                         rb.create<scf::YieldOp>();
                       });
}

// packed[packedStep + j, row + i] = lhs[.., firstRow + row + i, step + j] for i, j < W: W rows
// read clamped to the last row, transposed, and each step's lanes of rows past the end, and
// under causal of rows before the step, set to 0.
void MatmulLowering::packSquare(Builder& b, const MatmulTask& task, Value step, Value stepMask,
                                int64_t row, Value packedStep, Value packed, Value rows) {
  const int64_t width = tiles.vectorWidth;
  auto lhsRow = VectorType::get({width}, operands.lhs.getType().getElementType());
  auto f32Row = VectorType::get({width}, b.getF32Type());
  Value lastRow = b.create<arith::SubIOp>(outRows(b), indexConstant(b, 1));
  Value firstRow = b.create<arith::AddIOp>(task.firstRow, indexConstant(b, row));
  SmallVector<Value> rowVectors;
  for (int64_t i = 0; i < width; ++i) {
    Value at =
        b.create<arith::MinUIOp>(b.create<arith::AddIOp>(firstRow, indexConstant(b, i)), lastRow);
    Value x = b.create<vector::MaskedLoadOp>(
        lhsRow, rows, ValueRange{task.lhsBatch, task.lhsHead, at, step}, stepMask,
        b.create<arith::ConstantOp>(lhsRow, b.getZeroAttr(lhsRow)));
    rowVectors.push_back(lhsRow == f32Row ? x : b.create<arith::ExtFOp>(f32Row, x).getResult());
  }
  Value zeros = f32Splat(b, width, 0);
  SmallVector<Value> columns = transposeLanes(b, rowVectors);
  for (int64_t j = 0; j < width; ++j) {
    Value keep = keptRows(b, firstRow, b.create<arith::AddIOp>(step, indexConstant(b, j)), task);
    b.create<vector::StoreOp>(b.create<arith::SelectOp>(keep, columns[j], zeros), packed,
                              ValueRange{b.create<arith::AddIOp>(packedStep, indexConstant(b, j)),
                                         indexConstant(b, row)});
  }
}

// Which of the vectorWidth rows from firstRow take `step`: those before the task's end and,
// under causal, at or past the step (row t sums steps r <= t).
Value MatmulLowering::keptRows(Builder& b, Value firstRow, Value step, const MatmulTask& task) {
  const int64_t width = tiles.vectorWidth;
  auto indexRow = VectorType::get({width}, b.getIndexType());
  SmallVector<int64_t> lanes(width);
  std::iota(lanes.begin(), lanes.end(), 0);
  Value rowIds =
      b.create<arith::AddIOp>(b.create<vector::BroadcastOp>(indexRow, firstRow),
                              b.create<arith::ConstantOp>(indexRow, b.getIndexVectorAttr(lanes)));
  Value keep = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, rowIds,
                                       b.create<vector::BroadcastOp>(indexRow, task.rowEnd));
  if (op.getCausal())
    keep = b.create<arith::AndIOp>(
        keep, b.create<arith::CmpIOp>(arith::CmpIPredicate::ule,
                                      b.create<vector::BroadcastOp>(indexRow, step), rowIds));
  return keep;
}

// packed[r, t] = lhs[.., first + r, firstRow + t] for r < steps, with lhs_transposed where
// lhs's rows are contiguous (the backward's X^T dY over X [B, T, d_model]): a step's
// vectorWidth rows are one masked load, stored as they lie; lanes of rows past the task's end
// and, under causal, of rows before the step are 0 and not touched.
void MatmulLowering::packSteps(Builder& b, const MatmulTask& task, Value first, Value steps,
                               Value packed, Value rows) {
  const int64_t width = tiles.vectorWidth;
  auto lhsRow = VectorType::get({width}, operands.lhs.getType().getElementType());
  auto f32Row = VectorType::get({width}, b.getF32Type());
  forRange(b, indexConstant(b, 0), steps, [&](ImplicitLocOpBuilder& rb, Value r) {
    Value step = rb.create<arith::AddIOp>(first, r);
    for (int64_t row = 0; row < tiles.rows; row += width) {
      Value firstRow = rb.create<arith::AddIOp>(task.firstRow, indexConstant(rb, row));
      Value keep = keptRows(rb, firstRow, step, task);
      Value x = rb.create<vector::MaskedLoadOp>(
          lhsRow, rows, ValueRange{task.lhsBatch, task.lhsHead, step, firstRow}, keep,
          rb.create<arith::ConstantOp>(lhsRow, rb.getZeroAttr(lhsRow)));
      if (lhsRow != f32Row)
        x = rb.create<arith::ExtFOp>(f32Row, x);
      rb.create<vector::StoreOp>(x, packed, ValueRange{r, indexConstant(rb, row)});
    }
  });
}

// tile[c, t] += sum_{r < steps} packed[r, t] rhs[.., first + r, firstColumn + c], `columns`
// columns of rows / vectorWidth vectors at a time, in a loop over the task's column blocks (one
// block's code: unrolled, the blocks of 256 columns made the matmuls most of a kernel's compile
// time); a register tile's columns past C read the last column and are never written out.
void MatmulLowering::multiply(Builder& b, const MatmulTask& task, Value first, Value steps,
                              Value packed, Value tile, Value factor) {
  const int64_t vectors = tiles.rows / tiles.vectorWidth;
  auto vectorType = VectorType::get({tiles.vectorWidth}, b.getF32Type());
  Value lastColumn = indexConstant(b, operands.columns - 1);
  forRange(b, indexConstant(b, 0), blocksOf(b, task), [&](Builder& kb, Value blockIndex) {
    Value block = kb.create<arith::MulIOp>(blockIndex, indexConstant(kb, tiles.columns));
    Value firstColumn = kb.create<arith::AddIOp>(task.firstColumn, block);
    auto tileAt = [&](ImplicitLocOpBuilder& x, int64_t c, int64_t v) {
      return SmallVector<Value>{x.create<arith::AddIOp>(block, indexConstant(x, c)),
                                indexConstant(x, v * tiles.vectorWidth)};
    };
    SmallVector<Value> acc;
    for (int64_t c = 0; c < tiles.columns; ++c)
      for (int64_t v = 0; v < vectors; ++v)
        acc.push_back(kb.create<vector::LoadOp>(vectorType, tile, tileAt(kb, c, v)));
    SmallVector<Value> columnIndex;
    for (int64_t c = 0; c < tiles.columns; ++c)
      columnIndex.push_back(kb.create<arith::MinUIOp>(
          kb.create<arith::AddIOp>(firstColumn, indexConstant(kb, c)), lastColumn));
    acc = foldRange(
        kb, indexConstant(kb, 0), steps, acc,
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
        kb.create<vector::StoreOp>(acc[c * vectors + v], tile, tileAt(kb, c, v));
  });
}

// The task's register-tile blocks of `columns` columns: ceil((columnEnd - firstColumn) /
// columns).
Value MatmulLowering::blocksOf(Builder& b, const MatmulTask& task) {
  return b.create<arith::CeilDivUIOp>(b.create<arith::SubIOp>(task.columnEnd, task.firstColumn),
                                      indexConstant(b, tiles.columns));
}

// multiply, with rhs seen with a static unit column stride where its columns are contiguous
// (row-major weights and K, V: the usual case), so a step's elements lie at constant offsets of
// one address; with a dynamic stride each needed its own address (H 8, d_model 512, T 2048: the
// projections ran at 55% of the FMA peak). Else with a static unit step stride where its steps
// are (a weight read transposed: the backward's dx = dy W^T), so each column's elements are
// consecutive from an address of its own (the transposed products ran at a third of the
// row-major ones' rate through the dynamic strides). Any other strides take the dynamic ones.
void MatmulLowering::multiplyByRows(Builder& b, const MatmulTask& task, Value first,
                                    Value steps, Value packed, Value tile) {
  auto [byRows, unitColumns] = unitInnerStrideView(b, operands.rhs);
  auto byColumns = b.create<scf::IfOp>(unitColumns, /*withElseRegion=*/true);
  Builder tb = Builder::atBlockBegin(b.getLoc(), byColumns.thenBlock());
  multiply(tb, task, first, steps, packed, tile, byRows);
  Builder eb = Builder::atBlockBegin(b.getLoc(), byColumns.elseBlock());
  auto [bySteps, unitSteps] = unitStrideView(eb, operands.rhs, 2);
  auto branch = eb.create<scf::IfOp>(unitSteps, /*withElseRegion=*/true);
  Builder sb = Builder::atBlockBegin(b.getLoc(), branch.thenBlock());
  multiply(sb, task, first, steps, packed, tile, bySteps);
  Builder ab = Builder::atBlockBegin(b.getLoc(), branch.elseBlock());
  multiply(ab, task, first, steps, packed, tile, operands.rhs);
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
      cb.create<memref::StoreOp>(loadF32(cb, operands.out, {task.batch, task.head, t, c}), tile,
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
      storeF32(cb, x, operands.out, {task.batch, task.head, t, c});
    });
  });
}

scf::ForallOp MatmulLowering::emit(Builder& b) {
  Value rowTiles = b.create<arith::CeilDivUIOp>(outRows(b), indexConstant(b, tiles.rows));
  Value columnTiles = indexConstant(b, (operands.columns + columnTile - 1) / columnTile);
  // A weight's gradient (batch_sum: out's batch of 1, d_model rows) may be one task: kept a
  // phase by lhs's batch, known at run time.
  Value tasks = unfoldedTaskCount(
      b,
      b.create<arith::MulIOp>(
          b.create<arith::MulIOp>(b.create<memref::DimOp>(operands.out, 0),
                                  indexConstant(b, operands.out.getType().getDimSize(1))),
          b.create<arith::MulIOp>(rowTiles, columnTiles)),
      b.create<memref::DimOp>(operands.lhs, 0));
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
  if (op.getBatchSum())
    forRange(b, indexConstant(b, 0), b.create<memref::DimOp>(operands.lhs, 0),
             [&](ImplicitLocOpBuilder& sb, Value batch) {
               sumSteps(sb, ofBatch(sb, task, batch), packed, tile, table);
             });
  else
    sumSteps(b, task, packed, tile, table);
  write(b, task, tile);
  return forall;
}

// tile += the task's products over its extent, kReductionBlock steps packed at a time.
void MatmulLowering::sumSteps(Builder& b, const MatmulTask& task, Value packed, Value tile,
                              Value table) {
  Value block = indexConstant(b, kReductionBlock);
  b.create<scf::ForOp>(indexConstant(b, 0), task.extent, block, std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value first, ValueRange) {
                         ImplicitLocOpBuilder rb(loc, nested);
                         Value steps = rb.create<arith::MinUIOp>(
                             block, rb.create<arith::SubIOp>(task.extent, first));
                         packByRows(rb, task, first, steps, packed, table);
                         multiplyByRows(rb, task, first, steps, packed, tile);
                         rb.create<scf::YieldOp>();
                       });
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
