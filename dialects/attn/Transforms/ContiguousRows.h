//===- ContiguousRows.h - K's and V's rows copied together ---------------------===//
//
// A widened update's QK^T register tile broadcasts each key's elements from K's row, and its
// PV tile each key's V row, a key block's rows one after another. Where a head's rows lie
// H_kv d elements apart (layout=bshd, mha's heads side by side), a block's rows fall into a
// few sets of the L1 cache: rows 2 KiB apart (H 8, d 64 f32) share 8 of a 32 KiB 8-way L1's 64
// sets, and each row is another page. A phase before the attention's copies such rows into a
// buffer of their own, [B, H_kv, T, d] with a head's rows contiguous: the cost is one read and
// write of K and V and their size in memory again.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/PatternMatch.h"

namespace attnc::attn {

// Whether `rows`, an update's K or V [B, H_kv, T, d] defined outside its task loop, is a view
// whose type does not make a head's rows contiguous (strides other than d and 1 for its last
// two dims, or strides known at run time only).
bool rowsMayLieApart(OnlineUpdateOp op, mlir::Value rows);

// A buffer [B, H_kv, T, d] of `rows`' element type, allocated before the kernel's first phase
// and freed at its end, which a phase before the one running `op` fills with `rows`: a task
// per 64 rows of a (batch entry, head).
mlir::Value copyRowsTogether(mlir::RewriterBase& rewriter, OnlineUpdateOp op, mlir::Value rows);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_CONTIGUOUSROWS_H
