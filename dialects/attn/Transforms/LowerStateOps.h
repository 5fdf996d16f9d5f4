//===- LowerStateOps.h - online_init, pack_query, online_finalize to loops ----===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERSTATEOPS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERSTATEOPS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// The lowering of each online op, emitted at the builder's insertion point (before the op).
void lowerInit(mlir::ImplicitLocOpBuilder& b, OnlineInitOp op);
void lowerPack(mlir::ImplicitLocOpBuilder& b, PackQueryOp op);
void lowerFinalize(mlir::ImplicitLocOpBuilder& b, OnlineFinalizeOp op);

// pack_query built and lowered at once: dst[c, r] = scale * src[batch, head, row + r, c] for r <
// count, as f32, and 0 for the rows past the count up to dst's width: rows transposed, a column of
// consecutive rows in a vector.
void copyRowsTransposed(mlir::ImplicitLocOpBuilder& b, mlir::Value src, mlir::Value batch,
                        mlir::Value head, mlir::Value row, mlir::Value count, mlir::Value dst,
                        double scale);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERSTATEOPS_H
