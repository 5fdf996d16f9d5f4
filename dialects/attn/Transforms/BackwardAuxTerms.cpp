//===- BackwardAuxTerms.cpp - where a backward task's aux_grad terms go ----------===//
#include "attn/Transforms/BackwardAuxTerms.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace attnc::attn {

void addAuxTerms(ImplicitLocOpBuilder& b, BackwardOp op, AuxCopies& copies, Value task,
                 ArrayRef<BackwardTile::AuxTerms> terms, ArrayRef<Value> direct) {
  ArrayRef<int64_t> targets = op.getAuxGradTargets().value_or(ArrayRef<int64_t>{});
  for (const BackwardTile::AuxTerms& vector : terms) {
    size_t next = 0;
    llvm::SmallDenseSet<int64_t> stored; // direct buffers this score's terms already reached
    for (int64_t target : targets) {
      const int64_t rank = cast<MemRefType>(op.getAuxGrads()[target].getType()).getRank();
      ArrayRef<Value> indices = ArrayRef<Value>(vector.reads).slice(next, rank);
      Value term = vector.reads[next + rank];
      next += rank + 1;
      if (!direct[target]) {
        copies.addTerms(b, task, target, indices, term);
        continue;
      }
      // Read at [b, h, q_idx, kv_idx]: the term's place is the score's in the block's buffer.
      if (!stored.insert(target).second) // a second read of the element
        term = b.create<arith::AddFOp>(
            b.create<vector::LoadOp>(term.getType(), direct[target], vector.place), term);
      b.create<vector::StoreOp>(term, direct[target], vector.place);
    }
  }
}

void writeDirectTerms(ImplicitLocOpBuilder& b, BackwardOp op, ArrayRef<Value> direct,
                      const ScorePatch& tile, Value begin, Value end) {
  for (auto [k, terms] : llvm::enumerate(direct)) {
    if (!terms)
      continue;
    const SmallVector<Value> dims = auxGradDims(b, op, static_cast<int64_t>(k));
    auto last = [&](Value dim) { return b.create<arith::SubIOp>(dim, indexConstant(b, 1)); };
    Value gradBatch = b.create<arith::MinUIOp>(tile.batch, last(dims[0]));
    Value gradHead = b.create<arith::MinUIOp>(tile.head, last(dims[1]));
    Value firstToReach = b.create<arith::AndIOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, gradBatch, tile.batch),
        b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, gradHead, tile.head));
    writeGradientPatch(b,
                       {op.getAuxGrads()[k], gradBatch, gradHead, tile.row, tile.count,
                        tile.firstKey, tile.keyCount},
                       terms, begin, end, firstToReach);
  }
}

} // namespace attnc::attn
