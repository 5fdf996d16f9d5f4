//===- LoweringUtils.cpp - helpers shared by the vector lowerings -------------===//
#include "attn/Transforms/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace attnc::attn {

Value indexConstant(ImplicitLocOpBuilder& b, int64_t value) {
  return b.create<arith::ConstantIndexOp>(value);
}

Value f32Constant(ImplicitLocOpBuilder& b, double value) {
  return b.create<arith::ConstantOp>(b.getF32FloatAttr(static_cast<float>(value)));
}

Value f32Splat(ImplicitLocOpBuilder& b, int64_t lanes, double value) {
  auto type = VectorType::get({lanes}, b.getF32Type());
  return b.create<arith::ConstantOp>(
      DenseElementsAttr::get(type, b.getF32FloatAttr(static_cast<float>(value))));
}

Value loadF32(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices) {
  Value element = b.create<memref::LoadOp>(buffer, indices);
  if (element.getType().isF32())
    return element;
  return b.create<arith::ExtFOp>(b.getF32Type(), element);
}

void storeF32(ImplicitLocOpBuilder& b, Value value, Value buffer, ValueRange indices) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  if (!element.isF32())
    value = b.create<arith::TruncFOp>(element, value);
  b.create<memref::StoreOp>(value, buffer, indices);
}

void forRange(ImplicitLocOpBuilder& b, Value lower, Value upper,
              const std::function<void(ImplicitLocOpBuilder&, Value)>& body) {
  b.create<scf::ForOp>(lower, upper, indexConstant(b, 1), std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value i, ValueRange) {
                         ImplicitLocOpBuilder inner(loc, nested);
                         body(inner, i);
                         inner.create<scf::YieldOp>();
                       });
}

} // namespace attnc::attn
