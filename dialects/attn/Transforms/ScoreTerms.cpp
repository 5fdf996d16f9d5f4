//===- ScoreTerms.cpp - an update's score terms, elementwise -------------------===//
#include "attn/Transforms/ScoreTerms.h"

#include "attn/IR/ExpressionRegion.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
Value splatConstant(ImplicitLocOpBuilder& b, VectorType type, double value) {
  Type element = type.getElementType();
  Attribute scalar = isa<FloatType>(element)
                         ? Attribute(b.getFloatAttr(element, value))
                         : Attribute(b.getIntegerAttr(element, static_cast<int64_t>(value)));
  return b.create<arith::ConstantOp>(DenseElementsAttr::get(type, scalar));
}

Value ScoreTerms::positionOffset(ImplicitLocOpBuilder& b, ScoreOpInterface op) {
  if (op.getCausalAlign() != "bottom_right")
    return indexConstant(b, 0);
  return b.create<arith::SubIOp>(b.create<memref::DimOp>(op.getKey(), 2), op.getSeqQ());
}

Value ScoreTerms::keyHeadOf(ImplicitLocOpBuilder& b, ScoreOpInterface op, Value head) {
  return op.getScoreWeights() ? head : kvHeadOf(b, op, head);
}

Value ScoreTerms::additiveWeight(ImplicitLocOpBuilder& b, ScoreOpInterface op, Value head,
                                 Value c) {
  Value weights = op.getScoreWeights();
  Value group = indexConstant(b, cast<MemRefType>(weights.getType()).getDimSize(1));
  Value w =
      loadF32(b, weights,
              {b.create<arith::DivUIOp>(head, group), b.create<arith::RemUIOp>(head, group), c});
  return b.create<arith::MulFOp>(w, f32Constant(b, op.getScale().convertToDouble()));
}

Value ScoreTerms::kvHeadOf(ImplicitLocOpBuilder& b, ScoreOpInterface op, Value head) {
  // Additive weights are grouped by KV head: [H_kv, H / H_kv, d_k].
  const int64_t group = op.getScoreWeights()
                            ? op.getScoreWeights().getType().getDimSize(1)
                            : op.getNumHeads() / op.getKey().getType().getDimSize(1);
  return b.create<arith::DivUIOp>(head, indexConstant(b, group));
}

ScoreTerms::ScoreTerms(ImplicitLocOpBuilder& b, ScoreOpInterface op, Value batchIndex,
                       Value headIndex)
    : op(op), dropoutFactor(nullptr) {
  if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation());
      update && !update.getDropout().empty())
    dropoutFactor = &update.getDropout();
  if (auto backward = dyn_cast<BackwardOp>(op.getOperation());
      backward && !backward.getDropout().empty())
    dropoutFactor = &backward.getDropout();
  if (op.getScoreMod().empty() && op.getMaskMod().empty() && !dropoutFactor)
    return;
  auto i32 = [&](Value index) { return b.create<arith::IndexCastOp>(b.getI32Type(), index); };
  batch = i32(batchIndex);
  head = i32(headIndex);
  kvHead = i32(kvHeadOf(b, op, headIndex));
  offset = i32(positionOffset(b, op));
  seqQ = i32(op.getSeqQ());
  seqK = i32(b.create<memref::DimOp>(op.getKey(), 2));
}

Value ScoreTerms::expression(ImplicitLocOpBuilder& b, Region& region, Value s, Value queryPos,
                             Value keyPos, const ScoreShapedReads* reads) const {
  return expressions(b, region, s, queryPos, keyPos, reads).front();
}

// Whether `load` reads an f32 tensor at exactly (b, h, q_idx, kv_idx) of its region's scores
// (a patch holds f32).
static bool readsAtScore(AuxLoadOp load) {
  Block* block = load->getBlock();
  const SmallVector<ExpressionArgument, 4> order{ExpressionArgument::B, ExpressionArgument::H,
                                                 ExpressionArgument::QIdx,
                                                 ExpressionArgument::KvIdx};
  if (!load.getResult().getType().isF32() || load.getIndices().size() != order.size())
    return false;
  for (auto [read, argument] : llvm::zip(load.getIndices(), order))
    if (read != block->getArgument(index(argument)))
      return false;
  return true;
}

SmallVector<bool> ScoreTerms::scoreShapedAux(ScoreOpInterface op) {
  SmallVector<bool> shaped(op.getAux().size(), false);
  if (!op.getScoreMod().empty())
    op.getScoreMod().walk([&](AuxLoadOp load) {
      if (readsAtScore(load))
        shaped[load.getAux()] = true;
    });
  return shaped;
}

