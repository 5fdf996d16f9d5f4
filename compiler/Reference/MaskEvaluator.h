// Whether score (b, h, i, j) survives the spec's masks and mask_mod, with the run-time mask and
// aux tensors bound. The sparsity patterns are evaluated as their expressions
// (Spec/PatternExpressions), the definitions every code generator compiles or is checked by.
#ifndef ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
#define ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H

#include "Reference/ExpressionInputs.h"
#include "Reference/KernelTensors.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace attnc {

class MaskEvaluator {
public:
  explicit MaskEvaluator(const KernelTensors& tensors);

  // (constraints and mask_mod all pass) and (no sparsity pattern, or some sparsity pattern
  // passes).
  bool allowed(int64_t b, int64_t h, int64_t i, int64_t j) const;

  int64_t offset() const { return offset_; }
  // Where the expressions read (b, h, i, j), with `score`; and what else they read.
  expr::Point point(int64_t b, int64_t h, int64_t i, int64_t j, double score = 0) const;
  const expr::Environment& expressionEnvironment() const { return expressions_.environment(); }

private:
  bool constraintsPass(int64_t b, int64_t h, int64_t qpos, int64_t i, int64_t j) const;

  const Spec& spec_;
  int64_t seqQ_, seqK_, offset_;
  ExpressionInputs expressions_;
  std::vector<int64_t> lengths_;   // padding: [B], clamped to [0, Tk]
  std::vector<double> maskTensor_; // tensor: [B|1, H|1, Tq, Tk]
  int64_t maskBatchStride_ = 0, maskHeadStride_ = 0;
  std::optional<expr::Node> patterns_; // the union of the sparsity patterns
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
