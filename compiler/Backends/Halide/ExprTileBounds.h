// The tile classifier of the Halide backend: whether a mask expression can keep any element of a
// query tile x key block, and whether it can drop any, from interval bounds of the expression
// over the tile's coordinates, computed by the kernel from the tile's corners (so it holds for
// every sequence length). A block it rules out is never visited: ScoreTerms::blockLive puts it
// in the block loop's predicate, which Halide turns into loop bounds when it is affine
// (kv_idx <= qpos becomes the causal bound) and into a per-block test otherwise. A block it
// proves wholly kept skips the elementwise mask (AttentionAlgorithm.h).
//
// A part of the mask that reads the rows and keys only as blocks (q_idx // 64, kv_idx // 64) and
// reads an aux tensor or draws from Philox (block_sparse's layout, BigBird's random blocks, a
// written block table) is evaluated exactly at each pair of blocks the tile overlaps, when they
// are few: FlexAttention's block mask, computed from the expression itself.
//
// An aux read whose indices vary over the tile along one dimension, by a span known when the
// kernel is built (q_idx + 3, kv_idx / 2, ...: at most the tile's rows or keys), is bounded by
// the least and greatest element over the index's range. The kernel reads them from a summary
// of the aux tensor it computes once per call (AuxSummaries: per chunk of kSummaryChunk indices,
// the least and greatest element), a few lookups per block: FlexAttention's BlockMask, built by
// the kernel from the aux tensor instead of by the user. A document mask's block is ruled out
// when the tile's query documents and the block's key documents cannot meet. A read whose
// indices vary along several dimensions, each by such a span (a block table at q_idx // 64,
// kv_idx // 64), is bounded by reading every element of the box they span, when that is a few.
//
// The bounds are sound for the kernel's own arithmetic: ints are exact, or any int32 where the
// kernel's op may wrap (the language leaves that result unspecified), with 64-bit ends so that
// no bound's arithmetic overflows; the float operations used (+, -, *, / by a constant, floor,
// min, max) are monotone in each operand under rounding, so their values at the corners bound
// their values inside. NaN, which has no order, is tracked beside the bounds: where an aux
// element is NaN, or arithmetic may make one (inf - inf, 0 * inf), a comparison may go either
// way. A part with one value over the tile (it reads b, h, g, Tq, Tk or params, but no row, key,
// aux tensor or draw) is that value, computed as the kernel computes it. What has no such bound
// here (reads whose indices vary by spans unknown when the kernel is built, transcendental
// functions, bit) is taken as able to be anything.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTILEBOUNDS_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTILEBOUNDS_H

#include "Backends/Halide/ExprToHalide.h"
#include "Spec/Spec.h"

#include <Halide.h>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnc::halide {

// The ranges of the variables over one tile, each end included.
struct TileRanges {
  Halide::Expr firstRow, lastRow, firstKey, lastKey, firstPos, lastPos;
  Halide::Expr b, h, g, tq, tk;
  int maxRows, maxKeys; // the most rows and keys a tile has (the schedule's tile sizes)
};

// The indices a summary entry covers along its dimension.
inline constexpr int kSummaryChunk = 16;

// For each aux tensor and each dimension along which a mask's read of it varies over a tile,
// the least and greatest element of every chunk of kSummaryChunk indices along that dimension
// (the others indexed as the tensor is).
class AuxSummaries {
public:
  struct Summary {
    Halide::Func least, greatest;
    Halide::Func nan; // a float tensor's: whether the chunk holds a NaN (undefined for ints)
  };
  AuxSummaries(const std::optional<expr::Node>& mask,
               const std::map<std::string, Halide::ImageParam>& aux);
  const Summary* find(const std::string& tensor, int dimension) const;
  // The schedule computes them once per call, with the other small tables.
  std::vector<Halide::Func> funcs() const;

private:
  std::map<std::pair<std::string, int>, Summary> summaries_;
};

// What `mask` can be over a tile: mayKeep is false only when it is false at every element (the
// tile is never visited), mayDrop only when it is true at every element (the tile skips the
// elementwise mask). `aux` holds the aux tensors, `draws` the mask's tabled draws (a part that
// draws anything else is not evaluated per pair of blocks: unrolled Philox rounds in the
// predicate take Halide minutes to compile).
struct TileClass {
  Halide::Expr mayKeep, mayDrop;
};
TileClass classifyMask(const expr::Node& mask, const TileRanges& tile, const Spec& spec,
                       const std::map<std::string, Halide::ImageParam>& aux,
                       const AuxSummaries& summaries, const TabledDraws& draws);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTILEBOUNDS_H
