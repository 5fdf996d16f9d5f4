#include "Reference/MaskEvaluator.h"

#include "Reference/HeadInputs.h"
#include "Semantics/Masks.h"
#include "Semantics/Positions.h"
#include "Spec/PatternExpressions.h"

namespace attnc {

MaskEvaluator::MaskEvaluator(const KernelTensors& t)
    : spec_(t.spec()), seqQ_(t.seqQ()), seqK_(t.seqK()),
      offset_(positions::alignmentOffset(t.spec(), t.seqQ(), t.seqK())), expressions_(t),
      patterns_(patternsAsExpression(t.spec(), kExpressiblePatterns)) {
  const Spec& s = spec_;
  if (s.masks.has(MaskKind::Padding))
    lengths_ = keyLengths(t);
  if (s.masks.has(MaskKind::Tensor)) {
    const DLTensor& m = t.tensor("mask");
    maskTensor_ = t.dense("mask");
    maskHeadStride_ = m.shape[1] == 1 ? 0 : seqQ_ * seqK_;
    maskBatchStride_ = m.shape[0] == 1 ? 0 : m.shape[1] * seqQ_ * seqK_;
  }
}

expr::Point MaskEvaluator::point(int64_t b, int64_t h, int64_t i, int64_t j, double score) const {
  return {b, h, h / spec_.groupSize(), i, j, i + offset_, seqQ_, seqK_, score};
}

bool MaskEvaluator::allowed(int64_t b, int64_t h, int64_t i, int64_t j) const {
  int64_t qpos = i + offset_;
  if (!constraintsPass(b, h, qpos, i, j))
    return false;
  const expr::Environment& environment = expressions_.environment();
  if (spec_.maskMod.tree &&
      !expr::evaluate(*spec_.maskMod.tree, point(b, h, i, j), environment).truth())
    return false;
  return !patterns_ || expr::evaluate(*patterns_, point(b, h, i, j), environment).truth();
}

bool MaskEvaluator::constraintsPass(int64_t b, int64_t h, int64_t qpos, int64_t i,
                                    int64_t j) const {
  const MaskSet m = spec_.masks;
  if (m.has(MaskKind::Causal) && !masks::causal(qpos, j))
    return false;
  if (m.has(MaskKind::Padding) && j >= lengths_[b])
    return false;
  if (m.has(MaskKind::Tensor) &&
      maskTensor_[b * maskBatchStride_ + h * maskHeadStride_ + i * seqK_ + j] == 0)
    return false;
  return true;
}

} // namespace attnc
