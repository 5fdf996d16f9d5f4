//===- WarpAdds.h - a warp's adds into memory in a fixed order, no atomics ----===//
//
// A GPU warp whose lanes add terms into elements of a buffer that several lanes may name at
// once (the gradient of an aux table, read at an index that score_mod computes), summed in an
// order fixed by the data alone, so the result is the same in every run: the lanes that name
// one element exchange their terms by shuffles and one of them adds their sum.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_WARPADDS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_WARPADDS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

constexpr int64_t kWarpSize = 32;

// __syncwarp(): the warp's lanes wait for each other, and each then sees the others' stores.
void syncWarp(mlir::ImplicitLocOpBuilder& b);

// buffer[row, offset] += term for every lane (`lane`, index) of the warp whose `offset` (i64)
// is not -1. Where every such lane names one element (a table of one value per head), their
// terms are summed by 5 rounds of xor shuffles and the first of them adds the sum. Else each
// lane sums, in lane order, the terms of the lanes naming its element (32 rounds of 3
// shuffles), so all of them form the same sum, and the first of them adds it. Then a warp
// barrier, so that the next add sees it whichever lane makes it. The warp's lanes must run it
// together (in control flow that is uniform over the warp).
void addInLaneOrder(mlir::ImplicitLocOpBuilder& b, mlir::Value lane, mlir::Value buffer,
                    mlir::Value row, mlir::Value offset, mlir::Value term);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_WARPADDS_H
