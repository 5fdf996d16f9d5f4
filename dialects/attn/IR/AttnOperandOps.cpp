//===- AttnOperandOps.cpp - verifiers of the operand products ------------------===//
#include "attn/IR/AttnOps.h"

using namespace mlir;
using namespace attnc::attn;

namespace {

// A factor's batch dim is `batches`' (out's, or under batch_sum lhs's) or a broadcast 1; its
// heads divide out's.
LogicalResult verifyBatchAndHeads(Operation* op, MemRefType factor, MemRefType batches,
                                  MemRefType out, StringRef name) {
  if (factor.getDimSize(0) != 1 && extentsDisagree(factor.getDimSize(0), batches.getDimSize(0)))
    return op->emitOpError() << name << "'s batch must be out's or 1";
  const int64_t heads = factor.getDimSize(1), outHeads = out.getDimSize(1);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(outHeads) || heads <= 0 ||
      outHeads % heads != 0)
    return op->emitOpError() << name << "'s heads (" << heads << ") must be static and divide "
                             << "out's (" << outHeads << ")";
  return success();
}

} // namespace

LogicalResult MatmulOp::verify() {
  MemRefType lhs = getLhs().getType(), rhs = getRhs().getType(), out = getOut().getType();
  if (getBatchSum()) {
    if (out.getDimSize(0) != 1)
      return emitOpError() << "batch_sum sums over the factors' batches into out's batch of 1";
    if (lhs.getDimSize(0) != rhs.getDimSize(0)) // both dynamic, or one static size
      return emitOpError() << "batch_sum: lhs's and rhs's batches must agree (none broadcast)";
  }
  MemRefType batchesOf = getBatchSum() ? lhs : out;
  if (failed(verifyBatchAndHeads(*this, lhs, batchesOf, out, "lhs")) ||
      failed(verifyBatchAndHeads(*this, rhs, batchesOf, out, "rhs")))
    return failure();
  // lhs's rows and steps, as read (lhs_transposed swaps its last two dims).
  const int64_t lhsRows = lhs.getDimSize(getLhsTransposed() ? 3 : 2);
  const int64_t lhsSteps = lhs.getDimSize(getLhsTransposed() ? 2 : 3);
  if (extentsDisagree(lhsSteps, rhs.getDimSize(2)))
    return emitOpError() << "lhs's steps and rhs's rows (the contraction) disagree";
  if (extentsDisagree(lhsRows, out.getDimSize(2)))
    return emitOpError() << "lhs and out must have the same rows";
  if (ShapedType::isDynamic(out.getDimSize(3)) || rhs.getDimSize(3) != out.getDimSize(3))
    return emitOpError() << "rhs and out must have the same static columns";
  if (getCausal() && extentsDisagree(lhsSteps, out.getDimSize(2)))
    return emitOpError() << "causal compares a step with a row: lhs's steps and out's rows "
                            "must agree";
  if (getSinusoid()) {
    const int64_t model = lhs.getDimSize(3);
    if (ShapedType::isDynamic(model) || model % 2 != 0)
      return emitOpError() << "the sinusoidal encoding needs lhs's last dim static and even";
  }
  return success();
}
