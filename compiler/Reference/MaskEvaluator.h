// Whether score (b, h, i, j) survives the spec's masks and mask_mod, with the run-time mask and
// aux tensors bound.
#ifndef ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
#define ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H

#include "Reference/ExpressionInputs.h"
#include "Reference/KernelTensors.h"

#include <cstdint>
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
  bool somePatternPasses(int64_t h, int64_t qpos, int64_t i, int64_t j) const;
  bool bigbirdPasses(int64_t h, int64_t i, int64_t j) const;

  const Spec& spec_;
  int64_t seqQ_, seqK_, offset_;
  ExpressionInputs expressions_;
  std::vector<int64_t> lengths_;   // padding: [B], clamped to [0, Tk]
  std::vector<double> maskTensor_; // tensor: [B|1, H|1, Tq, Tk]
  int64_t maskBatchStride_ = 0, maskHeadStride_ = 0;
  std::vector<double> blockLayout_; // block_sparse: [H|1, ceil(Tq/block), ceil(Tk/block)]
  int64_t layoutHeadStride_ = 0;
  int64_t queryBlocks_ = 0, keyBlocks_ = 0;
  std::vector<int64_t> randomBlocks_; // bigbird: [H][query block][r]
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_MASKEVALUATOR_H
