//===- GatherCache.cpp - a paged or quantized KV cache copied into plain buffers ===//
//
// Only the decode kernel reads K and V through a block table or dequantises quantized rows as it
// goes (LowerDecode.cpp). For the others, a phase of its own at the start of the kernel copies
// each sequence's keys and values into buffers [B, H_kv, Tk, d] of the query's type (int8 or
// fp8 E4M3 rows decoded and times their scales) that the ops read instead: O(B Tk d) copies
// against the prefill's O(Tq Tk d) work. A task copies `rows` positions of one sequence for
// every head; in a paged cache the positions past seq_lens[b] are zero, and their block table
// entries are not read.
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

// A cache buffer the ops read, its scales (quantized rows) and the plain buffer it becomes.
struct Gathered {
  Value scale, buffer;
};

} // namespace

LogicalResult gatherCache(RewriterBase& rewriter, Operation* root, int64_t rows) {
  SmallVector<ScoreOpInterface> ops;
  root->walk([&](ScoreOpInterface op) {
    if (op.getBlockTable() || op.getKeyScale())
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  if (rows <= 0)
    return ops.front()->emitOpError() << "gather_cache: a task must copy at least one row";
  Block& block = *ops.front()->getBlock();
  Value table = ops.front().getBlockTable(), lengths = ops.front().getSeqLens();
  for (ScoreOpInterface op : ops)
    if (op->getBlock() != &block || op.getBlockTable() != table)
      return op->emitOpError() << "gather_cache: the cache's ops share one block and one block "
                                  "table";

  // Each cache buffer once, whichever ops read it: keys [B or pages, H_kv, Tk or page_size, d].
  llvm::MapVector<Value, Gathered> gathered;
  for (ScoreOpInterface op : ops) {
    gathered.insert({op.getKey(), {op.getKeyScale(), Value()}});
    if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation()))
      gathered.insert({update.getValue(), {update.getValueScale(), Value()}});
  }

  Operation* lastDefinition = nullptr;
  for (auto& [rowsOf, entry] : gathered)
    for (Value v : {rowsOf, entry.scale})
      if (Operation* def = v ? v.getDefiningOp() : nullptr;
          def && def->getBlock() == &block &&
          (!lastDefinition || lastDefinition->isBeforeInBlock(def)))
        lastDefinition = def;
  if (lastDefinition)
    rewriter.setInsertionPointAfter(lastDefinition);
  else
    rewriter.setInsertionPointToStart(&block);
  ImplicitLocOpBuilder b(ops.front()->getLoc(), rewriter);
  Value zero = indexConstant(b, 0);
  Value anyRows = gathered.front().first;
  const int64_t pageSize = cast<MemRefType>(anyRows.getType()).getDimSize(2);
  Value batch = table ? b.create<memref::DimOp>(table, 0).getResult()
                      : b.create<memref::DimOp>(anyRows, 0).getResult();
  Value seqK = table ? b.create<arith::MulIOp>(b.create<memref::DimOp>(table, 1),
                                               indexConstant(b, pageSize))
                           .getResult()
                     : b.create<memref::DimOp>(anyRows, 2).getResult();
  Type queryElement = cast<MemRefType>(ops.front()->getOperand(0).getType()).getElementType();
  for (auto& [rowsOf, entry] : gathered) {
    auto type = cast<MemRefType>(rowsOf.getType());
    entry.buffer = b.create<memref::AllocOp>(
        MemRefType::get({ShapedType::kDynamic, type.getDimSize(1), ShapedType::kDynamic,
                         type.getDimSize(3)},
                        entry.scale ? queryElement : type.getElementType()),
        ValueRange{batch, seqK});
  }

  b.setInsertionPoint(firstPhase(block));
  Value tileRows = indexConstant(b, rows);
  Value chunks = b.create<arith::CeilDivUIOp>(seqK, tileRows);
  auto forall = b.create<scf::ForallOp>(
      ArrayRef<OpFoldResult>{b.create<arith::MulIOp>(batch, chunks).getResult()}, ValueRange{},
      std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value task = forall.getInductionVar(0);
  Value sequence = b.create<arith::DivUIOp>(task, chunks);
  Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, chunks), tileRows);
  Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, tileRows), seqK);
  // Copies position j of the sequence, row `row` of `outer` in the cache ((sequence, j) in a
  // contiguous cache, (page, j mod page_size) in a paged one), quantized rows times their scales.
  auto copyRow = [&](ImplicitLocOpBuilder& at, Value outer, Value row, Value j) {
    for (auto& [rowsOf, entry] : gathered) {
      auto type = cast<MemRefType>(rowsOf.getType());
      forRange(at, zero, indexConstant(at, type.getDimSize(1)), [&](ImplicitLocOpBuilder& hb,
                                                                     Value g) {
        Value factor = entry.scale ? hb.create<memref::LoadOp>(entry.scale,
                                                               ValueRange{outer, g, row})
                                         .getResult()
                                   : Value();
        forRange(hb, zero, indexConstant(hb, type.getDimSize(3)),
                 [&](ImplicitLocOpBuilder& cb, Value c) {
                   Value element = cb.create<memref::LoadOp>(rowsOf, ValueRange{outer, g, row, c});
                   if (!factor) {
                     cb.create<memref::StoreOp>(element, entry.buffer,
                                                ValueRange{sequence, g, j, c});
                     return;
                   }
                   Value x = cb.create<arith::MulFOp>(toF32(cb, element), factor);
                   storeF32(cb, x, entry.buffer, {sequence, g, j, c});
                 });
      });
    }
  };
  forRange(b, first, last, [&](ImplicitLocOpBuilder& jb, Value j) {
    if (!table) {
      copyRow(jb, sequence, j, j);
      return;
    }
    Value length = jb.create<arith::IndexCastOp>(
        jb.getIndexType(), jb.create<memref::LoadOp>(lengths, ValueRange{sequence}));
    auto ifInside = jb.create<scf::IfOp>(
        jb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, j, length), /*withElseRegion=*/true);
    auto then = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), ifInside.thenBlock());
    Value pageRows = indexConstant(then, pageSize);
    Value page = then.create<arith::IndexCastOp>(
        then.getIndexType(),
        then.create<memref::LoadOp>(table,
                                    ValueRange{sequence, then.create<arith::DivUIOp>(j, pageRows)}));
    copyRow(then, page, then.create<arith::RemUIOp>(j, pageRows), j);
    auto otherwise = ImplicitLocOpBuilder::atBlockTerminator(jb.getLoc(), ifInside.elseBlock());
    for (auto& [rowsOf, entry] : gathered) {
      auto bufferType = cast<MemRefType>(entry.buffer.getType());
      Value zeroElement =
          otherwise.create<arith::ConstantOp>(otherwise.getZeroAttr(bufferType.getElementType()));
      forRange(otherwise, zero, indexConstant(otherwise, bufferType.getDimSize(1)),
               [&](ImplicitLocOpBuilder& hb, Value g) {
                 forRange(hb, zero, indexConstant(hb, bufferType.getDimSize(3)),
                          [&](ImplicitLocOpBuilder& cb, Value c) {
                            cb.create<memref::StoreOp>(zeroElement, entry.buffer,
                                                       ValueRange{sequence, g, j, c});
                          });
               });
    }
  });

  // The ops read the buffers, as plain keys [B, H_kv, Tk, d].
  for (ScoreOpInterface op : ops)
    rewriter.modifyOpInPlace(op, [&] {
      if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation())) {
        update.getKeyMutable().assign(gathered.lookup(update.getKey()).buffer);
        update.getValueMutable().assign(gathered.lookup(update.getValue()).buffer);
        update.getBlockTableMutable().clear();
        update.getSeqLensMutable().clear();
        update.getKeyScaleMutable().clear();
        update.getValueScaleMutable().clear();
      } else {
        auto weights = cast<WeightsOp>(op.getOperation());
        weights.getKeyMutable().assign(gathered.lookup(weights.getKey()).buffer);
        weights.getBlockTableMutable().clear();
        weights.getSeqLensMutable().clear();
        weights.getKeyScaleMutable().clear();
      }
    });
  b.setInsertionPoint(block.getTerminator());
  for (auto& [rowsOf, entry] : gathered)
    b.create<memref::DeallocOp>(entry.buffer);
  return success();
}

} // namespace attnc::attn
