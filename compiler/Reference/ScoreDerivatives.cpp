#include "Reference/ScoreDerivatives.h"

#include "Expr/ExprEval.h"
#include "Spec/BuiltinExpressions.h"

namespace attnc {

ScoreDerivatives::ScoreDerivatives(const MaskEvaluator& mask) : mask_(mask) {
  const Spec& s = mask.spec();
  if (std::optional<expr::Node> modifiers = modifiersAsExpression(s)) {
    byModifierInput_ = expr::derivativeByScore(*modifiers);
    modifierReads_ = expr::derivativesByAux(*modifiers);
  }
  if (std::optional<expr::Node> scoreMod = scoreModAsExpression(s)) {
    byScoreModInput_ = expr::derivativeByScore(*scoreMod);
    scoreModReads_ = expr::derivativesByAux(*scoreMod);
  }
}

ChainGradients ScoreDerivatives::chain(const ScoreSite& at, double scoreGradient) const {
  const expr::Environment& environment = mask_.expressions().environment();
  auto times = [&](const std::optional<expr::Node>& derivative, double score, double gradient) {
    if (!derivative)
      return gradient;
    return gradient *
           expr::evaluate(*derivative, mask_.point(at.b, at.h, at.i, at.j, score), environment)
               .number();
  };
  const double modified = times(byScoreModInput_, at.modified, scoreGradient);
  return {modified, times(byModifierInput_, at.scaled, modified)};
}

void ScoreDerivatives::addAux(const ScoreSite& at, double scoreGradient,
                              const ChainGradients& chain, AuxGradients& gradients) const {
  addReads(modifierReads_, mask_.point(at.b, at.h, at.i, at.j, at.scaled), chain.modified,
           gradients);
  addReads(scoreModReads_, mask_.point(at.b, at.h, at.i, at.j, at.modified), scoreGradient,
           gradients);
}

void ScoreDerivatives::addReads(const std::vector<expr::AuxPartial>& reads,
                                const expr::Point& point, double gradient,
                                AuxGradients& gradients) const {
  const expr::Environment& environment = mask_.expressions().environment();
  for (const expr::AuxPartial& read : reads) {
    std::vector<int64_t> indices;
    for (const expr::Node& index : read.read.args)
      indices.push_back(expr::evaluate(index, point, environment).i);
    const double partial = expr::evaluate(read.derivative, point, environment).number();
    gradients[read.read.name][mask_.expressions().offset(read.read.name, indices)] +=
        gradient * partial;
  }
}

AuxGradients ScoreDerivatives::zeroAuxGradients() const {
  AuxGradients zero;
  for (const auto* reads : {&modifierReads_, &scoreModReads_})
    for (const expr::AuxPartial& read : *reads)
      zero[read.read.name].assign(mask_.expressions().size(read.read.name), 0);
  return zero;
}

} // namespace attnc
