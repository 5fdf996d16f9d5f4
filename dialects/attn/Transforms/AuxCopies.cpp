//===- AuxCopies.cpp - the aux tables' gradients as copies summed in order ----===//
#include "attn/Transforms/AuxCopies.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {

SmallVector<Value> auxGradDims(ImplicitLocOpBuilder& b, BackwardOp op, int64_t k) {
  Value grad = op.getAuxGrads()[k];
  SmallVector<Value> dims;
  for (int64_t d = 0; d < cast<MemRefType>(grad.getType()).getRank(); ++d)
    dims.push_back(b.create<memref::DimOp>(grad, d));
  return dims;
}

AuxCopies::AuxCopies(BackwardOp op) : op(op) {
  ArrayRef<int64_t> direct = op.getAuxGradDirect().value_or(ArrayRef<int64_t>{});
  for (int64_t k = 0; k < static_cast<int64_t>(op.getAuxGrads().size()); ++k)
    table.push_back(!llvm::is_contained(direct, k));
}

void AuxCopies::allocate(ImplicitLocOpBuilder& b, Value copies) {
  count = copies;
  constexpr int64_t dynamic = ShapedType::kDynamic;
  for (int64_t k = 0; k < static_cast<int64_t>(table.size()); ++k)
    tables.push_back(
        table[k] ? b.create<memref::AllocOp>(MemRefType::get({dynamic, dynamic}, b.getF32Type()),
                                             ValueRange{count, elementsOf(b, k)})
                 : Value());
}

void AuxCopies::addTerms(ImplicitLocOpBuilder& b, Value copy, int64_t k, ArrayRef<Value> indices,
                         Value term) {
  const int64_t lanes = cast<VectorType>(term.getType()).getNumElements();
  forRange(b, indexConstant(b, 0), indexConstant(b, lanes),
           [&](ImplicitLocOpBuilder& lb, Value lane) {
             const SmallVector<Value> at = llvm::map_to_vector(indices, [&](Value index) {
               return lb.create<vector::ExtractElementOp>(index, lane).getResult();
             });
             const SmallVector<Value, 2> element{copy, offsetOf(lb, k, at)};
             Value sum = lb.create<arith::AddFOp>(lb.create<memref::LoadOp>(tables[k], element),
                                                  lb.create<vector::ExtractElementOp>(term, lane));
             lb.create<memref::StoreOp>(sum, tables[k], element);
           });
}

Value AuxCopies::elementsOf(ImplicitLocOpBuilder& b, int64_t k) {
  Value elements = indexConstant(b, 1);
  for (Value dim : auxGradDims(b, op, k))
    elements = b.create<arith::MulIOp>(elements, dim);
  return elements;
}

void AuxCopies::zero(ImplicitLocOpBuilder& b, Value copy, Value first, Value step) {
  for (auto [k, copies] : llvm::enumerate(tables)) {
    if (!copies)
      continue;
    auto loop = b.create<scf::ForOp>(first, elementsOf(b, static_cast<int64_t>(k)), step);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    b.create<memref::StoreOp>(f32Constant(b, 0), copies, ValueRange{copy, loop.getInductionVar()});
  }
}

Value AuxCopies::offsetOf(ImplicitLocOpBuilder& b, int64_t k, ArrayRef<Value> indices) {
  Value offset = indexConstant(b, 0);
  for (auto [index, dim] : llvm::zip_equal(indices, auxGradDims(b, op, k))) {
    Value at = clampIndex(b, index, b.create<arith::SubIOp>(dim, indexConstant(b, 1)));
    offset = b.create<arith::AddIOp>(b.create<arith::MulIOp>(offset, dim), at);
  }
  return offset;
}

void AuxCopies::sumInOrder(ImplicitLocOpBuilder& b, int64_t perTask) {
  for (auto [k, copies] : llvm::enumerate(tables)) {
    if (!copies)
      continue; // summed in place
    Value elements = elementsOf(b, static_cast<int64_t>(k));
    Value tasks =
        unfoldedTaskCount(b, b.create<arith::CeilDivUIOp>(elements, indexConstant(b, perTask)),
                          b.create<memref::DimOp>(op.getQuery(), 0));
    auto forall =
        b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forall.getBody());
    Value first = b.create<arith::MulIOp>(forall.getInductionVar(0), indexConstant(b, perTask));
    Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, indexConstant(b, perTask)),
                                          elements);
    const SmallVector<Value> dims = auxGradDims(b, op, static_cast<int64_t>(k));
    forRange(b, first, last, [&](ImplicitLocOpBuilder& eb, Value e) {
      Value sum = foldRange(eb, indexConstant(eb, 0), count, {f32Constant(eb, 0)},
                            [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc) {
                              Value term = cb.create<memref::LoadOp>(copies, ValueRange{c, e});
                              return SmallVector<Value>{cb.create<arith::AddFOp>(acc[0], term)};
                            })
                      .front();
      // e in row-major order back to indices.
      SmallVector<Value> at(dims.size());
      Value rest = e;
      for (size_t d = dims.size(); d-- > 0;) {
        at[d] = eb.create<arith::RemUIOp>(rest, dims[d]);
        rest = eb.create<arith::DivUIOp>(rest, dims[d]);
      }
      eb.create<memref::StoreOp>(sum, op.getAuxGrads()[k], at);
    });
  }
  for (Value copies : tables)
    if (copies)
      b.create<memref::DeallocOp>(copies);
}

} // namespace attnc::attn
