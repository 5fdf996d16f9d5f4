//===- ScoreTerms.h - a score op's terms, elementwise --------------------------===//
//
// What a score op (attn.online_update, attn.weights) does to a score s = scale * q.k, in the
// order of attn.attention: the score_mod region (a spec's softcap, ALiBi and bias arrive in it,
// written by Spec/BuiltinExpressions), then the mask_mod region (every built-in mask and the
// spec's mask_mod), whose false makes s = -inf; and dropout's factor on a probability. Every
// lowering of the score ops applies the terms through this one class, on vectors of any shape;
// the expression regions' scalar ops are applied to such vectors elementwise.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_SCORETERMS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_SCORETERMS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

class ScoreTerms {
public:
  // Emits, at the builder's insertion point, what the regions read once per update of one
  // batch and head: their scalar arguments.
  ScoreTerms(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op, mlir::Value batch,
             mlir::Value head);

  // Whether the mask_mod region is evaluated at each score, or known to keep every score
  // modified (the tile classifier, ExpressionBounds.h, proved it for the block).
  enum class MaskMod { Evaluate, KeepsAll };

  struct ScoreShapedReads;
  // s with every term applied: modified (with `reads`, as modified() takes them), then -inf
  // where not kept. queryPos (i + off) and keyPos (j) are i32 vectors of s's shape: each
  // score's query row position and key index.
  mlir::Value apply(mlir::ImplicitLocOpBuilder& b, mlir::Value s, mlir::Value queryPos,
                    mlir::Value keyPos, MaskMod maskMod,
                    const ScoreShapedReads* reads = nullptr) const;
  // Where a caller holds the scores' elements of score-shaped aux tensors (those of
  // scoreShapedAux, read at exactly (b, h, q_idx, kv_idx)) laid out as the scores are:
  // buffers[aux] (null for the others), the element of the score vector at hand at `place`.
  struct ScoreShapedReads {
    llvm::ArrayRef<mlir::Value> buffers;
    llvm::SmallVector<mlir::Value, 2> place;
  };
  // Per aux operand, whether the score_mod region reads it at exactly (b, h, q_idx, kv_idx) (a
  // bias): a read a caller can lay out beside the scores (ScorePatch.h) instead of gathering.
  static llvm::SmallVector<bool> scoreShapedAux(ScoreOpInterface op);

  // The modifiers alone: the score_mod region; with `reads`, those reads are vector loads.
  mlir::Value modified(mlir::ImplicitLocOpBuilder& b, mlir::Value s, mlir::Value queryPos,
                       mlir::Value keyPos, const ScoreShapedReads* reads = nullptr) const;
  // The mask alone, at the modified scores s: an i1 vector, true where kept, or null when the
  // op has no mask_mod region or maskMod is KeepsAll.
  mlir::Value kept(mlir::ImplicitLocOpBuilder& b, mlir::Value s, mlir::Value queryPos,
                   mlir::Value keyPos, MaskMod maskMod) const;

  // d score_mod / d s at the raw scores s: attn.backward's score_grad region, or null where
  // it has none (no score_mod: the derivative is 1).
  mlir::Value scoreGradient(mlir::ImplicitLocOpBuilder& b, mlir::Value s, mlir::Value queryPos,
                            mlir::Value keyPos) const;

  // attn.backward's aux_grad region at the raw scores s: per read of aux_grad_targets, its
  // indices (i32 vectors, unclamped) and its partial d score_mod / d element (f32); empty
  // where the op has no such region.
  llvm::SmallVector<mlir::Value> auxGradients(mlir::ImplicitLocOpBuilder& b, mlir::Value s,
                                              mlir::Value queryPos, mlir::Value keyPos) const;

  // p, a vector of probabilities at queryPos and keyPos, times the dropout region's factor
  // (where p weights v, after the row sums took it); p as it is when the op has no dropout
  // (an update or a backward without the region, or attn.weights).
  mlir::Value dropout(mlir::ImplicitLocOpBuilder& b, mlir::Value p, mlir::Value queryPos,
                      mlir::Value keyPos) const;

  // off, the key position of query row 0 (index): Tk - Tq when causal_align is bottom_right,
  // else 0.
  static mlir::Value positionOffset(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op);
  // The head of the key rows query head `head` reads (index): g, or `head` itself for additive
  // keys (one head per query head).
  static mlir::Value keyHeadOf(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op,
                               mlir::Value head);
  // scale * w[g, head mod (H / H_kv), c], the additive score's weight of hidden dim c (f32)
  // from op's score_weights.
  static mlir::Value additiveWeight(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op,
                                    mlir::Value head, mlir::Value c);
  // g, the key/value head of query head `head` (index): head / (H / H_kv).
  static mlir::Value kvHeadOf(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op,
                              mlir::Value head);

private:
  // The value `region` yields at every element of s's shape (the block arguments come from s,
  // queryPos and keyPos).
  mlir::Value expression(mlir::ImplicitLocOpBuilder& b, mlir::Region& region, mlir::Value s,
                         mlir::Value queryPos, mlir::Value keyPos,
                         const ScoreShapedReads* reads = nullptr) const;
  // Every value the region yields, in order.
  llvm::SmallVector<mlir::Value> expressions(mlir::ImplicitLocOpBuilder& b, mlir::Region& region,
                                             mlir::Value s, mlir::Value queryPos,
                                             mlir::Value keyPos,
                                             const ScoreShapedReads* reads = nullptr) const;
  // Aux operand `aux` at the integer vectors `indices` (one per dimension, clamped into it),
  // element by element.
  mlir::Value gatherAux(mlir::ImplicitLocOpBuilder& b, int64_t aux,
                        mlir::ArrayRef<mlir::Value> indices) const;

  mutable ScoreOpInterface op;   // (op accessors are not const)
  mlir::Region* dropoutFactor;   // an update's or a backward's dropout region, when not empty
  // For the expression regions, as i32: b, h, g, off (qpos - q_idx), Tq, Tk.
  mlir::Value batch, head, kvHead, offset, seqQ, seqK;
};

// A vector of `type`'s shape with every element equal to the constant `value`.
mlir::Value splatConstant(mlir::ImplicitLocOpBuilder& b, mlir::VectorType type, double value);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_SCORETERMS_H
