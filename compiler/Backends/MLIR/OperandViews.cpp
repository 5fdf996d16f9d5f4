#include "Backends/MLIR/OperandViews.h"

#include "Backends/MLIR/SpecToAttn.h"
#include "Support/Errors.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::mlirbackend {

// A view of `memref` with its dims split as `groups` says, into `shape`, in which a group has
// at most one dynamic dim: the source dim's extent.
Value expand(ImplicitLocOpBuilder& b, Value memref, ArrayRef<int64_t> shape,
             ArrayRef<ReassociationIndices> groups) {
  auto type = cast<MemRefType>(memref.getType());
  FailureOr<MemRefType> expanded = memref::ExpandShapeOp::computeExpandedType(type, shape, groups);
  if (failed(expanded))
    throw JobError("mlir backend: no strided view of an operand in the shape asked");
  SmallVector<Value> dynamicSizes;
  for (auto [source, group] : llvm::enumerate(groups))
    for (int64_t d : group)
      if (ShapedType::isDynamic(shape[d]))
        dynamicSizes.push_back(b.create<memref::DimOp>(memref, source));
  return b.create<memref::ExpandShapeOp>(
      *expanded, memref, getReassociationIndicesAttribute(b, groups), dynamicSizes, shape);
}

// [B, T, d] as [B, 1, T, d], or [H, R, C] as [1, H, R, C]: a batch of one head, or heads
// shared by every batch, as attn.matmul takes its factors.
Value withUnitFirst(ImplicitLocOpBuilder& b, Value memref, bool unitBatch) {
  ArrayRef<int64_t> s = cast<MemRefType>(memref.getType()).getShape();
  if (unitBatch)
    return expand(b, memref, {1, s[0], s[1], s[2]}, {{0, 1}, {2}, {3}});
  return expand(b, memref, {s[0], 1, s[1], s[2]}, {{0, 1}, {2}, {3}});
}

// A weight [R, C] as [1, 1, R, C].
Value asOneMatrix(ImplicitLocOpBuilder& b, Value weight) {
  ArrayRef<int64_t> s = cast<MemRefType>(weight.getType()).getShape();
  return expand(b, weight, {1, 1, s[0], s[1]}, {{0, 1, 2}, {3}});
}

Value asArgumentType(ImplicitLocOpBuilder& b, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return b.create<memref::CastOp>(withArgumentLayout(type.getShape(), type.getElementType()),
                                  memref);
}

Value headsFirst(ImplicitLocOpBuilder& b, Value rows, int64_t heads, int64_t d) {
  constexpr int64_t kDynamic = ShapedType::kDynamic;
  Value split = expand(b, rows, {kDynamic, kDynamic, heads, d}, {{0}, {1}, {2, 3}});
  auto order = AffineMap::getPermutationMap(ArrayRef<unsigned>{0, 2, 1, 3}, b.getContext());
  return asArgumentType(b, b.create<memref::TransposeOp>(split, AffineMapAttr::get(order)));
}

Value transposedMatrices(ImplicitLocOpBuilder& b, Value matrices) {
  auto order = AffineMap::getPermutationMap(ArrayRef<unsigned>{0, 1, 3, 2}, b.getContext());
  return b.create<memref::TransposeOp>(matrices, AffineMapAttr::get(order));
}

} // namespace attnc::mlirbackend
