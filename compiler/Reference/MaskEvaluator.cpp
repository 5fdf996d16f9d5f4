#include "Reference/MaskEvaluator.h"

#include "Semantics/Positions.h"
#include "Spec/BuiltinExpressions.h"

namespace attnc {

MaskEvaluator::MaskEvaluator(const KernelTensors& t)
    : spec_(t.spec()), seqQ_(t.seqQ()), seqK_(t.seqK()),
      offset_(positions::alignmentOffset(t.spec(), t.seqQ(), t.seqK())), expressions_(t),
      masks_(masksWithMaskMod(t.spec(), kBuiltinMasks)), scoreMod_(scoreModAsExpression(t.spec())),
      modifiers_(modifiersAsExpression(t.spec())), dropout_(dropoutAsExpression(t.spec())) {}

expr::Point MaskEvaluator::point(int64_t b, int64_t h, int64_t i, int64_t j, double score) const {
  return {b, h, h / spec_.groupSize(), i, j, i + offset_, seqQ_, seqK_, score};
}

bool MaskEvaluator::allowed(int64_t b, int64_t h, int64_t i, int64_t j) const {
  const expr::Environment& environment = expressions_.environment();
  return !masks_ || expr::evaluate(*masks_, point(b, h, i, j), environment).truth();
}

double MaskEvaluator::modified(int64_t b, int64_t h, int64_t i, int64_t j, double score) const {
  if (!modifiers_)
    return score;
  return expr::evaluate(*modifiers_, point(b, h, i, j, score), expressions_.environment())
      .number();
}

double MaskEvaluator::scoreModded(int64_t b, int64_t h, int64_t i, int64_t j, double x) const {
  if (!scoreMod_)
    return x;
  return expr::evaluate(*scoreMod_, point(b, h, i, j, x), expressions_.environment()).number();
}

double MaskEvaluator::dropFactor(int64_t b, int64_t h, int64_t i, int64_t j) const {
  if (!dropout_)
    return 1;
  return expr::evaluate(*dropout_, point(b, h, i, j), expressions_.environment()).number();
}

} // namespace attnc
