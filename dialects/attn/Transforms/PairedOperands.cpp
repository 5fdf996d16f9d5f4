//===- PairedOperands.cpp - K and V laid out for bf16 pair products -----------===//
#include "attn/Transforms/PairedOperands.h"

#include "Semantics/PairedProducts.h"
#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr int64_t kChunkKeys = 16; // keys a transposition takes: 16 rows of 16 pairs of bf16

} // namespace

bool takesPairedProducts(OnlineUpdateOp op) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  auto keyType = cast<MemRefType>(op.getKey().getType());
  auto valueType = cast<MemRefType>(op.getValue().getType());
  auto accType = op.getAcc().getType();
  // Defined outside the task loop: the kernel's arguments or its workspace (a gathered cache).
  auto outsideTasks = [&](Value v) { return kernel && v.getParentRegion() == &kernel.getBody(); };
  return op.hasPackedQuery() && op.getMaxKeys() && *op.getMaxKeys() % 32 == 0 &&
         !op.getBlockTable() && !op.getKeyScale() && !op.getScoreWeights() &&
         keyType.getElementType().isBF16() && valueType.getElementType().isBF16() &&
         keyType.getDimSize(3) % paired::kKeyDims == 0 &&
         valueType.getDimSize(3) % paired::kValueDims == 0 && accType.hasStaticShape() &&
         accType.getDimSize(3) % 16 == 0 && accType.getLayout().isIdentity() &&
         outsideTasks(op.getKey()) && outsideTasks(op.getValue());
}

namespace {

// The layout phase's task: one (batch entry bi, KV head h, block of keys from `first`).
class PairedLayout {
public:
  PairedLayout(ImplicitLocOpBuilder& b, OnlineUpdateOp op, int64_t blockKeys)
      : b(b), key(op.getKey()), value(op.getValue()),
        heads(cast<MemRefType>(key.getType()).getDimSize(1)),
        dk(cast<MemRefType>(key.getType()).getDimSize(3)),
        dv(cast<MemRefType>(value.getType()).getDimSize(3)), blockKeys(blockKeys) {}

  // The buffers, at the builder's insertion point.
  PairedOperands allocate();
  // The phase, at the builder's insertion point.
  void emitPhase();

private:
  void emitTask(Value task);
  // The zero chunk after the last, written by the last block's task.
  void emitZeroChunk();
  // Where key j's column c goes in V^T's chunks.
  SmallVector<Value> valueAt(ImplicitLocOpBuilder& at, Value j, Value c);
  // Row j of K and column j of V^T: the cache's, or zeros past Tk.
  void copyRow(ImplicitLocOpBuilder& at, Value j, bool inside);
  // Whole chunks of 16 keys inside Tk with vector loads where K's and V's rows are contiguous
  // (V^T by transposing pairs of columns as 32-bit lanes, then splitting the pairs); returns
  // where the rows element by element begin.
  Value emitVectorChunks();
  void copyKeyChunk(ImplicitLocOpBuilder& jb, Value j, Value keyRows);
  void transposeValueChunk(ImplicitLocOpBuilder& jb, Value j, Value valueRows);

  ImplicitLocOpBuilder& b;
  Value key, value;
  const int64_t heads, dk, dv, blockKeys;
  PairedOperands out;
  Value batch, seqK, blockSize, blocks, padded, chunks;
  Value bi, h, first, zero, zeroBf16; // the task's
};

PairedOperands PairedLayout::allocate() {
  const int64_t dynamic = ShapedType::kDynamic;
  batch = b.create<memref::DimOp>(key, 0);
  seqK = b.create<memref::DimOp>(key, 2);
  blockSize = indexConstant(b, blockKeys);
  blocks = b.create<arith::CeilDivUIOp>(seqK, blockSize);
  padded = b.create<arith::MulIOp>(blocks, blockSize);
  Type bf16 = b.getBF16Type();
  out.keys = b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dynamic, dk}, bf16),
                                       ValueRange{batch, padded});
  chunks = b.create<arith::DivUIOp>(padded, indexConstant(b, kValueChunkKeys));
  out.values = b.create<memref::AllocOp>(
      MemRefType::get({dynamic, heads, dynamic, dv, kValueChunkKeys}, bf16),
      ValueRange{batch, b.create<arith::AddIOp>(chunks, indexConstant(b, 1))});
  return out;
}

