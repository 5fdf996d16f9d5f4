//===- BackwardAuxTerms.h - where a backward task's aux_grad terms go ------------===//
//
// The terms of the aux tensors' gradients that a task of an attn.backward's CPU lowering
// (LowerBackward.cpp) forms at its scores (BackwardTile::AuxTerms), each added once, in the
// task's order:
// - a table's (a relative position bias, ALiBi's slopes) into the task's own copy of the
//   table's gradient, lane by lane (AuxCopies.h);
// - a score-shaped one's (aux_grad_direct: a bias) into the task's [keyBlock, rows] buffer at
//   the score's place, which writeDirectTerms then writes into the gradient a tile at a time
//   (ScorePatch.h).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDAUXTERMS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDAUXTERMS_H

#include "attn/IR/AttnOps.h"
#include "attn/Transforms/AuxCopies.h"
#include "attn/Transforms/BackwardTile.h"
#include "attn/Transforms/ScorePatch.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// Adds the terms of one key group's score vectors into task `task`'s copies of the tables'
// gradients and into `direct`'s buffers (per aux_grads tensor, null for a table).
void addAuxTerms(mlir::ImplicitLocOpBuilder& b, BackwardOp op, AuxCopies& copies, mlir::Value task,
                 llvm::ArrayRef<BackwardTile::AuxTerms> terms, llvm::ArrayRef<mlir::Value> direct);

// Each direct gradient's patch of the tile's rows and the block's keys (`tile`, its tensor
// unset), at (b', h') = (batch, head) clamped into the gradient (0 where it broadcasts over
// them), by writeGradientPatch: the first (batch, head) to reach it (b' = batch, h' = head)
// stores, a later one adds. The tile kept the keys [begin, end) of the block (begin = end for
// a tile the masks skip).
void writeDirectTerms(mlir::ImplicitLocOpBuilder& b, BackwardOp op,
                      llvm::ArrayRef<mlir::Value> direct, const ScorePatch& tile, mlir::Value begin,
                      mlir::Value end);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDAUXTERMS_H
