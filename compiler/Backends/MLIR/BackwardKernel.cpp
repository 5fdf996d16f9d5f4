#include "Backends/MLIR/BackwardKernel.h"

#include "Backends/MLIR/ProjectionsBackward.h"
#include "Backends/MLIR/SpecToAttn.h"
#include "Spec/BuiltinExpressions.h"
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <optional>
#include <tuple>

using namespace mlir;

namespace attnc::mlirbackend {
namespace {

// RoPE taken back: the backward reads q and k rotated as the forward did (R(pos) x, into
// buffers of their type), writes dq and dk of the rotated rows into f32 buffers, and those go
// back through R(pos)^T into grad_q and grad_k (attn.rope's transposed).
class RotatedRows {
public:
  RotatedRows(ImplicitLocOpBuilder& b, const Spec& spec, Value q, Value k, Value gradQ, Value gradK)
      : spec(spec), gradQ(gradQ), gradK(gradK) {
    rotatedQ = buffer(b, q, elementOf(q));
    rotatedK = buffer(b, k, elementOf(k));
    rotatedGradQ = buffer(b, q, b.getF32Type());
    rotatedGradK = buffer(b, k, b.getF32Type());
    Value zero = b.create<arith::ConstantIndexOp>(0);
    queryOffset =
        spec.causalAlign == CausalAlign::BottomRight
            ? b.create<arith::SubIOp>(b.create<memref::DimOp>(k, 2), b.create<memref::DimOp>(q, 2))
                  .getResult()
            : zero;
    rotate(b, q, rotatedQ, queryOffset, false);
    rotate(b, k, rotatedK, zero, false);
  }

  // What attn.backward reads and writes in place of q, k, grad_q and grad_k.
  std::tuple<Value, Value, Value, Value> operands() const {
    return {rotatedQ, rotatedK, rotatedGradQ, rotatedGradK};
  }

  // The rotated rows' gradients taken back into grad_q and grad_k; the buffers freed.
  void finish(ImplicitLocOpBuilder& b) {
    rotate(b, rotatedGradQ, gradQ, queryOffset, true);
    rotate(b, rotatedGradK, gradK, b.create<arith::ConstantIndexOp>(0), true);
    for (Value buffer : {rotatedQ, rotatedK, rotatedGradQ, rotatedGradK})
      b.create<memref::DeallocOp>(buffer);
  }

private:
  static Type elementOf(Value rows) { return cast<MemRefType>(rows.getType()).getElementType(); }

  // A buffer of `rows`' shape and `element` type (a kernel's workspace, allocated before its
  // first phase: mha's projections come before the rotations).
  static Value buffer(ImplicitLocOpBuilder& b, Value rows, Type element) {
    OpBuilder::InsertionGuard atWorkspace(b);
    attn::insertBeforePhases(b);
    auto type = cast<MemRefType>(rows.getType());
    SmallVector<Value> dynamicSizes;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        dynamicSizes.push_back(b.create<memref::DimOp>(rows, d));
    return b.create<memref::AllocOp>(MemRefType::get(type.getShape(), element), dynamicSizes);
  }

  void rotate(ImplicitLocOpBuilder& b, Value rows, Value into, Value offset, bool transposed) {
    b.create<attn::RopeOp>(
        rows, into, offset, Value(),
        b.getStringAttr(spec.ropeStyle == RopeStyle::Half ? "half" : "interleaved"),
        b.getF64FloatAttr(spec.ropeTheta), b.getI64IntegerAttr(spec.ropeDims),
        transposed ? b.getUnitAttr() : UnitAttr());
  }

  const Spec& spec;
  Value gradQ, gradK, rotatedQ, rotatedK, rotatedGradQ, rotatedGradK, queryOffset;
};

// The tensors whose gradients attn.backward's aux_grad region serves: the spec's float aux
// tensors (zero where score_mod does not read them), then the bias's, score-shaped and summed
// in place (aux_grad_direct).
struct LearnedTensors {
  LearnedTensors(const Spec& spec, llvm::function_ref<Value(const std::string&)> arg) {
    for (const AuxTensor& tensor : spec.aux)
      if (tensor.elementType == expr::Type::Float) {
        names.push_back(tensor.name);
        gradients.push_back(arg(gradientName(tensor.name)));
      }
    if (spec.bias) {
      direct.push_back(static_cast<int64_t>(names.size()));
      names.push_back("bias");
      gradients.push_back(arg(gradientName("bias")));
    }
  }

