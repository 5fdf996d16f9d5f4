// Everything in a score element beyond q . k, as Halide Exprs: the run-time inputs the spec
// needs (lengths, mask, bias, block layout, aux tensors), the modifiers (softcap, ALiBi, bias,
// score_mod), the masks (every built-in with mask_mod), block liveness from the mask's
// expression, dropout, and RoPE. The modifiers, masks and dropout are the expressions of
// Spec/BuiltinExpressions translated by ExprToHalide: this backend has no copy of its own.
// Shared by the streaming pass and the weights pass, so both see one definition.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_SCORETERMS_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_SCORETERMS_H

#include "Backends/Halide/ExprTileBounds.h"
#include "Backends/Halide/ExprToHalide.h"
#include "Spec/Spec.h"

#include <Halide.h>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnc::halide {

Halide::Type storageType(DType dtype);

// An f32 output value in the dtype's storage type. NaN stays NaN: Halide 14's conversion to f16
// stored it as inf.
Halide::Expr stored(DType dtype, Halide::Expr value);

// A rectangle of the score matrix: rows [firstRow, lastRow] and keys [firstKey, lastKey], at
// most maxRows by maxKeys (the schedule's tile sizes, known when the algorithm is built).
struct ScoreRegion {
  Halide::Expr firstKey, lastKey, firstRow, lastRow;
  int maxRows, maxKeys;
};

class ScoreTerms {
public:
  // Declares q, k, v and the spec's other inputs as ImageParams, in manifest order. With
  // `tablesPerTask` the mask's draws per pair of blocks are tabled for the block tests, in
  // perTaskTables() (a schedule that computes them once per task).
  explicit ScoreTerms(const Spec& spec, bool tablesPerTask = false);

  const std::vector<Halide::ImageParam>& inputs() const { return inputs_; }
  const Halide::ImageParam& q() const { return q_; }
  const Halide::ImageParam& k() const { return k_; }
  const Halide::ImageParam& v() const { return v_; }
  // The variant's parameter tensor `name` (w_q, w1, e, omega, ...: Abi/Arguments.cpp).
  const Halide::ImageParam& param(const std::string& name) const { return params_.at(name); }
  Halide::Expr seqQ() const { return seqQ_; }
  Halide::Expr seqK() const { return seqK_; }
  // The keys the softmax runs over: Tk, or Linformer's proj_len projected keys.
  Halide::Expr keys() const { return keys_; }
  // Keys of batch b that carry data: lengths[b] with a padding mask, seq_lens[b] with a KV cache,
  // else Tk.
  Halide::Expr validKeys(Halide::Expr b) const;
  // q, k or v at (head-dim element, sequence position, head, batch), whatever the layout; mha's
  // [B, T, d_model] inputs ignore the head.
  Halide::Expr load(const Halide::ImageParam& p, Halide::Expr d, Halide::Expr t, Halide::Expr h,
                    Halide::Expr b) const;
  // The query row's position among the keys.
  Halide::Expr position(Halide::Expr queryRow) const { return queryRow + offset_; }
  // Where query row `queryRow` of batch b sits for RoPE: position(queryRow), or with a KV cache
  // its position at the end of the sequence's seq_lens[b] keys.
  Halide::Expr queryPosition(Halide::Expr queryRow, Halide::Expr b) const;

  // softcap, then ALiBi, then the bias tensor (their expressions, Spec/BuiltinExpressions),
  // then score_mod, on a scaled score.
  Halide::Expr modified(Halide::Expr score, Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                        Halide::Expr b) const;
  // Whether the masks and mask_mod keep (queryRow, key); false for keys past Tk. A nonzero
  // `residuePeriod` is the caller's guarantee (ResidueOrder) that query and key positions agree
  // mod it, so the mask's tests (qpos - kv_idx) % m == 0 for m dividing it are left out.
  // A draw per pair of blocks is made at each score: read from its table per task instead (a
  // gather per score vector) the random block mask of docs/spec.md ran 1.6x slower.
  Halide::Expr keep(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h, Halide::Expr b,
                    int residuePeriod = 0) const;
  // Whether keys [firstKey, lastKey] can matter to rows [firstRow, lastRow] of head h at all:
  // the mask's expression classified over the region (ExprTileBounds); true when its bounds do
  // not rule the region out.
  Halide::Expr blockLive(const ScoreRegion& region, Halide::Expr h, Halide::Expr b) const;
  // Whether the masks and mask_mod keep every element of the region, keys past Tk included
  // (there are none): the mask's expression classified over it. Undefined when no region can be
  // proven so (no mask, or one the bounds never pin down), so the kernel tests nothing.
  Halide::Expr blockFull(const ScoreRegion& region, Halide::Expr h, Halide::Expr b) const;
  // The factor dropout puts on prob(queryRow, key): its expression (Spec/BuiltinExpressions),
  // 1 / (1 - p) when kept, 0 when dropped. Only for a spec with dropout.
  Halide::Expr dropFactor(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                          Halide::Expr b) const;
  // Small tables the terms read (RoPE's cos/sin, aux summaries, the mask's draws per row):
  // the schedule computes them once per call.
  std::vector<Halide::Func> tables() const;
  // Tables blockLive reads at the task's query tile, head and batch (the mask's draws per pair
  // of blocks: (key block, query block, h, b)): the schedule computes them once per task.
  const std::vector<Halide::Func>& perTaskTables() const { return perTaskTables_; }

