//===- BackwardRowPhases.h - the backward's phases over query rows ---------------===//
//
// The phases of an attn.backward's CPU lowering (LowerBackward.cpp) before and after its
// tasks over keys, each value one task's sum in a fixed order (the same at any thread count):
//
//   before them, a task per tile of `rows` query rows of a batch and head:
//     D_i = sum_c dO_ic O_ic                                  into delta [B, H, Tq]
//     with sinks, the tile's part of d sink_h = -sum_i exp(sink_h - lse_i) D_i, in row order,
//                                                             into sinkParts [B, H, ceil(Tq /
//                                                             rows)]
//   after them, a task per tile: dQ = sum_s dQ^T_s, the S chunks' copies in order;
//   and with sinks a task per head: grad_sinks[h] = -(its parts summed in order).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDROWPHASES_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDROWPHASES_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// D's phase (and the sink parts' where sinkParts is not null), at b's insertion point, which
// it leaves after the phase.
void emitDeltaPhase(mlir::ImplicitLocOpBuilder& b, BackwardOp op, int64_t rows, mlir::Value delta,
                    mlir::Value sinkParts);

// dQ from its copies, queryGrad [S B, H, d_k, Tq rounded up to rows] (`chunks` = S), at b's
// insertion point, which it leaves after the phase.
void emitQueryGradPhase(mlir::ImplicitLocOpBuilder& b, BackwardOp op, int64_t rows,
                        mlir::Value queryGrad, mlir::Value chunks);

// The sinks' gradients from the parts, at b's insertion point, which it leaves after the phase.
void emitSinkGradientPhase(mlir::ImplicitLocOpBuilder& b, BackwardOp op, mlir::Value sinkParts);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDROWPHASES_H
