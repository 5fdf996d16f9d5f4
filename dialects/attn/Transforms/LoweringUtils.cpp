//===- LoweringUtils.cpp - helpers shared by the vector lowerings -------------===//
#include "attn/Transforms/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

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

namespace {

// `value` in the f32 shape of `like` (a scalar or a vector).
Value constantLike(ImplicitLocOpBuilder& b, Value like, double value) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return b.create<arith::ConstantOp>(
        DenseElementsAttr::get(vector, b.getF32FloatAttr(static_cast<float>(value))));
  return f32Constant(b, value);
}

Value equals(ImplicitLocOpBuilder& b, Value x, double value) {
  return b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, x, constantLike(b, x, value));
}

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

Value finiteMax(ImplicitLocOpBuilder& b, Value m) {
  return b.create<arith::SelectOp>(equals(b, m, -kInf), constantLike(b, m, 0), m);
}

Value rescaleFactor(ImplicitLocOpBuilder& b, Value from, Value to) {
  return b.create<arith::SelectOp>(equals(b, from, -kInf), constantLike(b, from, 0),
                                   b.create<math::ExpOp>(b.create<arith::SubFOp>(from, to)));
}

Value inverseSum(ImplicitLocOpBuilder& b, Value l) {
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, 0),
                                   b.create<arith::DivFOp>(constantLike(b, l, 1), l));
}

Value finishedLse(ImplicitLocOpBuilder& b, Value m, Value l) {
  Value shift = constantLike(b, m, static_cast<float>(attnc::softmax::kProbabilityShift));
  Value lse = b.create<arith::AddFOp>(b.create<arith::AddFOp>(m, shift), b.create<math::LogOp>(l));
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, -kInf), lse);
}

Value sinkShare(ImplicitLocOpBuilder& b, Value sink, Value to, double shift) {
  return rescaleFactor(b, sink, b.create<arith::AddFOp>(to, constantLike(b, to, shift)));
}

SinkFold foldSink(ImplicitLocOpBuilder& b, Value m, Value l, Value sink, double shift) {
  Value max = b.create<arith::MaximumFOp>(m, sink);
  Value to = finiteMax(b, max);
  Value accFactor = rescaleFactor(b, m, to);
  Value sum = b.create<arith::AddFOp>(b.create<arith::MulFOp>(l, accFactor),
                                      sinkShare(b, sink, to, shift));
  return {max, sum, accFactor};
}

Value clampIndex(ImplicitLocOpBuilder& b, Value index, Value last) {
  if (!index.getType().isIndex())
    index = b.create<arith::IndexCastOp>(b.getIndexType(), index);
  return b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(index, indexConstant(b, 0)), last);
}

Value loadF32(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices) {
  Value element = b.create<memref::LoadOp>(buffer, indices);
  if (element.getType().isF32())
    return element;
  if (isa<IntegerType>(element.getType()))
    return b.create<arith::SIToFPOp>(b.getF32Type(), element);
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

SmallVector<Value> rankOneUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                                 ArrayRef<Value> scalars, ValueRange acc) {
  const size_t vectors = rowVectors.size();
  auto type = cast<VectorType>(rowVectors.front().getType());
  SmallVector<Value> next(acc.begin(), acc.end());
  for (auto [s, scalar] : llvm::enumerate(scalars)) {
    Value splat = b.create<vector::BroadcastOp>(type, scalar);
    for (size_t r = 0; r < vectors; ++r)
      next[s * vectors + r] = b.create<vector::FMAOp>(rowVectors[r], splat, acc[s * vectors + r]);
  }
  return next;
}

Value gatherRows(ImplicitLocOpBuilder& b, Value firstRow, Value seqQ, int64_t lanes, Type element,
                 function_ref<Value(ImplicitLocOpBuilder&, Value)> load) {
  Value lastRow = b.create<arith::SubIOp>(seqQ, indexConstant(b, 1));
  Value rows = b.create<arith::ConstantOp>(b.getZeroAttr(VectorType::get({lanes}, element)));
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value i = b.create<arith::MinSIOp>(b.create<arith::AddIOp>(firstRow, indexConstant(b, lane)),
                                       lastRow);
    rows = b.create<vector::InsertOp>(load(b, i), rows, lane);
  }
  return rows;
}

} // namespace attnc::attn
