//===- BackwardTile.h - one query tile's probabilities and score gradients -------===//
//
// What every task of an attn.backward's lowering recomputes for a tile of query rows of one
// batch and head (the rows in vector lanes, as in the forward's update) at a few keys j:
//
//   x_j  = sum_c packedQ[c, :] k_jc            packedQ = scale Q[rows, :]^T (attn.pack_query)
//   dp_j = sum_c packedDO[c, :] v_jc           packedDO = dO[rows, :]^T
//   p_j  = kept ? exp(score_mod(x_j) - lse) : 0
//   g_j  = scale p_j (z_j dp_j - D) score_grad(x_j)       (the gradient of the raw q.k)
//
// z_j dropout's factor (1 without), and z_j p_j what weights v_j (dV's product).
//
// with lse and D (rowsum(dO * O), the first phase's) of the tile's rows. Rows past the
// tile's count are not kept. A -inf score gives p = 0 even where lse is -inf; a NaN gives NaN.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDTILE_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDTILE_H

#include "attn/IR/AttnOps.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace attnc::attn {

// A task's stack buffers for one query tile: the packed (transposed) rows the scores read,
// and the tile's lse and D. With dot products (bf16 tensors, VectorOptions::dot) the rows are
// packed in pairs instead: [d / 2, 2 rows] bf16, element (c, i) at [c / 2, 2 i + c mod 2], Q
// unscaled (the scale multiplies the f32 scores), as vdpbf16ps takes them.
struct TileBuffers {
  mlir::Value packedQuery; // [d_k, rows] f32: scale Q^T; with dot [d_k / 2, 2 rows] bf16: Q^T
  mlir::Value packedGrad;  // [d_v, rows] f32: dO^T; with dot [d_v / 2, 2 rows] bf16
  mlir::Value lse, delta;  // [rows] f32
  // Per aux operand read at every score (ScoreTerms::scoreShapedAux: a bias), its elements at
  // the block's keys and the tile's rows, [keyBlock, rows] f32 (ScorePatch.h); else null.
  llvm::SmallVector<mlir::Value> scoreShaped;
};

// A key block's K and V rows transposed, [d_k, keyBlock] and [d_v, keyBlock] f32, key j at
// column j - firstKey (copyRowsTransposed), packed once per block for all its query tiles: the
// widened products broadcast a key group's elements c from side by side, one address for the
// group where the tensors' rows lie a run-time stride apart. Null with dot (pairs read the
// tensors).
struct BlockColumns {
  mlir::Value keys, values, firstKey, keyCount;
};

class BackwardTile {
public:
  // The tile of `count` (<= rows) rows from `firstRow` of (batch, head) of `op`; `delta` the
  // [B, H, Tq] workspace of D; `block` the key block whose keys at() takes. Emits, at b,
  // nothing but the values the regions read.
  BackwardTile(mlir::ImplicitLocOpBuilder& b, BackwardOp op, mlir::Value batch, mlir::Value head,
               mlir::Value firstRow, mlir::Value count, mlir::Value delta,
               const TileBuffers& buffers, const BlockColumns& block, int64_t rows,
               const VectorOptions& options);
  ~BackwardTile();

  // The keys of [begin, end) the masks can keep for some row of the tile (KeyRange.h).
  std::pair<mlir::Value, mlir::Value> keptKeys(mlir::ImplicitLocOpBuilder& b, mlir::Value begin,
                                               mlir::Value end);
  // Packs the tile's query and output gradient rows, copies its lse and D, and reads the
  // score-shaped aux tensors' elements at the block's keys, at b.
  void load(mlir::ImplicitLocOpBuilder& b);

