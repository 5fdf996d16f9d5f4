//===- GatherPages.cpp - a paged KV cache copied into per-sequence buffers -----===//
//
// Only the decode kernel reads K and V through a block table (LowerDecode.cpp). For the others,
// a phase of its own at the start of the kernel copies each sequence's keys and values into
// buffers [B, H_kv, Tk, d] that the ops read instead: O(B Tk d) copies against the prefill's
// O(Tq Tk d) work. A task copies `rows` positions of one sequence for every head; positions past
// seq_lens[b] are zero, and their block table entries are not read.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/LoweringUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The first op of the kernel's block that runs as a phase or becomes one: the gather's phase
// goes before it, after every workspace allocation (attn-outline-tasks needs them first).
Operation* firstPhase(Block& block) {
  for (Operation& op : block)
    if (isa<scf::ForallOp>(op) || op.getDialect()->getNamespace() == "attn")
      return &op;
  return block.getTerminator();
}

} // namespace

LogicalResult gatherPages(RewriterBase& rewriter, Operation* root, int64_t rows) {
  SmallVector<ScoreOpInterface> ops;
  root->walk([&](ScoreOpInterface op) {
    if (op.getBlockTable())
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  if (rows <= 0)
    return ops.front()->emitOpError() << "gather_pages: a task must copy at least one row";
  Block& block = *ops.front()->getBlock();
  Value table = ops.front().getBlockTable(), lengths = ops.front().getSeqLens();
  for (ScoreOpInterface op : ops)
    if (op->getBlock() != &block || op.getBlockTable() != table)
      return op->emitOpError() << "gather_pages: the paged ops of a kernel share one block and "
                                  "one block table";

  // Each pages buffer [pages, H_kv, page_size, d] once, whichever ops read it.
  llvm::MapVector<Value, Value> gathered;
  auto collect = [&](Value pages) { gathered.insert({pages, Value()}); };
  for (ScoreOpInterface op : ops) {
    collect(op.getKey());
    if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation()))
      collect(update.getValue());
  }

  Operation* lastDefinition = nullptr;
  for (auto& [pages, buffer] : gathered)
    if (Operation* def = pages.getDefiningOp();
        def && def->getBlock() == &block &&
        (!lastDefinition || lastDefinition->isBeforeInBlock(def)))
      lastDefinition = def;
  if (lastDefinition)
    rewriter.setInsertionPointAfter(lastDefinition);
  else
    rewriter.setInsertionPointToStart(&block);
  ImplicitLocOpBuilder b(ops.front()->getLoc(), rewriter);
  Value zero = indexConstant(b, 0);
  Value batch = b.create<memref::DimOp>(table, 0);
  auto firstType = cast<MemRefType>(gathered.front().first.getType());
  const int64_t pageSize = firstType.getDimSize(2);
  Value seqK = b.create<arith::MulIOp>(b.create<memref::DimOp>(table, 1),
                                       indexConstant(b, pageSize));
  for (auto& [pages, buffer] : gathered) {
    auto type = cast<MemRefType>(pages.getType());
    buffer = b.create<memref::AllocOp>(
        MemRefType::get({ShapedType::kDynamic, type.getDimSize(1), ShapedType::kDynamic,
                         type.getDimSize(3)},
                        type.getElementType()),
        ValueRange{batch, seqK});
  }

  b.setInsertionPoint(firstPhase(block));
  Value tileRows = indexConstant(b, rows);
  Value chunks = b.create<arith::CeilDivUIOp>(seqK, tileRows);
  auto forall = b.create<scf::ForallOp>(
      ArrayRef<OpFoldResult>{b.create<arith::MulIOp>(batch, chunks).getResult()}, ValueRange{},
      std::nullopt);
  {
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value task = forall.getInductionVar(0);
    Value sequence = b.create<arith::DivUIOp>(task, chunks);
    Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, chunks), tileRows);
    Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, tileRows), seqK);
    Value length = b.create<arith::IndexCastOp>(
        b.getIndexType(), b.create<memref::LoadOp>(lengths, ValueRange{sequence}));
    Value pageRows = indexConstant(b, pageSize);
    forRange(b, first, last, [&](ImplicitLocOpBuilder& jb, Value j) {
      Value inside = jb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, j, length);
      auto ifInside = jb.create<scf::IfOp>(inside, /*withElseRegion=*/true);
      auto then = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), ifInside.thenBlock());
      auto otherwise = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), ifInside.elseBlock());
      Value page = then.create<arith::IndexCastOp>(
          then.getIndexType(),
          then.create<memref::LoadOp>(
              table, ValueRange{sequence, then.create<arith::DivUIOp>(j, pageRows)}));
      Value row = then.create<arith::RemUIOp>(j, pageRows);
      for (auto& [pages, buffer] : gathered) {
        auto type = cast<MemRefType>(pages.getType());
        Value heads = indexConstant(then, type.getDimSize(1));
        Value dim = indexConstant(then, type.getDimSize(3));
        forRange(then, zero, heads, [&](ImplicitLocOpBuilder& hb, Value g) {
          forRange(hb, zero, dim, [&](ImplicitLocOpBuilder& cb, Value c) {
            cb.create<memref::StoreOp>(cb.create<memref::LoadOp>(pages, ValueRange{page, g, row, c}),
                                       buffer, ValueRange{sequence, g, j, c});
          });
        });
        Value zeroElement =
            otherwise.create<arith::ConstantOp>(otherwise.getZeroAttr(type.getElementType()));
        forRange(otherwise, zero, indexConstant(otherwise, type.getDimSize(1)),
                 [&](ImplicitLocOpBuilder& hb, Value g) {
                   forRange(hb, zero, indexConstant(hb, type.getDimSize(3)),
                            [&](ImplicitLocOpBuilder& cb, Value c) {
                              cb.create<memref::StoreOp>(zeroElement, buffer,
                                                         ValueRange{sequence, g, j, c});
                            });
                 });
      }
    });
  }

  // The ops read the buffers, as keys [B, H_kv, Tk, d] with no block table.
  for (ScoreOpInterface op : ops)
    rewriter.modifyOpInPlace(op, [&] {
      if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation())) {
        update.getKeyMutable().assign(gathered.lookup(update.getKey()));
        update.getValueMutable().assign(gathered.lookup(update.getValue()));
        update.getBlockTableMutable().clear();
        update.getSeqLensMutable().clear();
      } else {
        auto weights = cast<WeightsOp>(op.getOperation());
        weights.getKeyMutable().assign(gathered.lookup(weights.getKey()));
        weights.getBlockTableMutable().clear();
        weights.getSeqLensMutable().clear();
      }
    });
  b.setInsertionPoint(block.getTerminator());
  for (auto& [pages, buffer] : gathered)
    b.create<memref::DeallocOp>(buffer);
  return success();
}

} // namespace attnc::attn
