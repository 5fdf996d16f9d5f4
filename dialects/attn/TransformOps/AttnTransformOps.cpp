//===- AttnTransformOps.cpp - schedule steps for the attn pipeline ------------===//
#include "attn/TransformOps/AttnTransformOps.h"

#include "attn/IR/AttnDialect.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace attnc::attn;

#define GET_OP_CLASSES
#include "attn/TransformOps/AttnTransformOps.cpp.inc"

// A rewrite that fails has reported why on its payload op, so failures here are definite.

DiagnosedSilenceableFailure transform::AttnTileQueriesOp::applyToOne(
    transform::TransformRewriter& rewriter, OnlineUpdateOp target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  FailureOr<TiledQueries> tiled =
      tileQueries(rewriter, target, getRowsAttr().getInt(), getPackHeads());
  if (failed(tiled))
    return DiagnosedSilenceableFailure::definiteFailure();
  results.push_back(tiled->loop);
  results.push_back(tiled->update);
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnBranchOnQueryRowsOp::applyToOne(
    transform::TransformRewriter& rewriter, OnlineUpdateOp target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  auto updates = branchOnQueryRows(rewriter, target, getRowsAttr().getInt());
  if (failed(updates))
    return DiagnosedSilenceableFailure::definiteFailure();
  results.push_back(updates->first);
  results.push_back(updates->second);
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnPackQueryOp::applyToOne(
    transform::TransformRewriter& rewriter, OnlineUpdateOp target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  FailureOr<PackQueryOp> packed = packQuery(rewriter, target);
  if (failed(packed))
    return DiagnosedSilenceableFailure::definiteFailure();
  results.push_back(*packed);
  results.push_back(target);
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure
transform::AttnTileKeysOp::applyToOne(transform::TransformRewriter& rewriter, OnlineUpdateOp target,
                                      transform::ApplyToEachResultList& results,
                                      transform::TransformState&) {
  FailureOr<TiledKeys> tiled = tileKeys(rewriter, target, getBlockAttr().getInt());
  if (failed(tiled))
    return DiagnosedSilenceableFailure::definiteFailure();
  results.push_back(tiled->loop);
  results.push_back(tiled->update);
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerToVectorsOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  VectorOptions options{getVectorWidthAttr().getInt(), getKeyUnrollAttr().getInt(),
                        getValueSplitAttr().getInt(), getAmx() != 0, getDot() != 0};
  if (failed(lowerOnlineOpsToVectors(rewriter, target, options)))
    return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerDecodeOp::applyToOne(
    transform::TransformRewriter& rewriter, OnlineUpdateOp target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  const DecodeOptions options{getVectorWidthAttr().getInt(), getKeyBlockAttr().getInt(),
                              getRowsAttr().getInt(), getSplitKeysAttr().getInt(), getDot() != 0};
  if (failed(lowerDecode(rewriter, target, options)))
    return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

void transform::AttnGatherCacheOp::getEffects(
    SmallVectorImpl<MemoryEffects::EffectInstance>& effects) {
  transform::onlyReadsHandle(getTargetMutable(), effects);
  transform::modifiesPayload(effects);
}

DiagnosedSilenceableFailure transform::AttnGatherCacheOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  if (getRows().has_value() == getColumns().has_value())
    return emitDefiniteFailure() << "gather_cache takes either rows = N or columns = N";
  if (failed(gatherCache(rewriter, target, getRows().value_or(0), getColumns().value_or(0))))
    return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerRopeOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  SmallVector<RopeOp> ropes;
  target->walk([&](RopeOp op) { ropes.push_back(op); });
  for (RopeOp op : ropes)
    if (failed(lowerRope(rewriter, op, getRowsAttr().getInt())))
      return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure
transform::AttnLowerMatmulsOp::applyToOne(transform::TransformRewriter& rewriter, Operation* target,
                                          transform::ApplyToEachResultList& results,
                                          transform::TransformState&) {
  SmallVector<MatmulOp> ops;
  target->walk([&](MatmulOp op) { ops.push_back(op); });
  const MatmulTiles tiles{getRowsAttr().getInt(), getVectorWidthAttr().getInt(),
                          getColumnsAttr().getInt()};
  const int64_t tensorCores = getTensorCoresAttr().getInt();
  if (tensorCores != 0 && tensorCores != 1)
    return emitDefiniteFailure() << "lower_matmuls: tensor_cores is 0 or 1, not " << tensorCores;
  for (MatmulOp op : ops)
    if (tensorCores == 1 ? failed(lowerMatmulToMma(rewriter, op))
                         : failed(lowerMatmul(rewriter, op, tiles)))
      return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure
transform::AttnLowerLinearOp::applyToOne(transform::TransformRewriter& rewriter, Operation* target,
                                         transform::ApplyToEachResultList& results,
                                         transform::TransformState&) {
  if (failed(lowerLinearOps(rewriter, target, getRowsAttr().getInt())))
    return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerWeightsOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  SmallVector<WeightsOp> ops;
  target->walk([&](WeightsOp op) { ops.push_back(op); });
  VectorOptions options;
  options.vectorWidth = getVectorWidthAttr().getInt();
  options.keyUnroll = getKeyUnrollAttr().getInt();
  for (WeightsOp op : ops)
    if (failed(lowerWeights(rewriter, op, getRowsAttr().getInt(), options)))
      return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerBackwardOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  SmallVector<BackwardOp> ops;
  target->walk([&](BackwardOp op) { ops.push_back(op); });
  VectorOptions options;
  options.vectorWidth = getVectorWidthAttr().getInt();
  options.keyUnroll = getKeyUnrollAttr().getInt();
  options.dot = getDot() != 0;
  const BackwardTiles tiles{getRowsAttr().getInt(), getKeyBlockAttr().getInt()};
  for (BackwardOp op : ops)
    if (failed(lowerBackward(rewriter, op, tiles, options)))
      return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerBackwardToMmaOp::applyToOne(
    transform::TransformRewriter& rewriter, Operation* target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  SmallVector<BackwardOp> ops;
  target->walk([&](BackwardOp op) { ops.push_back(op); });
  const BackwardTiles tiles{getRowsAttr().getInt(), getKeyBlockAttr().getInt()};
  for (BackwardOp op : ops)
    if (failed(lowerBackwardToMma(rewriter, op, tiles)))
      return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

DiagnosedSilenceableFailure transform::AttnLowerToMmaOp::applyToOne(
    transform::TransformRewriter& rewriter, scf::ForallOp target,
    transform::ApplyToEachResultList& results, transform::TransformState&) {
  if (failed(lowerTasksToMma(rewriter, target,
                             {getMaxKeySplitsAttr().getInt(), getFillBlocksAttr().getInt()})))
    return DiagnosedSilenceableFailure::definiteFailure();
  return DiagnosedSilenceableFailure::success();
}

namespace {

class AttnTransformExtension : public transform::TransformDialectExtension<AttnTransformExtension> {
public:
  using Base::Base;
  void init() {
    declareDependentDialect<AttnDialect>();
    declareGeneratedDialect<amx::AMXDialect>();
    declareGeneratedDialect<arith::ArithDialect>();
    declareGeneratedDialect<gpu::GPUDialect>();
    declareGeneratedDialect<LLVM::LLVMDialect>();
    declareGeneratedDialect<nvgpu::NVGPUDialect>();
    declareGeneratedDialect<NVVM::NVVMDialect>();
    declareGeneratedDialect<math::MathDialect>();
    declareGeneratedDialect<memref::MemRefDialect>();
    declareGeneratedDialect<scf::SCFDialect>();
    declareGeneratedDialect<vector::VectorDialect>();
    registerTransformOps<
#define GET_OP_LIST
#include "attn/TransformOps/AttnTransformOps.cpp.inc"
        >();
  }
};

} // namespace

void attnc::attn::registerTransformDialectExtension(DialectRegistry& registry) {
  registry.addExtensions<AttnTransformExtension>();
}
