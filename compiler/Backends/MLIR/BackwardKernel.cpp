#include "Backends/MLIR/BackwardKernel.h"

#include "Backends/MLIR/SpecToAttn.h"
#include "Spec/BuiltinExpressions.h"
#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::mlirbackend {

void buildBackwardKernel(ImplicitLocOpBuilder& b, const Spec& spec) {
  const std::vector<Argument> args = backwardArguments(spec);
  func::FuncOp kernel = addKernelFunction(b, spec, args, kBackwardKernelName);
  const std::map<std::string, Value> byName = argumentsByName(b, spec, args, kernel);
  auto arg = [&](const char* name) { return byName.at(name); };

  // The tensors the expressions read (lengths, mask, bias, aux) as the op's aux operands.
  SmallVector<Value> aux;
  std::vector<AuxOperand> auxOperands;
  for (const ExpressionTensor& tensor : expressionTensors(spec)) {
    aux.push_back(arg(tensor.name.c_str()));
    auxOperands.push_back({tensor.name, cast<MemRefType>(aux.back().getType()).getElementType()});
  }
  Value q = arg("q"), k = arg("k");
  Value zero = b.create<arith::ConstantIndexOp>(0);
  Value seqQ = b.create<memref::DimOp>(q, 2);
  SmallVector<Value> offsets(4, zero);
  SmallVector<Value> sizes = {b.create<memref::DimOp>(q, 0),
                              b.create<arith::ConstantIndexOp>(spec.heads), seqQ,
                              b.create<memref::DimOp>(k, 2)};
  auto optional = [&](const std::string& name) {
    auto it = byName.find(name);
    return it == byName.end() ? Value() : it->second;
  };
  auto backward = b.create<attn::BackwardOp>(
      q, k, arg("v"), arg("o"), arg("grad_o"), arg("lse"), aux, optional("sinks"), arg("grad_q"),
      arg("grad_k"), arg("grad_v"), optional(gradientName("sinks")), offsets, sizes, seqQ,
      b.getI64IntegerAttr(spec.heads), b.getF64FloatAttr(spec.scale),
      b.getStringAttr(spec.causalAlign == CausalAlign::TopLeft ? "top_left" : "bottom_right"));
  buildScoreRegions(backward.getScoreMod(), backward.getMaskMod(), spec, auxOperands);
  const ScoreExpressions score(spec);
  if (!score.trees.empty())
    buildScoreGradientRegion(backward.getScoreGrad(), score.trees, spec, auxOperands);
  if (std::optional<expr::Node> dropout = dropoutAsExpression(spec))
    buildExpressionRegion(backward.getDropout(), *dropout, spec, auxOperands);
  b.create<func::ReturnOp>();
}

} // namespace attnc::mlirbackend
