//===- PairedOperands.h - K and V laid out for bf16 pair products -------------===//
//
// An AMX tile product C += A B reads A as 16 rows of 32 bf16 and B as 16 rows of 16 pairs of
// bf16, the pairs along the contraction (tdpbf16ps). The CPU update (LowerUpdate.cpp) forms
// S^T = K Q^T, keys by query rows, and O^T += V^T P^T, value columns by query rows, so that
// S^T and O^T keep the query rows in the lanes of their rows as the vector lowering does:
// K is A as it is stored, V^T is A transposed. Q^T and P^T, the B operands, are the task's
// own and paired there. AVX512-BF16's vdpbf16ps (16 lanes += 16 pairs x 16 pairs) reads the
// same operands: a pair of Q^T's or P^T's rows as the vector, and one pair of K's row or of
// V^T's (two keys of a column, adjacent in its chunk) broadcast.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_PAIREDOPERANDS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_PAIREDOPERANDS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/PatternMatch.h"

namespace attnc::attn {

// Workspace buffers of bf16, zero past Tk up to Tk rounded up to `blockKeys` (Tk'), so that an
// update's whole key block, and every 16 keys of it, can be loaded as tiles:
//   keys    [B, H_kv, Tk', d_k]           K, contiguous rows
//   values  [B, H_kv, Tk' / 32 + 1, d_v, 32]  V^T in chunks of 32 keys, so that a tile (16
//                                         columns by 32 keys) is 1 KiB in a row: rows Tk' apart
//                                         would fall in one set of the L1 cache; the last chunk
//                                         zero, for tile steps over keys not attended
// The keys of a chunk of PairedOperands::values (a V^T tile's row of 32 bf16).
inline constexpr int64_t kValueChunkKeys = 32;

struct PairedOperands {
  mlir::Value keys, values;
};

// Whether `op` (a tiled update, query packed) can take its products in pairs: K and V bf16
// defined outside its task loop, d_k a multiple of 32, d_v of 16 (paired::kKeyDims,
// kValueDims), a tile of a multiple of 16 rows and key blocks of a multiple of 32.
bool takesPairedProducts(OnlineUpdateOp op);

// A phase before the one running `op` that fills PairedOperands from op's K and V, one task per
// (batch entry, KV head, block of `blockKeys` keys); the buffers are allocated before the
// kernel's first phase and freed at its end.
PairedOperands layOutPairedOperands(mlir::RewriterBase& rewriter, OnlineUpdateOp op,
                                    int64_t blockKeys);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_PAIREDOPERANDS_H
