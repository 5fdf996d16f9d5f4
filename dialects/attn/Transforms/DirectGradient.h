//===- DirectGradient.h - a score-shaped gradient written from a key block's terms -----===//
//
// A bias's gradient (aux_grad_direct: [B or 1, H or 1, Tq, Tk]) is as large as the scores, so
// the CPU backward writes it where it forms it, with no pass that zeroes it first: each key
// block keeps one query tile's terms in a [keyBlock, rows] buffer (keys in rows, query rows in
// lanes, as the scores are), and this writes them into the gradient's rows. The first (batch,
// head) to reach an element stores (zeros at the block's keys its tile does not keep), a later
// one of a broadcast bias adds, in the same order at any thread count.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_DIRECTGRADIENT_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_DIRECTGRADIENT_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// One query tile's terms at one key block, and where they go.
struct DirectPatch {
  mlir::Value terms;               // [keyBlock, rows] f32: terms[j, i]
  mlir::Value grad;                // the gradient [B or 1, H or 1, Tq, Tk]
  mlir::Value gradBatch, gradHead; // the tile's (batch, head) in the gradient
  mlir::Value row, count;          // the tile's first row and its rows i < count
  mlir::Value firstKey, keyCount;  // the block's keys firstKey + j, j < keyCount
  mlir::Value begin, end;          // the keys j in [begin, end) the tile kept (begin = end:
                                   // none, a tile the masks skip)
  mlir::Value firstToReach;        // i1: store (else add)
};

// grad[gradBatch, gradHead, row + i, firstKey + j] for i < count and j < keyCount: the first
// to reach it stores terms[j, i] at j in [begin, end) and 0 at the others; a later one adds
// terms[j, i] at j in [begin, end). In 8 x 8 squares transposed in registers where the
// gradient is f32 with contiguous rows at run time, element by element otherwise.
void writeDirectPatch(mlir::ImplicitLocOpBuilder& b, const DirectPatch& patch);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_DIRECTGRADIENT_H