SmallVector<Value> ScoreTerms::expressions(ImplicitLocOpBuilder& b, Region& region, Value s,
                                           Value queryPos, Value keyPos,
                                           const ScoreShapedReads* reads) const {
  ArrayRef<int64_t> shape = cast<VectorType>(s.getType()).getShape();
  auto typeI32 = cast<VectorType>(queryPos.getType());
  auto splat = [&](Value scalar) { return b.create<vector::BroadcastOp>(typeI32, scalar); };
  Block& block = region.front();
  IRMapping map;
  auto bind = [&](ExpressionArgument argument, Value value) {
    map.map(block.getArgument(index(argument)), value);
  };
  bind(ExpressionArgument::Score, s);
  bind(ExpressionArgument::B, splat(batch));
  bind(ExpressionArgument::H, splat(head));
  bind(ExpressionArgument::G, splat(kvHead));
  bind(ExpressionArgument::QIdx, b.create<arith::SubIOp>(queryPos, splat(offset)));
  bind(ExpressionArgument::KvIdx, keyPos);
  bind(ExpressionArgument::QPos, queryPos);
  bind(ExpressionArgument::SeqQ, splat(seqQ));
  bind(ExpressionArgument::SeqK, splat(seqK));
  // A value from outside the block (canonicalization hoists the region's constants out of it)
  // is the same at every element: broadcast.
  auto vectorOf = [&](Value scalar) -> Value {
    if (Value mapped = map.lookupOrNull(scalar))
      return mapped;
    return b.create<vector::BroadcastOp>(VectorType::get(shape, scalar.getType()), scalar);
  };
  for (Operation& scalar : block.without_terminator()) {
    if (auto constant = dyn_cast<arith::ConstantOp>(scalar)) {
      auto type = VectorType::get(shape, constant.getType());
      map.map(constant.getResult(),
              b.create<arith::ConstantOp>(DenseElementsAttr::get(type, constant.getValue())));
      continue;
    }
    if (auto load = dyn_cast<AuxLoadOp>(scalar)) {
      if (reads && reads->buffers[load.getAux()] && readsAtScore(load)) {
        map.map(load.getResult(),
                b.create<vector::LoadOp>(VectorType::get(shape, b.getF32Type()),
                                         reads->buffers[load.getAux()], reads->place));
        continue;
      }
      SmallVector<Value> indices =
          llvm::map_to_vector(load.getIndices(), [&](Value i) { return vectorOf(i); });
      map.map(load.getResult(), gatherAux(b, load.getAux(), indices));
      continue;
    }
    // Every other op of a region is elementwise arith or math: the same op on vectors.
    OperationState state(b.getLoc(), scalar.getName());
    for (Value operand : scalar.getOperands())
      state.addOperands(vectorOf(operand));
    for (Type type : scalar.getResultTypes())
      state.addTypes(VectorType::get(shape, type));
    state.addAttributes(scalar.getAttrs());
    map.map(scalar.getResults(), b.create(state)->getResults());
  }
  return llvm::map_to_vector(cast<gpu::YieldOp>(block.getTerminator()).getValues(), vectorOf);
}

Value ScoreTerms::gatherAux(ImplicitLocOpBuilder& b, int64_t aux, ArrayRef<Value> indices) const {
  Value tensor = op.getAux()[aux];
  auto tensorType = cast<MemRefType>(tensor.getType());
  auto indexType = cast<VectorType>(indices.front().getType());
  auto type = VectorType::get(indexType.getShape(), tensorType.getElementType());
  SmallVector<Value> last;
  for (int64_t d = 0; d < tensorType.getRank(); ++d)
    last.push_back(
        b.create<arith::SubIOp>(b.create<memref::DimOp>(tensor, d), indexConstant(b, 1)));
  Value result = b.create<arith::ConstantOp>(b.getZeroAttr(type));
  const int64_t count = type.getNumElements();
  for (int64_t flat = 0; flat < count; ++flat) {
    SmallVector<int64_t> position = delinearize(flat, computeStrides(type.getShape()));
    SmallVector<Value> at;
    for (auto [index, lastIndex] : llvm::zip_equal(indices, last))
      at.push_back(clampIndex(b, b.create<vector::ExtractOp>(index, position), lastIndex));
    result = b.create<vector::InsertOp>(b.create<memref::LoadOp>(tensor, at), result, position);
  }
  return result;
}

Value ScoreTerms::apply(ImplicitLocOpBuilder& b, Value s, Value queryPos, Value keyPos,
                        MaskMod maskMod, const ScoreShapedReads* reads) const {
  s = modified(b, s, queryPos, keyPos, reads);
  Value keep = kept(b, s, queryPos, keyPos, maskMod);
  if (!keep)
    return s;
  return b.create<arith::SelectOp>(
      keep, s,
      splatConstant(b, cast<VectorType>(s.getType()), -std::numeric_limits<double>::infinity()));
}

Value ScoreTerms::modified(ImplicitLocOpBuilder& b, Value s, Value queryPos, Value keyPos,
                           const ScoreShapedReads* reads) const {
  if (op.getScoreMod().empty())
    return s;
  return expression(b, op.getScoreMod(), s, queryPos, keyPos, reads);
}

Value ScoreTerms::kept(ImplicitLocOpBuilder& b, Value s, Value queryPos, Value keyPos,
                       MaskMod maskMod) const {
  if (op.getMaskMod().empty() || maskMod == MaskMod::KeepsAll)
    return {};
  return expression(b, op.getMaskMod(), s, queryPos, keyPos);
}

Value ScoreTerms::scoreGradient(ImplicitLocOpBuilder& b, Value s, Value queryPos,
                                Value keyPos) const {
  auto backward = dyn_cast<BackwardOp>(op.getOperation());
  if (!backward || backward.getScoreGrad().empty())
    return {};
  return expression(b, backward.getScoreGrad(), s, queryPos, keyPos);
}

SmallVector<Value> ScoreTerms::auxGradients(ImplicitLocOpBuilder& b, Value s, Value queryPos,
                                            Value keyPos) const {
  auto backward = dyn_cast<BackwardOp>(op.getOperation());
  if (!backward || backward.getAuxGrad().empty())
    return {};
  return expressions(b, backward.getAuxGrad(), s, queryPos, keyPos);
}

Value ScoreTerms::dropout(ImplicitLocOpBuilder& b, Value p, Value queryPos, Value keyPos) const {
  if (!dropoutFactor)
    return p;
  // The region does not read `score`; p binds it.
  return b.create<arith::MulFOp>(p, expression(b, *dropoutFactor, p, queryPos, keyPos));
}

} // namespace attnc::attn
