//===- AmxOperands.cpp - K and V laid out for AMX tiles ------------------------===//
#include "attn/Transforms/AmxOperands.h"

#include "attn/Transforms/LoweringUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace attnc::attn {

bool takesAmxTiles(OnlineUpdateOp op) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  auto keyType = cast<MemRefType>(op.getKey().getType());
  auto valueType = cast<MemRefType>(op.getValue().getType());
  auto accType = op.getAcc().getType();
  // Defined outside the task loop: the kernel's arguments or its workspace (a gathered cache).
  auto outsideTasks = [&](Value v) { return kernel && v.getParentRegion() == &kernel.getBody(); };
  return op.hasPackedQuery() && op.getMaxKeys() && *op.getMaxKeys() % 32 == 0 &&
         !op.getBlockTable() && !op.getKeyScale() && keyType.getElementType().isBF16() &&
         valueType.getElementType().isBF16() && keyType.getDimSize(3) % 32 == 0 &&
         valueType.getDimSize(3) % 16 == 0 && accType.hasStaticShape() &&
         accType.getDimSize(3) % 16 == 0 && accType.getLayout().isIdentity() &&
         outsideTasks(op.getKey()) && outsideTasks(op.getValue());
}

AmxOperands layOutForAmx(RewriterBase& rewriter, OnlineUpdateOp op, int64_t blockKeys) {
  Block& body = op->getParentOfType<func::FuncOp>().getBody().front();
  Operation* attention = body.findAncestorOpInBlock(*op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value key = op.getKey(), value = op.getValue();
  const int64_t heads = cast<MemRefType>(key.getType()).getDimSize(1);
  const int64_t dk = cast<MemRefType>(key.getType()).getDimSize(3);
  const int64_t dv = cast<MemRefType>(value.getType()).getDimSize(3);
  const int64_t dynamic = ShapedType::kDynamic;

  b.setInsertionPoint(firstPhase(body));
  Value batch = b.create<memref::DimOp>(key, 0), seqK = b.create<memref::DimOp>(key, 2);
  Value blockSize = indexConstant(b, blockKeys);
  Value blocks = b.create<arith::CeilDivUIOp>(seqK, blockSize);
  Value padded = b.create<arith::MulIOp>(blocks, blockSize);
  Type bf16 = b.getBF16Type();
  AmxOperands out;
  out.keys = b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dynamic, dk}, bf16),
                                       ValueRange{batch, padded});
  out.values = b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dv, dynamic}, bf16),
                                         ValueRange{batch, padded});

  // task = (b * H_kv + h) * blocks + block
  b.setInsertionPoint(attention);
  Value tasks =
      b.create<arith::MulIOp>(b.create<arith::MulIOp>(batch, indexConstant(b, heads)), blocks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{},
                                        std::nullopt);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value task = forall.getInductionVar(0);
    Value headTask = b.create<arith::DivUIOp>(task, blocks);
    Value h = b.create<arith::RemUIOp>(headTask, indexConstant(b, heads));
    Value bi = b.create<arith::DivUIOp>(headTask, indexConstant(b, heads));
    Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, blocks), blockSize);
    Value zero = indexConstant(b, 0);
    Value zeroBf16 = b.create<arith::ConstantOp>(b.getFloatAttr(bf16, 0.0));
    // Row j of K and column j of V^T: the cache's, or zeros past Tk.
    auto copyRow = [&](ImplicitLocOpBuilder& at, Value j, bool inside) {
      forRange(at, zero, indexConstant(at, dk), [&](ImplicitLocOpBuilder& cb, Value c) {
        Value element = inside ? cb.create<memref::LoadOp>(key, ValueRange{bi, h, j, c})
                               : zeroBf16;
        cb.create<memref::StoreOp>(element, out.keys, ValueRange{bi, h, j, c});
      });
      forRange(at, zero, indexConstant(at, dv), [&](ImplicitLocOpBuilder& cb, Value c) {
        Value element = inside ? cb.create<memref::LoadOp>(value, ValueRange{bi, h, j, c})
                               : zeroBf16;
        cb.create<memref::StoreOp>(element, out.values, ValueRange{bi, h, c, j});
      });
    };
    forRange(b, first, b.create<arith::AddIOp>(first, blockSize),
             [&](ImplicitLocOpBuilder& jb, Value j) {
               auto inside = jb.create<scf::IfOp>(
                   jb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, seqK),
                   /*withElseRegion=*/true);
               auto then = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(),
                                                                   inside.thenBlock());
               copyRow(then, j, true);
               auto otherwise = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(),
                                                                        inside.elseBlock());
               copyRow(otherwise, j, false);
             });
  }
  b.setInsertionPoint(body.getTerminator());
  b.create<memref::DeallocOp>(out.keys);
  b.create<memref::DeallocOp>(out.values);
  return out;
}

} // namespace attnc::attn
