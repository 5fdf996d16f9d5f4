//===- BackwardSteps.h - the loops attn.backward's tasks are made of -------------===//
//
// The steps LowerBackward.cpp assembles its tasks from: key loops, the register tiles that
// accumulate dK, dV and dQ, and the copies between a task's stack buffers and the tensors.
// Every accumulation adds its terms in ascending key (or row) order, one fused multiply-add at
// a time, or with bf16 pairs one vdpbf16ps per pair of keys (or rows) that the tiling fixes, so
// a gradient's value is the same for any thread count and run.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDSTEPS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDSTEPS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace attnc::attn {

// for (j = lo; j < hi; j += unroll) body(j, ..., j + unroll - 1), then the keys left one at a
// time.
void forKeyGroups(
    mlir::ImplicitLocOpBuilder& b, mlir::Value lo, mlir::Value hi, int64_t unroll,
    const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::ArrayRef<mlir::Value>)>& body);

// buffer[i, c] = 0 for every element of a 2-d stack buffer.
void zeroBuffer(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer);

// acc[j, :] += sum_(r < count) weights[j, r] rowsOf[r, :] for j in [begin, end), in register
// tiles of keys x columns of at most `lanes` f32 (dK's and dV's products). With rowsOf in bf16
// pairs of rows ([rows / 2, 2 d], copyRowsInPairs along the rows; d a multiple of 16) the sum takes
// vdpbf16ps, weights[j, r] and weights[j, r + 1] rounded to a bf16 pair.
void accumulateKeyRows(mlir::ImplicitLocOpBuilder& b, mlir::Value acc, mlir::Value weights,
                       mlir::Value rowsOf, mlir::Value begin, mlir::Value end, mlir::Value count,
                       int64_t lanes);

// acc[prefix..., c, first + r] += sum_(j in [begin, end)) weights[j, r] keysT[c, j] for every c
// and the `vectors` vectors of rows r, in register tiles of columns x row vectors (the fused
// form's dQ^T of a key block; keysT the block's K rows transposed, BlockColumns).
void accumulateColumnsOfBlock(mlir::ImplicitLocOpBuilder& b, mlir::Value acc,
                              mlir::ArrayRef<mlir::Value> prefix, mlir::Value first,
                              mlir::Value weights, int64_t vectors, mlir::Value keysT,
                              mlir::Value begin, mlir::Value end);
// The same sum as vdpbf16ps over pairs of keys: weightPairs [block / 2, 2 rows] (bf16, pairs of
// keys along the rows: packWeightPairs) against keyPairs [block / 2, 2 d] (the block's key rows
// in pairs along the rows, copyRowsInPairs), 16 rows in a vector. A key of a pair outside
// [begin, end) has weight 0, against its row in keyPairs (0 past the block's keys).
void accumulateColumnsOfBlockInPairs(mlir::ImplicitLocOpBuilder& b, mlir::Value acc,
                                     mlir::ArrayRef<mlir::Value> prefix, mlir::Value first,
                                     mlir::Value weightPairs, mlir::Value keyPairs,
                                     mlir::Value begin, mlir::Value end);

// dst[s, 2 i + u] = weights[2 s + u, i] rounded to bf16 for the keys 2 s + u in [begin, end),
// and 0 for the other key of a pair that meets them: a key block's weights [block, rows] in
// pairs of keys, rows in lanes (AVX512-BF16's 16).
void packWeightPairs(mlir::ImplicitLocOpBuilder& b, mlir::Value weights, mlir::Value begin,
                     mlir::Value end, mlir::Value dst);

// dst[r, c] = src[batch, head, row + r, c] for r < count, as f32.
void copyRows(mlir::ImplicitLocOpBuilder& b, mlir::Value src, mlir::Value batch, mlir::Value head,
              mlir::Value row, mlir::Value count, mlir::Value dst);

// How copyRowsInPairs lays rows out in bf16 pairs: along each row's columns (element c of row
// r at [c / 2, 2 r + c mod 2]: the recomputed products' operand, rows in lanes) or along the
// rows (at [r / 2, 2 c + r mod 2]: dK's and dV's sums, columns in lanes).
enum class PairsAlong { Columns, Rows };

// src[batch, head, row + r, c] (bf16) for r < count into dst in pairs as `along` says, and 0
// for the rows past the count that dst holds.
void copyRowsInPairs(mlir::ImplicitLocOpBuilder& b, mlir::Value src, mlir::Value batch,
                     mlir::Value head, mlir::Value row, mlir::Value count, mlir::Value dst,
                     PairsAlong along);

// grad[batch, head, row + i, c] = sum_s copies[s B + batch, head, c, row + i] for i < count and
// every c, the sum over s < chunks in order from 0 (dQ from the key chunks' copies of dQ^T,
// B = batches; the copies' rows padded to whole tiles of tileRows): in 8 x 8 squares whose
// rows' sums are transposed in registers where grad is f32 with contiguous rows, element by
// element otherwise.
void storeSummedTransposed(mlir::ImplicitLocOpBuilder& b, mlir::Value grad, mlir::Value copies,
                           mlir::Value batch, mlir::Value head, mlir::Value row, mlir::Value count,
                           mlir::Value chunks, mlir::Value batches, int64_t tileRows);

// grad[batch, head, first + i, c] = element(i, c) for i < count and every c of grad.
void storeRows(mlir::ImplicitLocOpBuilder& b, mlir::Value grad, mlir::Value batch, mlir::Value head,
               mlir::Value first, mlir::Value count,
               const std::function<mlir::Value(mlir::ImplicitLocOpBuilder&, mlir::Value,
                                               mlir::Value)>& element);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDSTEPS_H
