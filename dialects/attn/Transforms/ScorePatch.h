//===- ScorePatch.h - a score-shaped tensor's patch of a query tile and key block ------===//
//
// A tensor read or written at every score, [B or 1, H or 1, Tq, Tk] (a bias, and a bias's
// gradient: aux_grad_direct), is as large as the scores. The CPU kernels move the part of it
// that one query tile meets in one key block between the tensor and a [keyBlock, rows] f32
// buffer of the task's, keys in rows and the tile's rows in lanes, as the scores lie:
// - readPatch packs the bias the scores add (the forward's and the backward's recomputed
//   ones), so that a score vector's elements are one vector load instead of a gather
//   (ScoreTerms::ScoreShapedReads): attn.pack_query's transposing copy of the key block's
//   columns;
// - writeGradientPatch writes the gradient's terms, with no pass that zeroes it first: the
//   first (batch, head) to reach an element stores (zeros at the block's keys its tile does
//   not keep), a later one of a broadcast bias adds, in the same order at any thread count.
// Both go in 8 x 8 squares transposed in registers where the tensor's rows are contiguous at
// run time, element by element otherwise.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_SCOREPATCH_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_SCOREPATCH_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// Rows row + i (i < count) and keys firstKey + j (j < keyCount) of a score-shaped tensor at
// (batch, head). The rows and keys are inside it: the spec proves a read's indices inside its
// tensor at every row and key of the sequences.
struct ScorePatch {
  mlir::Value tensor;
  mlir::Value batch, head;
  mlir::Value row, count;
  mlir::Value firstKey, keyCount;
};

// buffer[j, i] = tensor[batch', head', row + i, firstKey + j] as f32 for i < count and
// j < keyCount, 0 at the rows past the count; (batch', head') is (batch, head) clamped into the
// tensor as every aux read is (clampIndex: 0 where it broadcasts).
void readPatch(mlir::ImplicitLocOpBuilder& b, const ScorePatch& patch, mlir::Value buffer);

// Prefetches the patch's rows' cache lines into the data cache, for a patch read next: a
// bias is read once per (query tile, key block) from memory, 16 rows' short runs of a key
// block's columns that the hardware's prefetchers, each following a page, barely start on.
// The rows and keys are clamped into the tensor, so the patch may run past its end.
void prefetchPatch(mlir::ImplicitLocOpBuilder& b, const ScorePatch& patch);

// The gradient's elements of the patch (its batch and head inside the gradient: the caller's
// choice where it broadcasts) from terms[j, i]: where firstToReach (i1) holds,
// terms at the keys j in [begin, end) the tile kept and 0 at the block's other keys; else
// terms added at [begin, end). begin = end for a tile the masks skip.
void writeGradientPatch(mlir::ImplicitLocOpBuilder& b, const ScorePatch& grad, mlir::Value terms,
                        mlir::Value begin, mlir::Value end, mlir::Value firstToReach);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_SCOREPATCH_H
