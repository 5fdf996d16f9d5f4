#include "Backends/MLIR/ProjectionsBackward.h"

#include "Abi/Arguments.h"
#include "Backends/MLIR/OperandViews.h"
#include "Backends/MLIR/SpecToAttn.h"
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::mlirbackend {

ProjectionsBackward::ProjectionsBackward(ImplicitLocOpBuilder& b, const Spec& spec,
                                         const std::map<std::string, Value>& byName, DType element)
    : byName(byName), projections(b, spec, byName, element,
                                  spec.saveProjections ? VariantOperands::Products::Saved
                                                       : VariantOperands::Products::Emit) {
  if (!spec.saveProjections) // O_a recomputed; else the forward's o_heads
    buildAttention(b, spec, byName, projections, {projections.output(), Value(), Value()});
  const Value concatenated = projections.concatenatedOutput();
  const Value inputQ = byName.at("q"), inputK = byName.at("k"), gradY = byName.at("grad_o");
  const int64_t H = spec.heads, Hkv = spec.kvHeads;
  outputGradient =
      rows(b, inputQ, H * spec.dV, cast<MemRefType>(concatenated.getType()).getElementType());
  inputGradient(b, gradY, "w_o", outputGradient); // dO_a = dY W_O^T
  weightGradient(b, concatenated, gradY, "w_o", Value());
  queryGradient = rows(b, inputQ, H * spec.dK, b.getF32Type());
  keyGradient = rows(b, inputK, Hkv * spec.dK, b.getF32Type());
  valueGradient = rows(b, inputK, Hkv * spec.dV, b.getF32Type());
  headViews = {projections.query(),
               projections.keys(),
               projections.values(),
               projections.output(),
               headsFirst(b, outputGradient, H, spec.dV),
               headsFirst(b, queryGradient, H, spec.dK),
               headsFirst(b, keyGradient, Hkv, spec.dK),
               headsFirst(b, valueGradient, Hkv, spec.dV)};
}

Value ProjectionsBackward::rows(ImplicitLocOpBuilder& b, Value input, int64_t width, Type element) {
  constexpr int64_t kDynamic = ShapedType::kDynamic;
  OpBuilder::InsertionGuard atWorkspace(b);
  attn::insertBeforePhases(b);
  return b.create<memref::AllocOp>(
      MemRefType::get({kDynamic, kDynamic, width}, element),
      ValueRange{b.create<memref::DimOp>(input, 0), b.create<memref::DimOp>(input, 1)});
}

void ProjectionsBackward::weightGradient(ImplicitLocOpBuilder& b, Value x, Value dRows,
                                         const std::string& weight, Value offset) const {
  auto product =
      b.create<attn::MatmulOp>(withUnitFirst(b, x, false), withUnitFirst(b, dRows, false),
                               asOneMatrix(b, byName.at(gradientName(weight))), Value(), offset);
  product.setLhsTransposed(true);
  product.setBatchSum(true);
}

void ProjectionsBackward::inputGradient(ImplicitLocOpBuilder& b, Value dRows,
                                        const std::string& weight, Value into) const {
  b.create<attn::MatmulOp>(withUnitFirst(b, dRows, false),
                           transposedMatrices(b, asOneMatrix(b, byName.at(weight))),
                           withUnitFirst(b, into, false), Value(), Value());
}

void ProjectionsBackward::finish(ImplicitLocOpBuilder& b) const {
  const Value queryOffset = projections.queryPositionOffset();
  const Value keyOffset = projections.keyPositionOffset();
  for (auto [name, gradient, offset] :
       {std::tuple{"q", queryGradient, queryOffset}, std::tuple{"k", keyGradient, keyOffset},
        std::tuple{"v", valueGradient, keyOffset}}) {
    const std::string weight = std::string("w_") + name;
    inputGradient(b, gradient, weight, byName.at(gradientName(name)));
    weightGradient(b, byName.at(name), gradient, weight, offset);
  }
  for (Value buffer : {outputGradient, queryGradient, keyGradient, valueGradient})
    b.create<memref::DeallocOp>(buffer);
  projections.release(b);
}

} // namespace attnc::mlirbackend