  // A score vector's terms of the aux tensors' gradients: with an aux_grad region, the
  // region's reads, each its indices (i32 vectors) then its term dx_ij / (scale score_grad)
  // times the read's partial, 0 where p is; and the vector's place in the block's buffers.
  struct AuxTerms {
    llvm::SmallVector<mlir::Value> reads;
    llvm::SmallVector<mlir::Value, 2> place;
  };
  // Stores z p and g (see above) at `keys` into probs[key - firstKey, :] and grads[...] of
  // the block's [keyBlock, rows] buffers; returns the AuxTerms of each score vector
  // [u * rows / lanes + r] (key u, row vector r). z p goes to memory before dP's products,
  // so that their accumulators have the registers.
  llvm::SmallVector<AuxTerms> at(mlir::ImplicitLocOpBuilder& b, mlir::ArrayRef<mlir::Value> keys,
                                 mlir::Value probs, mlir::Value grads);

private:
  // What at() carries from the scores to their gradients, per [u * vectorCount + r]: the raw
  // score x, the rows' positions (i32), whether kept, and p where dropout's z p differs from
  // it (else null); per key u its position (i32 splat) and row in the block's buffers.
  struct KeyGroupScores {
    llvm::SmallVector<mlir::Value> raw, positions, keeps, unDropped;
    llvm::SmallVector<mlir::Value> keyPositions, local;
    // The [keyBlock, rows] buffers' place of score vector `at`.
    llvm::SmallVector<mlir::Value, 2> place(mlir::ImplicitLocOpBuilder& b, size_t at,
                                            int64_t vectors, int64_t lanes) const;
  };
  // The keys' scores and z p = z exp(s - lse) where kept, stored into probs.
  KeyGroupScores storeProbabilities(mlir::ImplicitLocOpBuilder& b, mlir::ArrayRef<mlir::Value> keys,
                                    mlir::Value probs);
  // dP's products, then g stored into grads; returns the aux terms (at()'s).
  llvm::SmallVector<AuxTerms> storeScoreGradients(mlir::ImplicitLocOpBuilder& b,
                                                  mlir::ArrayRef<mlir::Value> keys,
                                                  const KeyGroupScores& scores, mlir::Value probs,
                                                  mlir::Value grads);
  // Row vector r's lanes: their positions i + off (i32), and whether each is a row of the tile.
  std::pair<mlir::Value, mlir::Value> rowLanes(mlir::ImplicitLocOpBuilder& b, int64_t r);
  // buffers.scoreShaped's patches, at the tile's (batch, head) clamped into each tensor.
  void readScoreShapedAux(mlir::ImplicitLocOpBuilder& b);
  llvm::SmallVector<mlir::Value> auxTerms(mlir::ImplicitLocOpBuilder& b, mlir::Value x,
                                          mlir::Value queryPos, mlir::Value keyPos,
                                          mlir::Value keep, mlir::Value byModified);
  // Sum_c packed[c, :] * rows[batch, kvHead, key, c] for each key and row vector: FMAs on
  // `transposed` (the block's rows of rowsOf, BlockColumns) at the keys' block rows `local`,
  // or with dot vdpbf16ps over pairs of c of rowsOf.
  llvm::SmallVector<mlir::Value> products(mlir::ImplicitLocOpBuilder& b, mlir::Value packed,
                                          mlir::Value rowsOf, mlir::Value transposed,
                                          mlir::ArrayRef<mlir::Value> keys,
                                          mlir::ArrayRef<mlir::Value> local);
  mlir::Value keyPair(mlir::ImplicitLocOpBuilder& b, mlir::Value rowsOf, mlir::Value key,
                      mlir::Value pair);

  BackwardOp taskOp; // the op narrowed to the tile: what ScoreTerms and KeyRange read
  mlir::Value batch, head, firstRow, count, delta, kvHead;
  TileBuffers buffers;
  BlockColumns block;
  const int64_t rows, lanes, vectorCount;
  const bool dot;
  std::optional<ScoreTerms> terms;
  mlir::Value positionOffset; // off: query row i's position is i + off
};

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_BACKWARDTILE_H
