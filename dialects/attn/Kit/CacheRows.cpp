//===- CacheRows.cpp - reading a KV cache's rows --------------------------===//
#include "attn/Kit/CacheRows.h"

#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::attn {

CacheRows::CacheRows(ImplicitLocOpBuilder& b, Value rows, Value table)
    : table(table), pageSize(cast<MemRefType>(rows.getType()).getDimSize(2)) {
  if (table)
    lastPage = b.create<arith::SubIOp>(b.create<memref::DimOp>(rows, 0), indexConstant(b, 1));
}

Value CacheRows::keys(ImplicitLocOpBuilder& b, Value rows, Value table) {
  if (!table)
    return b.create<memref::DimOp>(rows, 2);
  return b.create<arith::MulIOp>(b.create<memref::DimOp>(table, 1),
                                 indexConstant(b, cast<MemRefType>(rows.getType()).getDimSize(2)));
}

std::pair<Value, Value> CacheRows::place(ImplicitLocOpBuilder& b, Value sequence, Value key) const {
  if (!table)
    return {sequence, key};
  Value pageRows = indexConstant(b, pageSize);
  Value entry = b.create<memref::LoadOp>(
      table, ValueRange{sequence, b.create<arith::DivUIOp>(key, pageRows)});
  return {clampIndex(b, entry, lastPage), b.create<arith::RemUIOp>(key, pageRows)};
}

Value CacheRows::rowScale(ImplicitLocOpBuilder& b, Value scales, Value codes, Value outer,
                          Value head, Value row) {
  return scaleForUnscaled(b, b.create<memref::LoadOp>(scales, ValueRange{outer, head, row}),
                          codes.getType());
}

} // namespace attnc::attn