void PairedLayout::emitPhase() {
  // task = (b * H_kv + h) * blocks + block
  Value tasks =
      b.create<arith::MulIOp>(b.create<arith::MulIOp>(batch, indexConstant(b, heads)), blocks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  emitTask(forall.getInductionVar(0));
}

void PairedLayout::emitTask(Value task) {
  Value headTask = b.create<arith::DivUIOp>(task, blocks);
  h = b.create<arith::RemUIOp>(headTask, indexConstant(b, heads));
  bi = b.create<arith::DivUIOp>(headTask, indexConstant(b, heads));
  first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, blocks), blockSize);
  zero = indexConstant(b, 0);
  zeroBf16 = b.create<arith::ConstantOp>(b.getFloatAttr(b.getBF16Type(), 0.0));
  emitZeroChunk();
  Value vectorEnd = emitVectorChunks();
  forRange(b, vectorEnd, b.create<arith::AddIOp>(first, blockSize),
           [&](ImplicitLocOpBuilder& jb, Value j) {
             auto inside =
                 jb.create<scf::IfOp>(jb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, seqK),
                                      /*withElseRegion=*/true);
             auto then = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), inside.thenBlock());
             copyRow(then, j, true);
             auto otherwise =
                 ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), inside.elseBlock());
             copyRow(otherwise, j, false);
           });
}

void PairedLayout::emitZeroChunk() {
  Type bf16 = b.getBF16Type();
  auto last = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq,
                                                          b.create<arith::AddIOp>(first, blockSize),
                                                          padded),
                                  /*withElseRegion=*/false);
  auto zb = ImplicitLocOpBuilder::atBlockTerminator(b.getLoc(), last.thenBlock());
  Value zeros = zb.create<arith::ConstantOp>(
      DenseElementsAttr::get(VectorType::get({kValueChunkKeys}, bf16), zb.getFloatAttr(bf16, 0.0)));
  forRange(zb, zero, indexConstant(zb, dv), [&](ImplicitLocOpBuilder& cb, Value c) {
    cb.create<vector::StoreOp>(zeros, out.values, ValueRange{bi, h, chunks, c, zero});
  });
}

SmallVector<Value> PairedLayout::valueAt(ImplicitLocOpBuilder& at, Value j, Value c) {
  Value chunkSize = indexConstant(at, kValueChunkKeys);
  return SmallVector<Value>{bi, h, at.create<arith::DivUIOp>(j, chunkSize), c,
                            at.create<arith::RemUIOp>(j, chunkSize)};
}

void PairedLayout::copyRow(ImplicitLocOpBuilder& at, Value j, bool inside) {
  forRange(at, zero, indexConstant(at, dk), [&](ImplicitLocOpBuilder& cb, Value c) {
    Value element = inside ? cb.create<memref::LoadOp>(key, ValueRange{bi, h, j, c}) : zeroBf16;
    cb.create<memref::StoreOp>(element, out.keys, ValueRange{bi, h, j, c});
  });
  forRange(at, zero, indexConstant(at, dv), [&](ImplicitLocOpBuilder& cb, Value c) {
    Value element = inside ? cb.create<memref::LoadOp>(value, ValueRange{bi, h, j, c}) : zeroBf16;
    cb.create<memref::StoreOp>(element, out.values, valueAt(cb, j, c));
  });
}

