//===- ContiguousRows.h - K's and V's rows copied together ---------------------===//
//
// A widened update's QK^T register tile broadcasts each key's elements from K's row, and its
// PV tile each key's V row, a key block's rows one after another. Where a head's rows lie
// H_kv d elements apart (layout=bshd's [B, T, H_kv, d] seen heads first, mha's heads side by
// side), a block's rows fall into a few sets of the L1 cache: rows 2 KiB apart (H 8, d 64 f32)
// share 8 of a 32 KiB 8-way L1's 64 sets. A phase before the attention's copies such rows into
// a buffer of their own, [B, H_kv, T, d] with a head's rows contiguous: the cost is one read
// and write of K and V and their size in memory again.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/PatternMatch.h"

namespace attnc::attn {

// Whether `rows`, an update's K or V [B, H_kv, T, d] defined before the kernel's phases, is a
// transposed view whose rows are not the second innermost dim of the buffer it views: the
// kernel's own heads-first view of bshd rows or of mha's projections. A kernel argument in
// the bhsd layout is taken as contiguous, as the runtime's compact tensors are (one passed
// with other strides is read through them, as before).
bool rowsLieApart(OnlineUpdateOp op, mlir::Value rows);

// A buffer [B, H_kv, T, d] of `rows`' element type, allocated before the kernel's first phase
// and freed at its end, which a phase before the one running `op` fills with `rows`: a task
// per 64 rows of a (batch entry, head).
mlir::Value copyRowsTogether(mlir::RewriterBase& rewriter, OnlineUpdateOp op, mlir::Value rows);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H
