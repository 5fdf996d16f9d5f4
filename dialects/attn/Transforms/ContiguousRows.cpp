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
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  auto type = cast<MemRefType>(rows.getType());
  const int64_t dynamic = ShapedType::kDynamic;
  Value copy =
      workspaceBuffer(b, body,
                      MemRefType::get({dynamic, type.getDimSize(1), dynamic, type.getDimSize(3)},
                                      type.getElementType()),
                      [&](ImplicitLocOpBuilder& at) {
                        return SmallVector<Value>{at.create<memref::DimOp>(rows, 0),
                                                  at.create<memref::DimOp>(rows, 2)};
                      });
  rowChunkPhase(b, body.findAncestorOpInBlock(*op), rows, kTaskRows,
                [&](ImplicitLocOpBuilder& tb, Value bi, Value h, Value first) {
                  copyTaskRows(tb, rows, copy, bi, h, first);
                });
  return copy;
}

} // namespace attnc::attn