Value PairedLayout::emitVectorChunks() {
  Value chunk = indexConstant(b, kChunkKeys);
  Value keysInside = b.create<arith::SubIOp>(
      b.create<arith::MaxUIOp>(
          b.create<arith::MinUIOp>(seqK, b.create<arith::AddIOp>(first, blockSize)), first),
      first);
  Value chunked = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(keysInside, chunk), chunk);
  auto [keyRows, keysUnit] = unitInnerStrideView(b, key);
  auto [valueRows, valuesUnit] = unitInnerStrideView(b, value);
  if (dv % (2 * kChunkKeys) != 0)
    return first;
  Value unit = b.create<arith::AndIOp>(keysUnit, valuesUnit);
  Value vectorEnd = b.create<arith::SelectOp>(unit, b.create<arith::AddIOp>(first, chunked), first);
  b.create<scf::ForOp>(first, vectorEnd, chunk, std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
                         ImplicitLocOpBuilder jb(loc, nested);
                         copyKeyChunk(jb, j, keyRows);
                         transposeValueChunk(jb, j, valueRows);
                         jb.create<scf::YieldOp>();
                       });
  return vectorEnd;
}

void PairedLayout::copyKeyChunk(ImplicitLocOpBuilder& jb, Value j, Value keyRows) {
  auto bf16Row = VectorType::get({2 * kChunkKeys}, jb.getBF16Type());
  for (int64_t k = 0; k < kChunkKeys; ++k) {
    Value row = jb.create<arith::AddIOp>(j, indexConstant(jb, k));
    for (int64_t c = 0; c < dk; c += 2 * kChunkKeys) {
      const SmallVector<Value> at{bi, h, row, indexConstant(jb, c)};
      Value elements = jb.create<vector::LoadOp>(bf16Row, keyRows, at);
      jb.create<vector::StoreOp>(elements, out.keys, at);
    }
  }
}

void PairedLayout::transposeValueChunk(ImplicitLocOpBuilder& jb, Value j, Value valueRows) {
  auto bf16Row = VectorType::get({2 * kChunkKeys}, jb.getBF16Type());
  auto pairRow = VectorType::get({kChunkKeys}, jb.getI32Type());
  for (int64_t c = 0; c < dv; c += 2 * kChunkKeys) {
    SmallVector<Value> rows;
    for (int64_t k = 0; k < kChunkKeys; ++k) {
      Value row = jb.create<arith::AddIOp>(j, indexConstant(jb, k));
      Value elements = jb.create<vector::LoadOp>(bf16Row, valueRows,
                                                 ValueRange{bi, h, row, indexConstant(jb, c)});
      rows.push_back(jb.create<vector::BitCastOp>(pairRow, elements));
    }
    // Row p: columns c + 2p and c + 2p + 1 of the 16 keys, as pairs.
    SmallVector<Value> columnPairs = transposeLanes(jb, rows);
    for (int64_t p = 0; p < kChunkKeys; ++p) {
      auto split =
          jb.create<vector::DeinterleaveOp>(jb.create<vector::BitCastOp>(bf16Row, columnPairs[p]));
      for (int64_t e = 0; e < 2; ++e)
        jb.create<vector::StoreOp>(e == 0 ? split.getRes1() : split.getRes2(), out.values,
                                   valueAt(jb, j, indexConstant(jb, c + 2 * p + e)));
    }
  }
}

} // namespace

PairedOperands layOutPairedOperands(RewriterBase& rewriter, OnlineUpdateOp op, int64_t blockKeys) {
  Block& body = op->getParentOfType<func::FuncOp>().getBody().front();
  Operation* attention = body.findAncestorOpInBlock(*op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  PairedLayout layout(b, op, blockKeys);
  b.setInsertionPoint(firstPhase(body));
  PairedOperands out = layout.allocate();
  b.setInsertionPoint(attention);
  layout.emitPhase();
  b.setInsertionPoint(body.getTerminator());
  b.create<memref::DeallocOp>(out.keys);
  b.create<memref::DeallocOp>(out.values);
  return out;
}

} // namespace attnc::attn
