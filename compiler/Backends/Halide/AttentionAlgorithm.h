// The Halide algorithm of fused attention: what is computed, never how (AttentionSchedule.h).
//
// Online softmax over key blocks. For each key block kb of `keyBlock` keys, block-local
// statistics are exact and independent of the other blocks:
//   m_kb = max_j s_ij,  l_kb = sum_j exp(s_ij - m_kb),  a_kb = sum_j exp(s_ij - m_kb) v_j
// and a running state (M, L, A) per query row streams over the blocks, merging each one as
//   M' = max(M, m_kb),  L' = L e^(M - M') + l_kb e^(m_kb - M'),  A' = A e^(M - M') + a_kb e^(m_kb -
//   M')
// which is FlashAttention's rescaled accumulator. The block statistics are producers of the
// state's update, so a schedule computes them inside the loop over blocks and only
// O(rows x (d + 2)) state lives across it: the Tq x Tk score matrix is never stored.
//
// Query rows come in tiles of `queryTile` rows (row, tile), and key blocks a whole tile cannot
// use, by the mask's form, are excluded by the block loop's predicate, from which Halide trims
// the loop: causal, window and padding tiles are never computed. Blocks a tile uses are
// computed for all of its rows; those the mask keeps whole (by the same classifier) skip the
// elementwise mask, and the others are masked element by element.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_ATTENTIONALGORITHM_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_ATTENTIONALGORITHM_H

#include "Backends/Halide/ResidueOrder.h"
#include "Backends/Halide/ScoreTerms.h"
#include "Backends/Halide/VariantOperands.h"
#include "Spec/Spec.h"
#include "halide/Stages.h"

#include <Halide.h>
#include <memory>
#include <optional>
#include <vector>

namespace attnc::halide {

struct AttentionAlgorithm : AttentionStages {
  // Inputs, masks and modifiers; its inputs() are the pipeline's, in manifest order.
  std::shared_ptr<ScoreTerms> terms;
  // The variant's query, key and value operands and the products that make them.
  VariantOperands operands;
  // Strided or dilated attention streams over keys sorted by residue class (ResidueOrder.h):
  // query tiles and key blocks are then tiles of slots, gathered from the sequence.
  std::optional<ResidueOrder> order;
  // Pipeline outputs in manifest order: o, then lse and weights when asked.
  std::vector<Halide::Func> outputs;
};

// Builds the algorithm for `spec` with tiles of `queryTile` query rows and blocks of `keyBlock`
// keys (the granularities of skipping and streaming, chosen by the schedule parameters); with
// `gatherSparse` (a CPU schedule), strided and dilated attention stream in residue order and
// the mask's draws per pair of blocks are tabled once per task for the block tests. Throws UsageError for
// what this backend cannot compute yet, naming it.
AttentionAlgorithm buildAttention(const Spec& spec, int queryTile, int keyBlock,
                                  bool gatherSparse);

// The lowest finite float: masked scores and the initial running max. Finite, so that
// exp(M - M') stays defined when a whole block or row is masked.
inline float kLowest() {
  return -3.4028234663852886e38f;
}

// The score that stands for a NaN or +inf one: the greatest finite float, so a row holding one
// has it as its running max (and only such a row: a finite score that large is +inf after
// any modifier), and every exp and merge of the row stays finite.
inline float kPoisoned() {
  return 3.4028234663852886e38f;
}

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_ATTENTIONALGORITHM_H
