// Views of the kernel's arguments and workspace buffers as attn.matmul takes its factors
// [B|1, H, R, C]: the variants' operand products (VariantOperands.cpp), linear attention's
// (LinearAttention.cpp) and mha's backward (ProjectionsBackward.cpp).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_OPERANDVIEWS_H
#define ATTNC_COMPILER_BACKENDS_MLIR_OPERANDVIEWS_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::mlirbackend {

// A view of `memref` with its dims split as `groups` says, into `shape`, in which a group has
// at most one dynamic dim: the source dim's extent. JobError where no strided view exists.
mlir::Value expand(mlir::ImplicitLocOpBuilder& b, mlir::Value memref, llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<mlir::ReassociationIndices> groups);

// [B, T, d] as [B, 1, T, d], or [H, R, C] as [1, H, R, C]: a batch of one head, or heads
// shared by every batch.
mlir::Value withUnitFirst(mlir::ImplicitLocOpBuilder& b, mlir::Value memref, bool unitBatch);

// A weight [R, C] as [1, 1, R, C].
mlir::Value asOneMatrix(mlir::ImplicitLocOpBuilder& b, mlir::Value weight);

// `memref` in the kernel's argument layout, the type the lowerings take for any operand.
mlir::Value asArgumentType(mlir::ImplicitLocOpBuilder& b, mlir::Value memref);

// Rows of heads side by side [B, T, H d] as the attention's [B, H, T, d].
mlir::Value headsFirst(mlir::ImplicitLocOpBuilder& b, mlir::Value rows, int64_t heads, int64_t d);

// [.., R, C] as [.., C, R]: each matrix of a rank-4 buffer transposed.
mlir::Value transposedMatrices(mlir::ImplicitLocOpBuilder& b, mlir::Value matrices);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_OPERANDVIEWS_H
