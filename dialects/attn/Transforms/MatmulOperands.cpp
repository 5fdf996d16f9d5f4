//===- MatmulOperands.cpp - how an attn.matmul's lowerings read its operands --===//
#include "attn/Transforms/MatmulOperands.h"

#include "Semantics/Positions.h"
#include "attn/Kit/Angles.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <numbers>

using namespace mlir;

namespace attnc::attn {

MatmulOperands::MatmulOperands(MatmulOp op)
    : op(op), lhs(op.getLhs()), rhs(op.getRhs()), out(op.getOut()),
      columns(op.getOut().getType().getDimSize(3)) {}

Value MatmulOperands::factorIndex(ImplicitLocOpBuilder& b, Value factor, int64_t dim,
                                  Value outIndex) {
  auto type = cast<MemRefType>(factor.getType());
  if (dim == 0)
    return type.getDimSize(0) == 1 ? indexConstant(b, 0) : outIndex;
  const int64_t group = out.getType().getDimSize(1) / type.getDimSize(1);
  return group == 1 ? outIndex : b.create<arith::DivUIOp>(outIndex, indexConstant(b, group));
}

Value MatmulOperands::steps(ImplicitLocOpBuilder& b) {
  return b.create<memref::DimOp>(lhs, op.getLhsTransposed() ? 2 : 3);
}

MatmulOperands::BatchEntry MatmulOperands::batchEntry(ImplicitLocOpBuilder& b, Value batch,
                                                      Value rowEnd) {
  Value extent = steps(b);
  if (Value limit = op.getLimit()) {
    Value n = b.create<arith::IndexCastOp>(b.getIndexType(),
                                           b.create<memref::LoadOp>(limit, ValueRange{batch}));
    n = b.create<arith::MaxSIOp>(n, indexConstant(b, 0));
    extent = b.create<arith::MinSIOp>(n, extent);
  }
  if (op.getCausal())
    extent = b.create<arith::MinUIOp>(extent, rowEnd);
  return {factorIndex(b, lhs, 0, batch), factorIndex(b, rhs, 0, batch), extent};
}

Value MatmulOperands::sinusoidTable(ImplicitLocOpBuilder& b) {
  if (!op.getSinusoid())
    return Value();
  const int64_t model = lhs.getType().getDimSize(3);
  SmallVector<double> values;
  for (int64_t p = 0; p < model / 2; ++p)
    values.push_back(positions::sinusoidalFrequency(2 * p, model));
  return f64Table(b, values);
}

// PE(position, step): sin(position w) for an even step, cos = sin(. + pi/2) for an odd one,
// one sine per element (the pi/2 added in f64, before the reduction).
Value MatmulOperands::sinusoid(ImplicitLocOpBuilder& b, Value table, Value position, Value step) {
  Value pair = b.create<arith::DivUIOp>(step, indexConstant(b, 2));
  Value angle = b.create<arith::MulFOp>(positionAsF64(b, position),
                                        b.create<memref::LoadOp>(table, ValueRange{pair}));
  Value parity = b.create<arith::RemUIOp>(step, indexConstant(b, 2));
  Value phase =
      b.create<arith::MulFOp>(positionAsF64(b, parity),
                              b.create<arith::ConstantOp>(b.getF64FloatAttr(std::numbers::pi / 2)));
  return sinOf(b, b.create<arith::AddFOp>(angle, phase));
}

Value MatmulOperands::lhsElement(ImplicitLocOpBuilder& b, Value table, Value lhsBatch,
                                 Value lhsHead, Value row, Value step) {
  if (op.getLhsTransposed())
    std::swap(row, step);
  Value x = loadF32(b, lhs, {lhsBatch, lhsHead, row, step});
  if (Value offset = op.getSinusoid())
    x = b.create<arith::AddFOp>(x, sinusoid(b, table, b.create<arith::AddIOp>(row, offset), step));
  return x;
}

} // namespace attnc::attn
