//===- ScoreAttrs.h - checks shared by the ops that compute scores -----------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
#define ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H

#include "attn/IR/ExpressionRegion.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/StringSet.h"

#include <tuple>
#include <vector>

namespace attnc::attn {

// The mask names the score ops take, the operands and attributes that go with them, and the
// expression regions' signatures.
template <class ScoreOp> mlir::LogicalResult verifyScoreAttrs(ScoreOp op) {
  if (op.getScale().convertToDouble() <= 0)
    return op.emitOpError() << "scale must be positive";
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
  const mlir::Type f32 = mlir::Float32Type::get(op->getContext());
  std::vector<std::tuple<mlir::Region*, const char*, mlir::Type>> regions = {
      {&op.getScoreMod(), "score_mod", f32},
      {&op.getMaskMod(), "mask_mod", mlir::IntegerType::get(op->getContext(), 1)}};
  if constexpr (requires { op.getDropout(); }) // the ops that weight v carry dropout's factor
    regions.push_back({&op.getDropout(), "dropout", f32});
  for (auto [region, name, result] : regions) {
    if (region->empty())
      continue;
    // (score: f32, b, h, g, q_idx, kv_idx, qpos, Tq, Tk: i32), as Attn_ExpressionRegion says.
    mlir::Block& block = region->front();
    mlir::TypeRange args = block.getArgumentTypes();
    const bool signature = args.size() == kExpressionArgumentNames.size() && args[0].isF32() &&
                           llvm::all_of(args.drop_front(), [](mlir::Type t) {
                             return t.isSignlessInteger(32);
                           });
    if (!signature)
      return op.emitOpError() << name << " takes (f32, i32 x 8): score, b, h, g, q_idx, kv_idx, "
                                         "qpos, Tq, Tk";
    auto yield = block.empty() ? nullptr : llvm::dyn_cast<mlir::gpu::YieldOp>(block.back());
    if (!yield || yield.getValues().size() != 1 || yield.getValues()[0].getType() != result)
      return op.emitOpError() << name << " must end in gpu.yield of one " << result;
  }
  return mlir::success();
}

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
