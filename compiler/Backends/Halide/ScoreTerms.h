// Everything in a score element beyond q . k, as Halide Exprs: the run-time inputs the spec
// needs (lengths, mask, bias, block layout, aux tensors), the modifiers (softcap, ALiBi, bias,
// score_mod), the masks (with mask_mod),
// block liveness from the mask's form, dropout, and RoPE. Shared by the streaming pass and the
// weights pass, so both see one definition.
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

// A rectangle of the score matrix: rows [firstRow, lastRow] and keys [firstKey, lastKey], at
// most maxRows by maxKeys (the schedule's tile sizes, known when the algorithm is built).
struct ScoreRegion {
  Halide::Expr firstKey, lastKey, firstRow, lastRow;
  int maxRows, maxKeys;
};

class ScoreTerms {
public:
  // Declares q, k, v and the spec's other inputs as ImageParams, in manifest order.
  explicit ScoreTerms(const Spec& spec);

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
  // Keys of batch b that carry data: lengths[b] with a padding mask, else Tk.
  Halide::Expr validKeys(Halide::Expr b) const;
  // q, k or v at (head-dim element, sequence position, head, batch), whatever the layout; mha's
  // [B, T, d_model] inputs ignore the head.
  Halide::Expr load(const Halide::ImageParam& p, Halide::Expr d, Halide::Expr t, Halide::Expr h,
                    Halide::Expr b) const;
  // The query row's position among the keys.
  Halide::Expr position(Halide::Expr queryRow) const { return queryRow + offset_; }

  // softcap, then ALiBi, then the bias tensor (their expressions, Spec/BuiltinExpressions),
  // then score_mod, on a scaled score.
  Halide::Expr modified(Halide::Expr score, Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                        Halide::Expr b) const;
  // Whether the masks and mask_mod keep (queryRow, key); false for keys past Tk. With
  // `sameResidueClass` the caller guarantees (ResidueOrder) that query and key positions agree
  // mod the stride or dilation, so that test of strided and dilated is left out.
  Halide::Expr keep(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h, Halide::Expr b,
                    bool sameResidueClass = false) const;
  // Whether keys [firstKey, lastKey] can matter to rows [firstRow, lastRow] of head h at all,
  // from the mask's symbolic form (causal, padding, mask_mod's bounds over the region, and the
  // union of window, dilated's window, global tokens and the blocks block_sparse's layout and
  // BigBird draw); true when the form does not rule it out.
  Halide::Expr blockLive(const ScoreRegion& region, Halide::Expr h, Halide::Expr b) const;
  // The factor dropout puts on prob(queryRow, key): its expression (Spec/BuiltinExpressions),
  // 1 / (1 - p) when kept, 0 when dropped. Only for a spec with dropout.
  Halide::Expr dropFactor(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                          Halide::Expr b) const;
  // Small tables the terms read (BigBird's drawn blocks, RoPE's cos/sin, aux summaries): the
  // schedule computes them once per call.
  std::vector<Halide::Func> tables() const;

  // Element d of x rotated by RoPE at `position`, where element(e) gives x's element e.
  Halide::Expr rotated(const std::function<Halide::Expr(Halide::Expr)>& element, Halide::Expr d,
                       Halide::Expr position) const;

private:
  // Whether drawn(qb, kb) holds for some pattern block (qb, kb) the region overlaps.
  Halide::Expr somePatternBlock(const ScoreRegion& region,
                                const std::function<Halide::Expr(Halide::Expr, Halide::Expr)>& drawn) const;
  // The expressions' variables at (queryRow, key), with the tail of a tile clamped inside.
  ExprPoint expressionPoint(Halide::Expr queryRow, Halide::Expr key, Halide::Expr h,
                            Halide::Expr b, Halide::Expr score) const;
  // BigBird's structured and random blocks.
  Halide::Expr bigbirdDrawn(Halide::Expr qb, Halide::Expr kb, Halide::Expr h) const;

  const Spec& spec_;
  Halide::ImageParam q_, k_, v_, lengths_, mask_, bias_, layout_;
  std::vector<Halide::ImageParam> inputs_;
  std::map<std::string, Halide::ImageParam> params_;
  std::map<std::string, Halide::ImageParam> aux_; // the expressions' aux tensors
  std::unique_ptr<AuxSummaries> auxSummaries_;     // for mask_mod's block liveness
  std::optional<expr::Node> modifiers_, dropout_;  // Spec/BuiltinExpressions.h
  std::map<std::string, Halide::ImageParam> builtinInputs_; // what they read: the bias
  Halide::Expr seqQ_, seqK_, keys_, offset_;
  Halide::Func bigbirdRandom_;        // (r, query block, h): the drawn key blocks
  Halide::Func rope_;                 // (pair, position): Tuple(cos, sin)
};

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_SCORETERMS_H
