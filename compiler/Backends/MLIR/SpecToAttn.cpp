#include "Backends/MLIR/SpecToAttn.h"

#include "Abi/Arguments.h"
#include "Backends/MLIR/BackwardKernel.h"
#include "Backends/MLIR/ExprToMlir.h"
#include "Backends/MLIR/LinearAttention.h"
#include "Backends/MLIR/VariantOperands.h"
#include "Spec/BuiltinExpressions.h"
#include "Support/Errors.h"
#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <map>

using namespace mlir;

namespace attnc::mlirbackend {
Type elementType(MLIRContext& ctx, const std::string& dtype) {
  Builder b(&ctx);
  if (dtype == "f32")
    return b.getF32Type();
  if (dtype == "f16")
    return b.getF16Type();
  if (dtype == "bf16")
    return b.getBF16Type();
  if (dtype == "i32")
    return b.getI32Type();
  if (dtype == "u8" || dtype == "i8") // signless: the ops that read them say which
    return b.getI8Type();
  throw JobError("mlir backend: no MLIR type for dtype " + dtype);
}

namespace {

// Static sizes for constant dims; B, Tq, Tk and broadcastable dims are dynamic, in the argument
// layout. An fp8_e4m3 cache's rows
// (u8 bytes in the ABI) are f8E4M3FN, which the lowerings decode (the kit's toF32, Kit/Elements.h).
MemRefType argumentType(MLIRContext& ctx, const Spec& spec, const Argument& arg) {
  const bool cacheRows =
      arg.name == "k" || arg.name == "v" || arg.name == "k_pages" || arg.name == "v_pages";
  Type element = cacheRows && spec.kvDtype == KvDType::Fp8E4m3
                     ? Type(Float8E4M3FNType::get(&ctx))
                     : elementType(ctx, arg.dtypes.front());
  SmallVector<int64_t> shape;
  for (const DimExpr& d : arg.shape)
    shape.push_back(!d.symbol && !d.broadcastable ? d.value : ShapedType::kDynamic);
  return withArgumentLayout(shape, element);
}

RankedTensorType tensorOf(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return RankedTensorType::get(type.getShape(), type.getElementType());
}

} // namespace

ScoreExpressions::ScoreExpressions(const Spec& spec)
    : modifiers(modifiersAsExpression(spec)), scoreMod(scoreModAsExpression(spec)) {
  if (modifiers)
    trees.push_back(&*modifiers);
  if (scoreMod)
    trees.push_back(&*scoreMod);
}

void buildScoreRegions(Region& scoreRegion, Region& maskRegion, const Spec& spec,
                       std::span<const AuxOperand> auxOperands) {
  const ScoreExpressions score(spec);
  if (!score.trees.empty())
    buildExpressionRegion(scoreRegion, score.trees, spec, auxOperands);
  if (std::optional<expr::Node> mask = masksWithMaskMod(spec, kBuiltinMasks))
    buildExpressionRegion(maskRegion, *mask, spec, auxOperands);
}

// The kernel's arguments by name, each a memref as the ops take it. Tensors whose positions
// come before their heads ([B, T, H, d] with bshd, a paged cache's nhd pages [pages,
// page_size, H_kv, d], and a quantized cache's scales of either, without d) are viewed heads
// first: the attention is always written BHSD.
std::map<std::string, Value> argumentsByName(ImplicitLocOpBuilder& b, const Spec& spec,
                                             const std::vector<Argument>& args,
                                             func::FuncOp kernel) {
  std::map<std::string, Value> byName;
  for (auto [arg, value] : llvm::zip(args, kernel.getArguments())) {
    Value v = value;
    // Tensors shaped as the query (the backward's too) and as the keys.
    const bool query =
        arg.name == "q" || arg.name == "o" || arg.name == "grad_q" || arg.name == "grad_o";
    const bool cacheRows = arg.name == "k" || arg.name == "v" || arg.name == "k_pages" ||
                           arg.name == "v_pages" || arg.name == "k_scale" ||
                           arg.name == "v_scale" || arg.name == "grad_k" || arg.name == "grad_v";
    const bool positionsFirst = spec.kvCache == KvCache::Paged
                                    ? spec.pageLayout == PageLayout::Nhd
                                    : spec.layout == Layout::Bshd;
    if ((query && spec.layout == Layout::Bshd) || (cacheRows && positionsFirst)) {
      SmallVector<unsigned> order = {0, 2, 1, 3};
      order.resize(cast<MemRefType>(v.getType()).getRank());
      v = b.create<memref::TransposeOp>(
          v, AffineMapAttr::get(AffineMap::getPermutationMap(order, b.getContext())));
    }
    byName[arg.name] = v;
  }
  return byName;
}

Value optionalArgument(const std::map<std::string, Value>& byName, const std::string& name) {
  auto it = byName.find(name);
  return it == byName.end() ? Value() : it->second;
}

std::vector<AuxOperand> auxOperandsOf(const Spec& spec,
                                      const std::map<std::string, Value>& byName) {
  std::vector<AuxOperand> operands;
  for (const ExpressionTensor& tensor : expressionTensors(spec))
    operands.push_back(
        {tensor.name, cast<MemRefType>(byName.at(tensor.name).getType()).getElementType()});
  return operands;
}

func::FuncOp addKernelFunction(ImplicitLocOpBuilder& b, const Spec& spec,
                               const std::vector<Argument>& args, StringRef name) {
  SmallVector<Type> types;
  for (const Argument& a : args)
    types.push_back(argumentType(*b.getContext(), spec, a));
  auto kernel = b.create<func::FuncOp>(name, b.getFunctionType(types, {}));
  kernel->setAttr("attn.kernel", b.getUnitAttr());
  b.setInsertionPointToStart(kernel.addEntryBlock());
  return kernel;
}

MemRefType withArgumentLayout(ArrayRef<int64_t> shape, Type element) {
  SmallVector<int64_t> strides(shape.size(), ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(element.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(shape, element, layout);
}

void buildAttention(ImplicitLocOpBuilder& b, const Spec& spec,
                    const std::map<std::string, Value>& byName, const VariantOperands& operands,
                    const AttentionResults& into) {
  auto readBuffer = [&](Value buffer) -> Value {
    return b.create<bufferization::ToTensorOp>(tensorOf(buffer), buffer, /*restrict=*/true);
  };
  auto read = [&](const std::string& name) -> Value {
    Value buffer = optionalArgument(byName, name);
    return buffer ? readBuffer(buffer) : Value();
  };

  // The spec's aux tensors and the kernel inputs the built-ins read (lengths, mask, bias,
  // block_layout) are the op's aux operands.
  const std::vector<AuxOperand> auxOperands = auxOperandsOf(spec, byName);
  SmallVector<Value> aux;
  for (const AuxOperand& operand : auxOperands)
    aux.push_back(read(operand.name));
  auto attention = b.create<attn::AttentionOp>(
      tensorOf(into.output), into.lse ? Type(tensorOf(into.lse)) : Type(),
      into.weights ? Type(tensorOf(into.weights)) : Type(), readBuffer(operands.query()),
      readBuffer(operands.keys()), readBuffer(operands.values()), aux, read("sinks"),
      read("block_table"), spec.kvCache == KvCache::Paged ? read("seq_lens") : Value(),
      read("k_scale"), read("v_scale"), spec.rope && spec.cached() ? read("seq_lens") : Value(),
      operands.scoreWeights() ? readBuffer(operands.scoreWeights()) : Value(),
      b.getF64FloatAttr(spec.scale),
      b.getStringAttr(spec.causalAlign == CausalAlign::TopLeft ? "top_left" : "bottom_right"),
      spec.rope ? b.getStringAttr(spec.ropeStyle == RopeStyle::Half ? "half" : "interleaved")
                : StringAttr(),
      b.getF64FloatAttr(spec.ropeTheta),
      spec.rope ? b.getI64IntegerAttr(spec.ropeDims) : IntegerAttr());
  buildScoreRegions(attention.getScoreMod(), attention.getMaskMod(), spec, auxOperands);
  if (std::optional<expr::Node> dropout = dropoutAsExpression(spec))
    buildExpressionRegion(attention.getDropout(), *dropout, spec, auxOperands);
  auto store = [&](Value result, Value dest) {
    b.create<bufferization::MaterializeInDestinationOp>(TypeRange{}, result, dest,
                                                        /*restrict=*/true, /*writable=*/true);
  };
  store(attention.getOutput(), into.output);
  if (into.lse)
    store(attention.getLse(), into.lse);
  if (into.weights)
    store(attention.getWeights(), into.weights);
}

OwningOpRef<ModuleOp> buildAttnModule(MLIRContext& ctx, const Spec& spec, DType operandDtype) {
  const std::vector<Argument> args = kernelArguments(spec);
  ImplicitLocOpBuilder b(UnknownLoc::get(&ctx), &ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getLoc());
  if (spec.backward) {
    b.setInsertionPointToEnd(module->getBody());
    buildBackwardKernel(b, spec, operandDtype);
  }
  b.setInsertionPointToEnd(module->getBody());
  func::FuncOp kernel = addKernelFunction(b, spec, args, kKernelName);

  const std::map<std::string, Value> byName = argumentsByName(b, spec, args, kernel);
  if (spec.variant == Variant::Linear) { // no softmax: feature rows and chunk products
    buildLinearAttention(b, spec, byName);
    b.create<func::ReturnOp>();
    return module;
  }
  const VariantOperands operands(b, spec, byName, operandDtype);
  buildAttention(
      b, spec, byName, operands,
      {operands.output(), optionalArgument(byName, "lse"), optionalArgument(byName, "weights")});
  operands.finish(b);
  b.create<func::ReturnOp>();
  return module;
}

} // namespace attnc::mlirbackend
