//===- AuxCopies.h - the aux tables' gradients as copies summed in order ------===//
//
// The gradients of float aux tables (an attn.backward's aux_grads outside aux_grad_direct:
// tables that many scores read, such as a relative position bias or ALiBi's slopes), summed
// without atomics: each writer (a CPU task, a GPU warp) adds its terms into a copy of every
// table's gradient of its own, in its own order, and a phase per table then sums the copies in
// copy order. Every element is thus the same sum in the same order at any thread count and in
// every run. The workspace holds `count` copies of each table: a table's size, not a T x T
// tensor's, is what this suits (a score-shaped gradient is summed in place instead).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_AUXCOPIES_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_AUXCOPIES_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// The dimensions of aux_grads[k] (index values read from its type or its sizes).
llvm::SmallVector<mlir::Value> auxGradDims(mlir::ImplicitLocOpBuilder& b, BackwardOp op, int64_t k);

class AuxCopies {
public:
  explicit AuxCopies(BackwardOp op);
  // `count` copies of each table's gradient, [count, elements] f32 workspace allocated at b's
  // insertion point (a kernel's workspace goes before its phases).
  void allocate(mlir::ImplicitLocOpBuilder& b, mlir::Value count);

  // Whether the op has a table's gradient.
  bool empty() const {
    return llvm::none_of(table, [](bool is) { return is; });
  }
  // Whether aux_grads[k] is a table (summed through copies), not a score-shaped gradient.
  bool isTable(int64_t k) const { return table[k]; }
  // aux_grads[k]'s copies, [count, elements].
  mlir::Value copiesOf(int64_t k) const { return tables[k]; }
  // Zeroes elements first, first + step, ... of copy `copy` of every table (the lanes of a
  // writer may stride over them).
  void zero(mlir::ImplicitLocOpBuilder& b, mlir::Value copy, mlir::Value first, mlir::Value step);
  // The element of aux_grads[k] that a read's `indices` (index values, one per dimension) name,
  // as an offset in row-major order, each index clamped into its dimension as the read clamps
  // it.
  mlir::Value offsetOf(mlir::ImplicitLocOpBuilder& b, int64_t k,
                       llvm::ArrayRef<mlir::Value> indices);
  // Adds a read's term vector into copy `copy` of aux_grads[k] at the lanes' `indices` (i32
  // vectors, one per dimension), lane by lane in order: lanes may read the same element.
  void addTerms(mlir::ImplicitLocOpBuilder& b, mlir::Value copy, int64_t k,
                llvm::ArrayRef<mlir::Value> indices, mlir::Value term);
  // A phase per table, a task per `perTask` elements: grad[e] = sum_c copies[c, e] in copy
  // order; then the copies freed.
  void sumInOrder(mlir::ImplicitLocOpBuilder& b, int64_t perTask);

private:
  mlir::Value elementsOf(mlir::ImplicitLocOpBuilder& b, int64_t k);

  BackwardOp op;
  mlir::Value count;
  llvm::SmallVector<bool> table;         // per aux_grads tensor: whether it is a table
  llvm::SmallVector<mlir::Value> tables; // per aux_grads tensor: its copies, null if direct
};

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_AUXCOPIES_H
