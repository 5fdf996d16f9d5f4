//===- CacheRows.cpp - reading a KV cache's rows --------------------------===//
#include "attn/Kit/CacheRows.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::attn {

Value cacheKeys(ImplicitLocOpBuilder& b, Value rows, Value table) {
  if (!table)
    return b.create<memref::DimOp>(rows, 2);
  return b.create<arith::MulIOp>(b.create<memref::DimOp>(table, 1),
                                 indexConstant(b, cast<MemRefType>(rows.getType()).getDimSize(2)));
}

Value cacheLastPage(ImplicitLocOpBuilder& b, Value rows) {
  return b.create<arith::SubIOp>(b.create<memref::DimOp>(rows, 0), indexConstant(b, 1));
}

std::pair<Value, Value> pagedRow(ImplicitLocOpBuilder& b, Value table, Value sequence, Value key,
                                 int64_t pageSize, Value lastPage) {
  Value pageRows = indexConstant(b, pageSize);
  Value entry = b.create<memref::LoadOp>(
      table, ValueRange{sequence, b.create<arith::DivUIOp>(key, pageRows)});
  return {clampIndex(b, entry, lastPage), b.create<arith::RemUIOp>(key, pageRows)};
}

} // namespace attnc::attn
