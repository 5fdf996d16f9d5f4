//===- ScoreAttrs.h - checks shared by the ops that compute scores -----------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
#define ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H

#include "attn/IR/ExpressionRegion.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"


#include <tuple>
#include <vector>

namespace attnc::attn {

// The attributes every score op takes and the expression regions' signatures.
template <class ScoreOp> mlir::LogicalResult verifyScoreAttrs(ScoreOp op) {
  if (op.getScale().convertToDouble() <= 0)
    return op.emitOpError() << "scale must be positive";
  if (op.getCausalAlign() != "bottom_right" && op.getCausalAlign() != "top_left")
    return op.emitOpError() << "causal_align must be \"bottom_right\" or \"top_left\", got \""
                            << op.getCausalAlign() << "\"";
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

// Additive score weights [H_kv, H / H_kv, d_k] (attn.attention's `score_weights`), if any: the
// groups multiply to the query heads, the key has one head per query head and the key's d_k,
// and the values (`valueHeads`, 0 for an op without them) one per KV head. A cache's keys have
// no hidden rows.
template <class ScoreOp>
mlir::LogicalResult verifyScoreWeights(ScoreOp op, int64_t heads, mlir::ShapedType key,
                                       int64_t valueHeads) {
  mlir::Value weights = op.getScoreWeights();
  if (!weights)
    return mlir::success();
  llvm::ArrayRef<int64_t> w = llvm::cast<mlir::ShapedType>(weights.getType()).getShape();
  if (w.size() != 3 || w[0] * w[1] != heads || w[2] != key.getDimSize(3))
    return op.emitOpError() << "score_weights must be [H_kv, H / H_kv, d_k] with " << heads
                            << " query heads and d_k " << key.getDimSize(3);
  if (key.getDimSize(1) != heads || (valueHeads != 0 && valueHeads != w[0]))
    return op.emitOpError() << "with score_weights the key has one head per query head (" << heads
                            << ") and the value one per KV head (" << w[0] << ")";
  if (op.getBlockTable() || op.getKeyScale())
    return op.emitOpError() << "score_weights take hidden key rows, not a paged or quantized cache";
  return mlir::success();
}

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_IR_SCOREATTRS_H
