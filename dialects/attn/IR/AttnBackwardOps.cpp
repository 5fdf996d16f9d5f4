//===- AttnBackwardOps.cpp - the verifier of attn.backward, its domain clones ---===//
#include "attn/IR/AttnOps.h"
#include "attn/IR/ScoreAttrs.h"

using namespace mlir;
using namespace attnc::attn;

namespace {

// Whether `a` and `b` agree at dims `dims` (a dynamic extent agrees with anything).
bool sameDims(MemRefType a, MemRefType b, ArrayRef<unsigned> dims) {
  return llvm::all_of(dims, [&](unsigned d) {
    return a.isDynamicDim(d) || b.isDynamicDim(d) || a.getDimSize(d) == b.getDimSize(d);
  });
}

} // namespace

BackwardOp BackwardOp::cloneOverDomain(OpBuilder& b, ValueRange offsets, ValueRange sizes) {
  OpBuilder plain(b.getContext());
  plain.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
  auto clone = cast<BackwardOp>(plain.clone(*getOperation()));
  clone.getOffsetsMutable().assign(offsets);
  clone.getSizesMutable().assign(sizes);
  return clone;
}

LogicalResult BackwardOp::verify() {
  if (getOffsets().size() != 4 || getSizes().size() != 4)
    return emitOpError() << "needs 4 offsets and 4 sizes, got " << getOffsets().size() << " and "
                         << getSizes().size();
  if (failed(verifyScoreAttrs(*this)))
    return failure();
  MemRefType q = getQuery().getType(), k = getKey().getType(), v = getValue().getType();
  const int64_t heads = getNumHeads();
  if (heads <= 0 || k.isDynamicDim(1) || heads % k.getDimSize(1) != 0)
    return emitOpError() << "num_heads " << heads << " must be a multiple of the key heads";
  if (q.getDimSize(1) != heads || q.getDimSize(3) != k.getDimSize(3) ||
      v.getDimSize(1) != k.getDimSize(1))
    return emitOpError() << "query [B, num_heads, Tq, d_k], key [B, H_kv, Tk, d_k] and value "
                            "[B, H_kv, Tk, d_v] disagree";
  if (!sameDims(getOutput().getType(), q, {1}) ||
      getOutput().getType().getDimSize(3) != v.getDimSize(3) ||
      getGradOutput().getType() != getOutput().getType())
    return emitOpError() << "output and grad_output must be [B, num_heads, Tq, d_v] alike";
  if (getLse().getType().getDimSize(1) != heads)
    return emitOpError() << "lse must be [B, num_heads, Tq]";
  if (getGradQuery().getType().getShape() != q.getShape() ||
      getGradKey().getType().getShape() != k.getShape() ||
      getGradValue().getType().getShape() != v.getShape())
    return emitOpError() << "each gradient must have its tensor's shape";
  if (static_cast<bool>(getSinks()) != static_cast<bool>(getGradSinks()))
    return emitOpError() << "sinks and grad_sinks come together";
  if (Value sinks = getSinks(); sinks && cast<MemRefType>(sinks.getType()).getDimSize(0) != heads)
    return emitOpError() << "sinks must have num_heads elements";
  if (!getScoreGrad().empty() && getScoreMod().empty())
    return emitOpError() << "score_grad is the derivative of score_mod, which is empty";
  return verifyAuxGradients();
}

// Each read of aux_grad names a gradient of aux_grads, and the region yields its indices (one
// i32 per dimension of that gradient) and its partial (f32), read after read.
LogicalResult BackwardOp::verifyAuxGradients() {
  ArrayRef<int64_t> targets = getAuxGradTargets().value_or(ArrayRef<int64_t>{});
  if (getAuxGrad().empty() != targets.empty())
    return emitOpError() << "aux_grad and aux_grad_targets come together";
  if (targets.empty())
    return success();
  SmallVector<Type> expected;
  for (int64_t target : targets) {
    if (target < 0 || target >= static_cast<int64_t>(getAuxGrads().size()))
      return emitOpError() << "aux_grad_targets entry " << target << " names no aux_grads operand";
    auto type = cast<MemRefType>(getAuxGrads()[target].getType());
    expected.append(type.getRank(), IntegerType::get(getContext(), 32));
    expected.push_back(Float32Type::get(getContext()));
  }
  for (int64_t direct : getAuxGradDirect().value_or(ArrayRef<int64_t>{}))
    if (direct < 0 || direct >= static_cast<int64_t>(getAuxGrads().size()) ||
        cast<MemRefType>(getAuxGrads()[direct].getType()).getRank() != 4)
      return emitOpError() << "aux_grad_direct entry " << direct
                           << " must name a score-shaped (rank 4) aux_grads operand";
  for (auto [k, grad] : llvm::enumerate(getAuxGrads()))
    if (!llvm::is_contained(getAuxGradDirect().value_or(ArrayRef<int64_t>{}),
                            static_cast<int64_t>(k)) &&
        !cast<MemRefType>(grad.getType()).getElementType().isF32())
      return emitOpError() << "aux_grads operand " << k << " must be f32 (or aux_grad_direct)";
  Operation* yield = getAuxGrad().front().getTerminator();
  if (!yield || TypeRange(yield->getOperandTypes()) != TypeRange(expected))
    return emitOpError() << "aux_grad must yield, per read, its i32 indices and an f32 partial";
  return success();
}