  // The region and the attributes naming each read's gradient.
  void buildRegion(attn::BackwardOp backward, const ScoreExpressions& score, const Spec& spec,
                   std::span<const AuxOperand> auxOperands) const {
    if (names.empty())
      return;
    const std::vector<int64_t> targets =
        buildAuxGradientRegion(backward.getAuxGrad(), score.trees, spec, auxOperands, names);
    if (targets.empty())
      backward.getAuxGrad().getBlocks().clear(); // score_mod reads none of them
    else
      backward.setAuxGradTargets(targets);
    if (!direct.empty())
      backward.setAuxGradDirect(direct);
  }

  std::vector<std::string> names;
  SmallVector<Value> gradients;
  std::vector<int64_t> direct;
};

} // namespace

void buildBackwardKernel(ImplicitLocOpBuilder& b, const Spec& spec, DType operandDtype) {
  const std::vector<Argument> args = backwardArguments(spec);
  func::FuncOp kernel = addKernelFunction(b, spec, args, kBackwardKernelName);
  const std::map<std::string, Value> byName = argumentsByName(b, spec, args, kernel);
  auto arg = [&](const std::string& name) { return byName.at(name); };
  auto optional = [&](const std::string& name) { return optionalArgument(byName, name); };
  const std::vector<AuxOperand> auxOperands = auxOperandsOf(spec, byName);
  SmallVector<Value> aux;
  for (const AuxOperand& operand : auxOperands)
    aux.push_back(arg(operand.name));
  // B, Tq and Tk before any phase (the lowering reads them there): mha's inputs are [B, T,
  // d_model], the others' heads first.
  const int64_t positions = spec.variant == Variant::Mha ? 1 : 2;
  Value seqQ = b.create<memref::DimOp>(arg("q"), positions);
  SmallVector<Value> offsets(4, b.create<arith::ConstantIndexOp>(0));
  SmallVector<Value> sizes = {b.create<memref::DimOp>(arg("q"), 0),
                              b.create<arith::ConstantIndexOp>(spec.heads), seqQ,
                              b.create<memref::DimOp>(arg("k"), positions)};
  ProjectionsBackward::Heads heads = {arg("q"),      arg("k"),      arg("v"),      arg("o"),
                                      arg("grad_o"), arg("grad_q"), arg("grad_k"), arg("grad_v")};
  std::optional<ProjectionsBackward> projections;
  if (spec.variant == Variant::Mha) {
    projections.emplace(b, spec, byName, operandDtype);
    heads = projections->heads();
  }
  std::optional<RotatedRows> rotated;
  if (spec.rope)
    rotated.emplace(b, spec, heads.q, heads.k, heads.gradQ, heads.gradK);
  if (rotated)
    std::tie(heads.q, heads.k, heads.gradQ, heads.gradK) = rotated->operands();
  const LearnedTensors learned(spec, arg);
  auto backward = b.create<attn::BackwardOp>(
      heads.q, heads.k, heads.v, heads.o, heads.gradO, arg("lse"), aux, optional("sinks"),
      heads.gradQ, heads.gradK, heads.gradV, optional(gradientName("sinks")), learned.gradients,
      offsets, sizes, seqQ, b.getI64IntegerAttr(spec.heads), DenseI64ArrayAttr(),
      DenseI64ArrayAttr(), b.getF64FloatAttr(spec.scale),
      b.getStringAttr(spec.causalAlign == CausalAlign::TopLeft ? "top_left" : "bottom_right"));
  buildScoreRegions(backward.getScoreMod(), backward.getMaskMod(), spec, auxOperands);
  const ScoreExpressions score(spec);
  if (!score.trees.empty())
    buildScoreGradientRegion(backward.getScoreGrad(), score.trees, spec, auxOperands);
  if (!score.trees.empty())
    learned.buildRegion(backward, score, spec, auxOperands);
  if (std::optional<expr::Node> dropout = dropoutAsExpression(spec))
    buildExpressionRegion(backward.getDropout(), *dropout, spec, auxOperands);
  if (rotated)
    rotated->finish(b);
  if (projections)
    projections->finish(b);
  b.create<func::ReturnOp>();
}

} // namespace attnc::mlirbackend
