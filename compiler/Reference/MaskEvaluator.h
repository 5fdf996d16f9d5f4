// The built-in masks, modifiers and dropout of a spec at score (b, h, i, j), evaluated as their
// expressions (Spec/BuiltinExpressions: the definitions every code generator compiles or is
// checked by), and mask_mod, with the run-time tensors they read bound.
#ifndef ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
#define ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H

#include "Reference/ExpressionInputs.h"
#include "Reference/KernelTensors.h"

#include <cstdint>
#include <optional>

namespace attnc {

class MaskEvaluator {
public:
  explicit MaskEvaluator(const KernelTensors& tensors);

  // (constraints and mask_mod all pass) and (no sparsity pattern, or some sparsity pattern
  // passes).
  bool allowed(int64_t b, int64_t h, int64_t i, int64_t j) const;
  // The scaled score with softcap, ALiBi and the bias tensor applied (score_mod comes after).
  double modified(int64_t b, int64_t h, int64_t i, int64_t j, double score) const;
  // score_mod at the modified score x; x without one.
  double scoreModded(int64_t b, int64_t h, int64_t i, int64_t j, double x) const;
  bool hasScoreMod() const { return scoreMod_.has_value(); }
  // Dropout's factor on the probability where it weights v_j: 1 / (1 - p) or 0; 1 without.
  double dropFactor(int64_t b, int64_t h, int64_t i, int64_t j) const;

  const Spec& spec() const { return spec_; }
  const ExpressionInputs& expressions() const { return expressions_; }
  int64_t offset() const { return offset_; }
  // Where the expressions read (b, h, i, j), with `score`.
  expr::Point point(int64_t b, int64_t h, int64_t i, int64_t j, double score = 0) const;

private:
  const Spec& spec_;
  int64_t seqQ_, seqK_, offset_;
  ExpressionInputs expressions_;
  std::optional<expr::Node> masks_, scoreMod_, modifiers_, dropout_; // BuiltinExpressions.h
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
