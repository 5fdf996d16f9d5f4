//===- Builders.cpp - small IR builders -----------------------------------===//
#include "attn/Kit/Builders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cassert>

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

Value f64Table(ImplicitLocOpBuilder& b, ArrayRef<double> values) {
  const int64_t size = static_cast<int64_t>(values.size());
  Value table = b.create<memref::AllocaOp>(MemRefType::get({size}, b.getF64Type()));
  for (int64_t i = 0; i < size; ++i)
    b.create<memref::StoreOp>(b.create<arith::ConstantOp>(b.getF64FloatAttr(values[i])), table,
                              ValueRange{indexConstant(b, i)});
  return table;
}

Value clampIndex(ImplicitLocOpBuilder& b, Value index, Value last) {
  if (!index.getType().isIndex())
    index = b.create<arith::IndexCastOp>(b.getIndexType(), index);
  return b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(index, indexConstant(b, 0)), last);
}

namespace {

bool isPhase(Operation& op) {
  return isa<scf::ForallOp>(op) || op.getDialect()->getNamespace() == "attn";
}

} // namespace

Operation* firstPhase(Block& block) {
  for (Operation& op : block)
    if (isPhase(op))
      return &op;
  return block.getTerminator();
}

Value workspaceBuffer(ImplicitLocOpBuilder& b, Block& body, MemRefType type,
                      const std::function<SmallVector<Value>(ImplicitLocOpBuilder&)>& sizes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(firstPhase(body));
  Value buffer = b.create<memref::AllocOp>(type, sizes(b));
  b.setInsertionPoint(body.getTerminator());
  b.create<memref::DeallocOp>(buffer);
  return buffer;
}

void rowChunkPhase(ImplicitLocOpBuilder& b, Operation* before, Value rows, int64_t chunk,
                   const std::function<void(ImplicitLocOpBuilder&, Value, Value, Value)>& task) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(before);
  // task = (bi H + h) chunks + c
  Value heads = indexConstant(b, cast<MemRefType>(rows.getType()).getDimSize(1));
  Value chunks =
      b.create<arith::CeilDivUIOp>(b.create<memref::DimOp>(rows, 2), indexConstant(b, chunk));
  Value tasks = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(b.create<memref::DimOp>(rows, 0), heads), chunks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value index = forall.getInductionVar(0);
  Value head = b.create<arith::DivUIOp>(index, chunks);
  task(b, b.create<arith::DivUIOp>(head, heads), b.create<arith::RemUIOp>(head, heads),
       b.create<arith::MulIOp>(b.create<arith::RemUIOp>(index, chunks), indexConstant(b, chunk)));
}

void insertBeforePhases(OpBuilder& b) {
  for (Operation& op : *b.getInsertionBlock())
    if (isPhase(op))
      return b.setInsertionPoint(&op);
}

Value unfoldedTaskCount(ImplicitLocOpBuilder& b, Value count, Value extent) {
  return b.create<arith::MinUIOp>(count, b.create<arith::AddIOp>(count, extent));
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

void forEachIndex(ImplicitLocOpBuilder& b, ArrayRef<Value> lower, ArrayRef<Value> upper,
                  const std::function<void(ImplicitLocOpBuilder&, ArrayRef<Value>)>& body) {
  assert(lower.size() == upper.size() && "a box needs a lower and an upper bound per dimension");
  SmallVector<Value> indices;
  std::function<void(ImplicitLocOpBuilder&)> loops = [&](ImplicitLocOpBuilder& lb) {
    const size_t d = indices.size();
    if (d == lower.size())
      return body(lb, indices);
    forRange(lb, lower[d], upper[d], [&](ImplicitLocOpBuilder& ib, Value i) {
      indices.push_back(i);
      loops(ib);
      indices.pop_back();
    });
  };
  loops(b);
}

SmallVector<Value>
foldRange(ImplicitLocOpBuilder& b, Value lower, Value upper, ValueRange init,
          function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value, ValueRange)> body) {
  auto loop =
      b.create<scf::ForOp>(lower, upper, indexConstant(b, 1), init,
                           [&](OpBuilder& nested, Location loc, Value i, ValueRange carried) {
                             ImplicitLocOpBuilder inner(loc, nested);
                             inner.create<scf::YieldOp>(body(inner, i, carried));
                           });
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}

