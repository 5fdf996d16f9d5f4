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

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERSTATEOPS_H