  // Tables the tile classes of the mask's conjuncts that read aux tensors, per (key block, query
  // tile, h, b) of these sizes, in perTaskTables(): the block loop's predicate then reads an
  // entry instead of inlining their bounds, which Halide's bounds inference solves again for
  // every box it computes (a mask with 10 aux reads took minutes to compile). For regions
  // aligned to these sizes (no residue order); a CPU schedule computes the table per task, a
  // CUDA one per call.
  void tableTileClasses(int queryTile, int keyBlock);

  // Element d of x rotated by RoPE at `position`, where element(e) gives x's element e.
  Halide::Expr rotated(const std::function<Halide::Expr(Halide::Expr)>& element, Halide::Expr d,
                       Halide::Expr position) const;

private:
  // The mask's draws as tables (TabledDraws): those that read no key per row (or block of rows),
  // head and batch, once per call; with `perTask`, those that read keys and rows only as blocks
  // per pair of blocks, once per task.
  void tableDraws(bool perTask);
  // Every tabled draw, those per pair of blocks read at the task's head h and batch b (for the
  // block tests).
  TabledDraws drawsInTask(Halide::Expr h, Halide::Expr b) const;
  // The mask's expression classified over the region (ExprTileBounds), for blockLive and
  // blockFull.
  TileClass classified(const ScoreRegion& region, Halide::Expr h, Halide::Expr b) const;
  // `mask` classified over the region.
  TileClass classifiedAs(const expr::Node& mask, const ScoreRegion& region, Halide::Expr h,
                         Halide::Expr b) const;
  // The expressions' variables at (queryRow, key). Rows and keys of a tile's tail are left as
  // they are: the masks drop them, and every aux read is clamped into its tensor.
  ExprPoint expressionPoint(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                            Halide::Expr b, Halide::Expr score) const;

  const Spec& spec_;
  Halide::ImageParam q_, k_, v_, lengths_;
  Halide::ImageParam blockTable_; // a paged cache's
  std::vector<Halide::ImageParam> inputs_;
  std::map<std::string, Halide::ImageParam> params_;
  // What the expressions read by name (Spec/BuiltinExpressions' expressionTensors): the spec's
  // aux tensors and the kernel inputs the built-ins read (lengths, mask, bias, block_layout).
  std::map<std::string, Halide::ImageParam> tensors_;
  // Spec/BuiltinExpressions.h: the modifiers, every mask with mask_mod, dropout's factor.
  std::optional<expr::Node> modifiers_, scoreMod_, mask_, dropout_;
  std::unique_ptr<AuxSummaries> auxSummaries_; // for the mask's block liveness
  TabledDraws rowDraws_;                       // the mask's draws that read no key
  std::vector<Halide::Func> drawTables_;       // their tables
  // The draws per pair of blocks, by drawIdentity: their tables and block sizes (rows 0: the
  // part reads no row).
  struct PairDraw {
    Halide::Func table;
    int rowBlock, keyBlock;
  };
  std::map<std::string, PairDraw> pairDraws_;
  std::vector<Halide::Func> perTaskTables_;
  Halide::Expr seqQ_, seqK_, keys_, offset_;
  Halide::Func rope_; // (pair, position): Tuple(cos, sin)
  // tableTileClasses': the mask's conjuncts that read no aux tensor (classified inline), and
  // the table of the others' classes (bit 0: may keep, bit 1: may drop) with its tile sizes;
  // a bit their bounds never decide is left out of the table (tabledKeep_, tabledDrop_).
  std::optional<expr::Node> inlineMask_;
  Halide::Func tileClasses_;
  int classRows_ = 0, classKeys_ = 0;
  bool tabledKeep_ = false, tabledDrop_ = false;
};

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_SCORETERMS_H
