//===- MatmulOperands.h - how an attn.matmul's lowerings read its operands ----===//
//
// What both lowerings of attn.matmul read the same way (LowerMatmul.cpp's register tiles on
// CPUs and CUDA cores, MatmulMma.cpp's tensor cores): a factor's batch and head for out's, a
// batch's contraction extent, and lhs's elements with mha's sinusoidal encoding added.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_MATMULOPERANDS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_MATMULOPERANDS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

class MatmulOperands {
public:
  explicit MatmulOperands(MatmulOp op);

  // A factor's batch (dim 0) or head (dim 1) index for out's: 0 for a broadcast batch,
  // h / (H / H_x) for heads.
  mlir::Value factorIndex(mlir::ImplicitLocOpBuilder& b, mlir::Value factor, int64_t dim,
                          mlir::Value outIndex);
  // What out's rows below `rowEnd` read of batch entry `batch` (out's own, or with batch_sum
  // each entry the sum runs over): the factors' batch indices, and the contraction steps they
  // sum over: n_b = min(R, max(limit[b], 0)) with a limit, else R; under causal at most rowEnd
  // (row t sums r <= t).
  struct BatchEntry {
    mlir::Value lhs, rhs, extent;
  };
  BatchEntry batchEntry(mlir::ImplicitLocOpBuilder& b, mlir::Value batch, mlir::Value rowEnd);
  // R: lhs's steps (its last dim, or its third with lhs_transposed).
  mlir::Value steps(mlir::ImplicitLocOpBuilder& b);
  // The sinusoid's frequency of each pair of lhs's last dim (the model dims: the contraction's,
  // or out's rows with lhs_transposed), as the reference takes it (Semantics/Positions.h), in
  // a stack table; null without a sinusoid.
  mlir::Value sinusoidTable(mlir::ImplicitLocOpBuilder& b);
  // lhs[lhsBatch, lhsHead, row, step] + PE(row + offset, step), or with lhs_transposed
  // lhs[lhsBatch, lhsHead, step, row] + PE(step + offset, row) (PE with `table` from
  // sinusoidTable), as f32.
  mlir::Value lhsElement(mlir::ImplicitLocOpBuilder& b, mlir::Value table, mlir::Value lhsBatch,
                         mlir::Value lhsHead, mlir::Value row, mlir::Value step);

  MatmulOp op;
  mlir::TypedValue<mlir::MemRefType> lhs, rhs, out;
  const int64_t columns; // out's C

private:
  mlir::Value sinusoid(mlir::ImplicitLocOpBuilder& b, mlir::Value table, mlir::Value position,
                       mlir::Value step);
};

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_MATMULOPERANDS_H
