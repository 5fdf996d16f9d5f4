//===- BranchOnQueryRows.cpp - decoding steps and prefills apart at run time ---===//
//
// A kernel serves both a decoding step (a few query rows against a long cache) and a prefill,
// whose best tiles differ: the update and its state ops are copied into the branches of an
// scf.if on Tq <= maxRows, where a schedule tiles each its own way.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace attnc::attn {

FailureOr<std::pair<OnlineUpdateOp, OnlineUpdateOp>>
branchOnQueryRows(RewriterBase& rewriter, OnlineUpdateOp update, int64_t maxRows) {
  if (maxRows <= 0)
    return update.emitOpError() << "branch_on_query_rows: rows must be positive";
  FailureOr<StateOps> state = findStateOps(update, "branch_on_query_rows");
  if (failed(state))
    return failure();
  for (Operation* op = state->init->getNextNode(); op != state->finalize; op = op->getNextNode())
    if (op != update.getOperation())
      return update.emitOpError() << "branch_on_query_rows: " << op->getName()
                                  << " lies between the state's online_init and online_finalize";

  rewriter.setInsertionPoint(state->init);
  ImplicitLocOpBuilder b(update.getLoc(), rewriter);
  Value seqQ = update.getSizes()[2];
  Value fewRows = b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, seqQ,
                                         b.create<arith::ConstantIndexOp>(maxRows));
  auto branch = b.create<scf::IfOp>(fewRows, /*withElseRegion=*/true);
  // Each branch: the state's allocations, init, the update, finalize and deallocations.
  auto copyInto = [&](Block* block) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(block->getTerminator());
    IRMapping map;
    for (memref::AllocOp alloc : state->allocs)
      rewriter.clone(*alloc, map);
    rewriter.clone(*state->init, map);
    auto copy = cast<OnlineUpdateOp>(rewriter.clone(*update, map));
    rewriter.clone(*state->finalize, map);
    for (Operation* dealloc : state->deallocs)
      rewriter.clone(*dealloc, map);
    return copy;
  };
  std::pair<OnlineUpdateOp, OnlineUpdateOp> updates{copyInto(branch.thenBlock()),
                                                    copyInto(branch.elseBlock())};
  eraseWithStateOps(rewriter, update, *state);
  return updates;
}

} // namespace attnc::attn