std::pair<Value, Value> unitStrideView(ImplicitLocOpBuilder& b, Value buffer, int64_t dim) {
  auto type = cast<MemRefType>(buffer.getType());
  auto meta = b.create<memref::ExtractStridedMetadataOp>(buffer);
  SmallVector<int64_t> layout(type.getRank(), ShapedType::kDynamic);
  layout[dim] = 1;
  auto viewType =
      MemRefType::get(type.getShape(), type.getElementType(),
                      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, layout));
  SmallVector<OpFoldResult> sizes(meta.getSizes()), strides(meta.getStrides());
  strides[dim] = b.getIndexAttr(1);
  Value view = b.create<memref::ReinterpretCastOp>(viewType, meta.getBaseBuffer(),
                                                   OpFoldResult(meta.getOffset()), sizes, strides);
  Value unit = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, meta.getStrides()[dim],
                                       indexConstant(b, 1));
  return {view, unit};
}

std::pair<Value, Value> unitInnerStrideView(ImplicitLocOpBuilder& b, Value buffer) {
  return unitStrideView(b, buffer, cast<MemRefType>(buffer.getType()).getRank() - 1);
}

void ifUnitInnerStride(ImplicitLocOpBuilder& b, Value buffer,
                       const std::function<void(ImplicitLocOpBuilder&, Value)>& byView,
                       const std::function<void(ImplicitLocOpBuilder&)>& byElements) {
  auto [view, unit] = unitInnerStrideView(b, buffer);
  // The branches are built before the scf.if is inserted, so that what b builds meanwhile goes
  // before it, as inside forRange's body.
  b.create<scf::IfOp>(
      unit,
      [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder tb(loc, nested);
        byView(tb, view);
        tb.create<scf::YieldOp>();
      },
      [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder eb(loc, nested);
        byElements(eb);
        eb.create<scf::YieldOp>();
      });
}

void storeLinesWhereWhole(ImplicitLocOpBuilder& b, Value buffer, ArrayRef<Value> lines,
                          ArrayRef<SmallVector<Value, 4>> places, Value whole,
                          const std::function<Value(ImplicitLocOpBuilder&, int64_t)>& edgeMask) {
  auto branch = b.create<scf::IfOp>(whole, /*withElseRegion=*/true);
  ImplicitLocOpBuilder tb(b.getLoc(), branch.getThenBodyBuilder());
  for (auto [line, place] : llvm::zip_equal(lines, places))
    tb.create<vector::StoreOp>(line, buffer, place);
  ImplicitLocOpBuilder eb(b.getLoc(), branch.getElseBodyBuilder());
  for (auto [v, line] : llvm::enumerate(lines))
    eb.create<vector::MaskedStoreOp>(buffer, places[v], edgeMask(eb, static_cast<int64_t>(v)),
                                     line);
}

int64_t elementsPerCacheLine(Value buffer) {
  return 64 * 8 / cast<MemRefType>(buffer.getType()).getElementTypeBitWidth();
}

SmallVector<Value> transposeLanes(ImplicitLocOpBuilder& b, SmallVector<Value> rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t block = n / 2; block >= 1; block /= 2) {
    SmallVector<int64_t> upper(n), lower(n);
    for (int64_t l = 0; l < n; ++l) {
      upper[l] = (l & block) ? n + l - block : l;
      lower[l] = (l & block) ? n + l : l + block;
    }
    for (int64_t i = 0; i < n; ++i)
      if (!(i & block)) {
        Value top = rows[i], bottom = rows[i + block];
        rows[i] = b.create<vector::ShuffleOp>(top, bottom, upper);
        rows[i + block] = b.create<vector::ShuffleOp>(top, bottom, lower);
      }
  }
  return rows;
}

} // namespace attnc::attn
