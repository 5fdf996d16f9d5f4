// Gathered key tiles for strided and dilated attention.
//
// Both patterns join the query at position p only to keys j with j = p (mod s), s the stride or
// the dilation. Sorting rows and keys by that residue class c — class c holds keys c, c + s,
// c + 2s, ... and the rows whose position is c mod s — turns the pattern into s dense
// attentions (strided) or s banded ones (dilated: a window of left + right + 1 keys of the
// class) over sub-sequences of length T/s. The online softmax streams over keys in this order,
// so a key block is a tile of one class's keys gathered from K and V, and blocks of other
// classes are skipped whole: the work follows the allowed fraction of the matrix instead of
// masking dense tiles.
//
// Positions in the sorted order are slots. Each class gets ceil(T/s) slots rounded up to whole
// query tiles (rows) and key blocks (keys), so every tile and block lies in one class: a live
// block pairs rows and keys of the same class, where the pattern's residue test always holds
// (ScoreTerms::keep leaves it out). Slots past a class's share of the sequence are phantom rows
// (computed only in tiles that hold real rows, never read) and phantom keys (masked, as keys
// past Tk always are).
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_RESIDUEORDER_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_RESIDUEORDER_H

#include "Backends/Halide/ScoreTerms.h"
#include "Spec/Spec.h"

#include <Halide.h>
#include <functional>
#include <optional>

namespace attnc::halide {

class ResidueOrder {
public:
  // The order for `spec` when its only sparsity pattern is strided or dilated (any constraints
  // beside it); none otherwise, and for Linformer, whose masks act before its projection.
  static std::optional<ResidueOrder> forSpec(const Spec& spec, Halide::Expr seqQ,
                                             Halide::Expr seqK, Halide::Expr offset,
                                             int queryTile, int keyBlock);

  // The stride or dilation: a live block's query and key positions agree mod it.
  int period() const { return period_; }
  Halide::Expr rowSlots() const { return rowsPerClass_ * period_; }
  Halide::Expr keySlots() const { return keysPerClass_ * period_; }
  // The sequence position in a slot (past the sequence for phantom slots; below rowSlots and
  // keySlots, so clamping a table of them to those bounds changes nothing).
  Halide::Expr row(Halide::Expr slot) const;
  Halide::Expr key(Halide::Expr slot) const;
  // The slot of query row i (0 <= i < Tq).
  Halide::Expr slotOfRow(Halide::Expr i) const;

  // Whether the key slots of `slots` (one key block) can matter to its row slots (one query
  // tile): never when their classes differ or either holds only phantoms; within one class, as
  // `positionsLive` (the mask's classification over a region of positions: causal, padding, the
  // dilated window) says of the positions they hold.
  Halide::Expr blockLive(const ScoreRegion& slots,
                         const std::function<Halide::Expr(const ScoreRegion&)>& positionsLive) const;

private:
  ResidueOrder(int period, Halide::Expr seqQ, Halide::Expr seqK, Halide::Expr offset,
               int queryTile, int keyBlock);

  int period_;
  Halide::Expr seqQ_, seqK_, rowsPerClass_, keysPerClass_, offset_;
};

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_RESIDUEORDER_H
