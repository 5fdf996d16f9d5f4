//===- ScoreAttrs.h - checks shared by the ops that compute scores -----------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
#define ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/StringSet.h"

namespace attnc::attn {

// The mask names the score ops take, and the operands and attributes that go with them.
template <class ScoreOp> mlir::LogicalResult verifyScoreAttrs(ScoreOp op) {
  if (op.getScale().convertToDouble() <= 0)
    return op.emitOpError() << "scale must be positive";
  if (op.getSoftcap().convertToDouble() < 0)
    return op.emitOpError() << "softcap must be >= 0 (0: off)";
  if (op.getCausalAlign() != "bottom_right" && op.getCausalAlign() != "top_left")
    return op.emitOpError() << "causal_align must be \"bottom_right\" or \"top_left\", got \""
                            << op.getCausalAlign() << "\"";
  llvm::StringSet<> masks;
  for (mlir::Attribute mask : op.getMasks()) {
    llvm::StringRef name = mlir::cast<mlir::StringAttr>(mask).getValue();
    if (name != "causal" && name != "padding" && name != "window" && name != "tensor")
      return op.emitOpError() << "unknown mask '" << name
                              << "'; this op takes causal, padding, window, tensor";
    if (!masks.insert(name).second)
      return op.emitOpError() << "mask '" << name << "' is listed twice";
  }
  if (masks.contains("padding") != bool(op.getLengths()))
    return op.emitOpError() << "the lengths operand goes with mask 'padding', and only with it";
  if (masks.contains("tensor") != bool(op.getMask()))
    return op.emitOpError() << "the mask operand goes with mask 'tensor', and only with it";
  if (masks.contains("window") != op.getWindowLeft().has_value())
    return op.emitOpError() << "window_left goes with mask 'window', and only with it";
  if (op.getWindowRight() && !masks.contains("window"))
    return op.emitOpError() << "window_right needs mask 'window'";
  return mlir::success();
}

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
