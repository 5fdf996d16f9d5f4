//===- ScoreTerms.cpp - an update's score terms, elementwise -------------------===//
#include "attn/Transforms/ScoreTerms.h"

#include "Semantics/Positions.h"
#include "attn/Transforms/LoweringUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
namespace {

// ALiBi's slope of head h, from a table of all heads' slopes (a constant global).
Value alibiSlope(ImplicitLocOpBuilder& b, OnlineUpdateOp op, Value head) {
  const int64_t heads = op.getNumHeads();
  auto module = op->getParentOfType<ModuleOp>();
  std::string name = "attn_alibi_slopes_" + std::to_string(heads);
  auto type = MemRefType::get({heads}, b.getF32Type());
  if (!module.lookupSymbol(name)) {
    std::vector<float> slopes;
    for (double s : positions::alibiSlopes(heads))
      slopes.push_back(static_cast<float>(s));
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    mb.create<memref::GlobalOp>(
        b.getLoc(), name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(RankedTensorType::get({heads}, b.getF32Type()),
                               ArrayRef<float>(slopes)),
        /*constant=*/true, IntegerAttr());
  }
  Value table = b.create<memref::GetGlobalOp>(type, name);
  return b.create<memref::LoadOp>(table, head);
}

} // namespace

Value splatConstant(ImplicitLocOpBuilder& b, VectorType type, double value) {
  Type element = type.getElementType();
  Attribute scalar = isa<FloatType>(element)
                         ? Attribute(b.getFloatAttr(element, value))
                         : Attribute(b.getIntegerAttr(element, static_cast<int64_t>(value)));
  return b.create<arith::ConstantOp>(DenseElementsAttr::get(type, scalar));
}

Value ScoreTerms::positionOffset(ImplicitLocOpBuilder& b, OnlineUpdateOp op) {
  if (op.getCausalAlign() != "bottom_right")
    return indexConstant(b, 0);
  return b.create<arith::SubIOp>(b.create<memref::DimOp>(op.getKey(), 2), op.getSeqQ());
}

ScoreTerms::ScoreTerms(ImplicitLocOpBuilder& b, OnlineUpdateOp op, Value batch, Value head)
    : op(op) {
  if (op.getAlibi())
    slope = alibiSlope(b, op, head);
  if (Value lengths = op.getLengths())
    keyLimit = b.create<memref::LoadOp>(lengths, batch);
}

bool ScoreTerms::hasMask(StringRef name) const {
  return llvm::any_of(op.getMasks(),
                      [&](Attribute a) { return cast<StringAttr>(a).getValue() == name; });
}

Value ScoreTerms::apply(ImplicitLocOpBuilder& b, Value s, Value queryPos, Value keyPos,
                        Gather gather) const {
  auto type = cast<VectorType>(s.getType());
  auto typeI32 = cast<VectorType>(queryPos.getType());
  if (double cap = op.getSoftcap().convertToDouble(); cap > 0) {
    Value scaled = b.create<arith::MulFOp>(s, splatConstant(b, type, 1.0 / cap));
    s = b.create<arith::MulFOp>(b.create<math::TanhOp>(scaled), splatConstant(b, type, cap));
  }
  if (slope) {
    Value distance = b.create<math::AbsIOp>(b.create<arith::SubIOp>(queryPos, keyPos));
    Value penalty = b.create<arith::MulFOp>(b.create<arith::SIToFPOp>(type, distance),
                                            b.create<vector::BroadcastOp>(type, slope));
    s = b.create<arith::SubFOp>(s, penalty);
  }
  if (Value bias = op.getBias())
    s = b.create<arith::AddFOp>(s, gather(b, bias));

  using P = arith::CmpIPredicate;
  Value keep;
  auto both = [&](Value cond) { keep = keep ? b.create<arith::AndIOp>(keep, cond) : cond; };
  if (hasMask("causal"))
    both(b.create<arith::CmpIOp>(P::sle, keyPos, queryPos));
  if (hasMask("window")) {
    Value left = b.create<arith::SubIOp>(queryPos, splatConstant(b, typeI32, *op.getWindowLeft()));
    Value right = b.create<arith::AddIOp>(
        queryPos, splatConstant(b, typeI32, op.getWindowRight().value_or(0)));
    both(b.create<arith::CmpIOp>(P::sge, keyPos, left));
    both(b.create<arith::CmpIOp>(P::sle, keyPos, right));
  }
  if (Value mask = op.getMask()) {
    Value bits = gather(b, mask);
    both(b.create<arith::CmpIOp>(P::ne, bits,
                                 splatConstant(b, cast<VectorType>(bits.getType()), 0)));
  }
  if (keyLimit) // padding: j < lengths[b]
    both(b.create<arith::CmpIOp>(P::slt, keyPos, b.create<vector::BroadcastOp>(typeI32, keyLimit)));
  if (!keep)
    return s;
  return b.create<arith::SelectOp>(
      keep, s, splatConstant(b, type, -std::numeric_limits<double>::infinity()));
}

} // namespace attnc::attn
