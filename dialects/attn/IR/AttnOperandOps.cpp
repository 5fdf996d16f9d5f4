//===- AttnOperandOps.cpp - verifiers of the operand products ------------------===//
#include "attn/IR/AttnOps.h"

using namespace mlir;
using namespace attnc::attn;

namespace {

// A factor's batch dim is out's or a broadcast 1; its heads divide out's.
LogicalResult verifyBatchAndHeads(Operation* op, MemRefType factor, MemRefType out,
                                  StringRef name) {
  if (factor.getDimSize(0) != 1 && extentsDisagree(factor.getDimSize(0), out.getDimSize(0)))
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
  if (failed(verifyBatchAndHeads(*this, lhs, out, "lhs")) ||
      failed(verifyBatchAndHeads(*this, rhs, out, "rhs")))
    return failure();
  if (extentsDisagree(lhs.getDimSize(3), rhs.getDimSize(2)))
    return emitOpError() << "lhs's columns and rhs's rows (the contraction) disagree";
  if (extentsDisagree(lhs.getDimSize(2), out.getDimSize(2)))
    return emitOpError() << "lhs and out must have the same rows";
  if (ShapedType::isDynamic(out.getDimSize(3)) || rhs.getDimSize(3) != out.getDimSize(3))
    return emitOpError() << "rhs and out must have the same static columns";
  if (getCausal() && extentsDisagree(lhs.getDimSize(3), out.getDimSize(2)))
    return emitOpError() << "causal compares a step with a row: lhs's columns and out's rows "
                            "must agree";
  if (getSinusoid()) {
    const int64_t model = lhs.getDimSize(3);
    if (ShapedType::isDynamic(model) || model % 2 != 0)
      return emitOpError() << "the sinusoidal encoding needs a static, even contraction extent";
  }
  return success();
}
