// The derivatives of a score's chain after the variant's raw score r,
//   x0 = scale r,  x1 = modifiers(x0),  s = score_mod(x1)
// (Spec/BuiltinExpressions: softcap, ALiBi and the bias tensor; then the spec's score_mod),
// taken by Expr/ExprDerive and evaluated where the forward evaluates the expressions, and the
// gradients of the float aux tensors they read (bias, a score_mod's tables).
#ifndef ATTNC_COMPILER_REFERENCE_SCOREDERIVATIVES_H
#define ATTNC_COMPILER_REFERENCE_SCOREDERIVATIVES_H

#include "Expr/ExprDerive.h"
#include "Reference/MaskEvaluator.h"

#include <map>
#include <string>

namespace attnc {

// Where a score sits and its values along the chain.
struct ScoreSite {
  int64_t b, h, i, j;
  double scaled, modified; // x0, x1
};

// dL/dx1 and dL/dx0 of a score, from dL/ds.
struct ChainGradients {
  double modified, scaled;
};

// dL/d each element of the float aux tensors, dense as the tensors are.
using AuxGradients = std::map<std::string, std::vector<double>>;

class ScoreDerivatives {
public:
  explicit ScoreDerivatives(const MaskEvaluator& mask);

  ChainGradients chain(const ScoreSite& site, double scoreGradient) const;
  // Whether the chain reads a float aux tensor, whose gradient addAux accumulates.
  bool readsAux() const { return !modifierReads_.empty() || !scoreModReads_.empty(); }
  // Adds what one score's gradients give each aux element it reads.
  void addAux(const ScoreSite& site, double scoreGradient, const ChainGradients& chain,
              AuxGradients& gradients) const;
  // Zero gradients for every float aux tensor the chain reads.
  AuxGradients zeroAuxGradients() const;

private:
  void addReads(const std::vector<expr::AuxPartial>& reads, const expr::Point& point,
                double gradient, AuxGradients& gradients) const;

  const MaskEvaluator& mask_;
  std::optional<expr::Node> byModifierInput_, byScoreModInput_; // nullopt: the identity
  std::vector<expr::AuxPartial> modifierReads_, scoreModReads_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_SCOREDERIVATIVES_H
