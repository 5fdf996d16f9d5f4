//===- KeyRange.h - the keys a mask can keep, from its affine terms --------------===//
//
// The tile classifier's loop bounds. A score op's mask_mod region is the whole mask (every
// built-in mask and the spec's own); the conjuncts of its top-level && that compare kv_idx
// with an affine function of a row coordinate (qpos or q_idx, coefficient -1, 0 or 1) plus
// values the same at every score of the domain (constants, b, h, g, Tq, Tk, aux reads at
// such indices) bound the keys any row of the domain can keep:
//
//   kv_idx <= qpos                               causal    hi = last row's qpos + 1
//   kv_idx >= qpos - L && kv_idx - R <= qpos     window    lo = first qpos - L, hi = last + R + 1
//   qpos - kv_idx <= L                           dilated   lo = first qpos - L
//   kv_idx < lengths[b]                          padding   hi = lengths[b]
//
// tile_keys loops over the key blocks of that range only and the weights lowering writes zeros
// outside it; every other term is left to the elementwise region and to the per-block bounds of
// ExpressionBounds.h. The bounds hold while the region's 32-bit ints do not overflow (the
// language leaves overflow unspecified).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_KEYRANGE_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_KEYRANGE_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace attnc::attn {

// The keys [lo, hi) of the op's domain that its mask_mod can keep for some row of the domain,
// as index values emitted at the builder's insertion point; j0 <= lo <= hi <= j0 + nj. Terms
// reading b bound the range only when the domain is one batch entry, h or g only when it is
// also one head.
std::pair<mlir::Value, mlir::Value> keptKeyRange(mlir::ImplicitLocOpBuilder& b,
                                                 ScoreOpInterface op);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_KEYRANGE_H
