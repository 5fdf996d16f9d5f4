//===- ContiguousRows.cpp - K's and V's rows copied together -------------------===//
#include "attn/Transforms/ContiguousRows.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr int64_t kTaskRows = 64; // rows a task of the copying phase moves

// rows[bi, h, j, :] into copy[bi, h, j, :] for j in [first, first + kTaskRows) and below T: a
// row one vector load and store where its elements are contiguous, else element by element.
void copyTaskRows(ImplicitLocOpBuilder& b, Value rows, Value copy, Value bi, Value h, Value first) {
  auto type = cast<MemRefType>(rows.getType());
  const int64_t width = type.getDimSize(3);
  Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, indexConstant(b, kTaskRows)),
                                        b.create<memref::DimOp>(rows, 2));
  Value zero = indexConstant(b, 0);
  ifUnitInnerStride(
      b, rows,
      [&](ImplicitLocOpBuilder& tb, Value view) {
        auto row = VectorType::get({width}, type.getElementType());
        forRange(tb, first, last, [&](ImplicitLocOpBuilder& jb, Value j) {
          const SmallVector<Value> at{bi, h, j, zero};
          jb.create<vector::StoreOp>(jb.create<vector::LoadOp>(row, view, at), copy, at);
        });
      },
      [&](ImplicitLocOpBuilder& eb) {
        forEachIndex(eb, {first, zero}, {last, indexConstant(eb, width)},
                     [&](ImplicitLocOpBuilder& cb, ArrayRef<Value> jc) {
                       const SmallVector<Value> at{bi, h, jc[0], jc[1]};
                       cb.create<memref::StoreOp>(cb.create<memref::LoadOp>(rows, at), copy, at);
                     });
      });
}

} // namespace

bool rowsLieApart(OnlineUpdateOp op, Value rows) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  if (!kernel || rows.getParentRegion() != &kernel.getBody())
    return false; // rows a task forms itself: not one buffer a phase can copy
  // The copy is allocated, and its extents read, before the kernel's first phase.
  Operation* def = rows.getDefiningOp();
  Operation* phase = firstPhase(kernel.getBody().front());
  if (def && !def->isBeforeInBlock(phase))
    return false;
  auto type = cast<MemRefType>(rows.getType());
  if (type.isDynamicDim(1) || type.isDynamicDim(3))
    return false;
  while (auto cast = rows.getDefiningOp<memref::CastOp>())
    rows = cast.getSource();
  auto transpose = rows.getDefiningOp<memref::TransposeOp>();
  return transpose &&
         transpose.getPermutation().getDimPosition(2) != transpose.getIn().getType().getRank() - 2;
}

Value copyRowsTogether(RewriterBase& rewriter, OnlineUpdateOp op, Value rows) {
  Block& body = op->getParentOfType<func::FuncOp>().getBody().front();
  Operation* attention = body.findAncestorOpInBlock(*op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  auto type = cast<MemRefType>(rows.getType());
  b.setInsertionPoint(firstPhase(body));
  Value batch = b.create<memref::DimOp>(rows, 0), seq = b.create<memref::DimOp>(rows, 2);
  Value copy = b.create<memref::AllocOp>(MemRefType::get({ShapedType::kDynamic, type.getDimSize(1),
                                                          ShapedType::kDynamic, type.getDimSize(3)},
                                                         type.getElementType()),
                                         ValueRange{batch, seq});

  // task = (bi H + h) chunks + chunk
  b.setInsertionPoint(attention);
  Value heads = indexConstant(b, type.getDimSize(1));
  Value chunks = b.create<arith::CeilDivUIOp>(seq, indexConstant(b, kTaskRows));
  Value tasks = b.create<arith::MulIOp>(b.create<arith::MulIOp>(batch, heads), chunks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value task = forall.getInductionVar(0);
    Value head = b.create<arith::DivUIOp>(task, chunks);
    Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, chunks),
                                          indexConstant(b, kTaskRows));
    copyTaskRows(b, rows, copy, b.create<arith::DivUIOp>(head, heads),
                 b.create<arith::RemUIOp>(head, heads), first);
  }
  b.setInsertionPoint(body.getTerminator());
  b.create<memref::DeallocOp>(copy);
  return copy;
}

} // namespace attnc::attn
